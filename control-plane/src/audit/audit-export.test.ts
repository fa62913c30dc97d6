import { describe, expect, it } from "vitest";
import type { AuditEventView } from "./audit.repo.ts";
import { csvField, toCsv, toExportRows, toJsonLines } from "./audit-export.ts";

describe("csvField (OWASP CSV injection)", () => {
  it.each([
    ["=1+1", `"'=1+1"`],
    ["+1", `"'+1"`],
    ["-1", `"'-1"`],
    ["@SUM(A1)", `"'@SUM(A1)"`],
    [" =HYPERLINK(1)", `"' =HYPERLINK(1)"`],
    ["\t=1", `"'\t=1"`],
    ["\r=1", `"'\r=1"`],
    ["\n=1", `"'\n=1"`],
    [" \t\n @x", `"' \t\n @x"`],
    ["\tplain", `"'\tplain"`],
  ])("prefixes a formula: %j", (value, field) => {
    expect(csvField(value)).toBe(field);
  });

  it.each([
    ["plain", "plain"],
    ["a,b", `"a,b"`],
    ['say "hi"', `"say ""hi"""`],
    ["x = 1", "x = 1"],
    ["  spaced", "  spaced"],
    [null, ""],
    [{ a: 1 }, `"{""a"":1}"`],
  ])("leaves other text as it is (quoted where CSV needs it): %j", (value, field) => {
    expect(csvField(value)).toBe(field);
  });
});

const event = (fields: Partial<AuditEventView>): AuditEventView => ({
  id: "1",
  at: "2026-11-26T10:00:00.000Z",
  environment: "staging",
  actor: "operator:opr_a",
  actor_name: "alice@example.test",
  action: "grant_approved",
  item_name: "GITHUB_TOKEN",
  host: null,
  reason: null,
  detail: {},
  ...fields,
});

describe("toExportRows", () => {
  it("names who acted, drops ids and hashes from the details and names agents", () => {
    const names = new Map([["cli_1", "Claude Code"]]);
    const [member, agent, system] = toExportRows(
      [
        event({
          detail: { grant_id: "grt_1", agent_id: "cli_1", policy: "item_standing", body_sha256: "ab" },
        }),
        event({ actor: "agent:cli_1", actor_name: null, detail: { tool_id: "http_request", jti_hash: "x" } }),
        event({ actor: "system", actor_name: null }),
      ],
      names,
    );
    expect(member).toMatchObject({
      who: "alice@example.test",
      detail: { agent: "Claude Code", policy: "item_standing" },
    });
    expect(member!.detail).not.toHaveProperty("grant_id");
    expect(member!.detail).not.toHaveProperty("body_sha256");
    expect(agent).toMatchObject({ who: "Claude Code", detail: {} });
    expect(system!.who).toBe("Latch");
  });

  it("writes CSV with a header line and CRLF, and JSON Lines one object a line", () => {
    const rows = toExportRows([event({ item_name: "=cmd" })], new Map());
    const csv = toCsv(rows);
    expect(csv.split("\r\n")[0]).toBe("at,environment,who,actor,action,credential,host,reason,detail");
    expect(csv).toContain(`"'=cmd"`);
    expect(csv.endsWith("\r\n")).toBe(true);
    expect(JSON.parse(toJsonLines(rows).trim())).toMatchObject({
      who: "alice@example.test",
      credential: "=cmd",
    });
  });
});
