// The hosted leak test: a canary stored through the items API, used by an agent over MCP, rotated,
// collected through a need request. It may come back only from /runtime/resolve to a trusted
// token; it must appear in no other answer, no log line of either tier, no audit row, and no
// database column in clear.
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { telemetry as egressTelemetry } from "../../egress-proxy/src/telemetry.ts";
import { telemetry } from "../src/telemetry.ts";
import { connectAgent, type HostedHarness, listenHosted, readyOperator, toolAnswer } from "./hosted.ts";
import { type OtlpReceiver, startOtlpReceiver } from "./otlp-receiver.ts";

const CANARY = "cnry_hosted_5e6f7a8b9c0d1e2f3a4b";
const ROTATED = "cnry_rotated_0a1b2c3d4e5f6a7b8c9d";
const COLLECTED = "cnry_collected_9f8e7d6c5b4a39281";
const canaries = [CANARY, ROTATED, COLLECTED];
const forms = (v: string) => [v, Buffer.from(v).toString("base64"), encodeURIComponent(v), v.slice(5, 21)];

let h: HostedHarness;
let url: string;
/** Both tiers export their spans and the audit's log records here: searched like a log. */
let otlp: OtlpReceiver;
beforeAll(async () => {
  otlp = await startOtlpReceiver();
  ({ h, url } = await listenHosted(
    (req, res) => {
      res.writeHead(200, {
        "content-type": "application/json",
        "x-request-id": String(req.headers.authorization),
      });
      res.end(JSON.stringify({ echoed: req.headers.authorization, url: req.url }));
    },
    { otlpEndpoint: otlp.url },
  ));
}, 60_000);
afterAll(async () => {
  await h.close();
  await otlp.close();
});

describe("hosted canaries", () => {
  it("never leave the sealed store except through trusted resolve", async () => {
    const answers: string[] = [];
    const op = await readyOperator(h, "canary");

    const created = await op.request("POST", "/api/items", {
      name: "CANARY_KEY",
      value: CANARY,
      environment: "staging",
      allowed_hosts: ["api.latch.test"],
    });
    answers.push(created.body);
    const token = (await op.request("POST", "/api/clients/model", { environment: "staging" })).json().token;
    const trusted = (await op.request("POST", "/api/clients/trusted", { environment: "staging" })).json()
      .token;
    const agent = await connectAgent(url, token, "canary-agent");
    const callTool = async (name: string, args: Record<string, unknown>) => {
      const result = await agent.callTool({ name, arguments: args });
      answers.push(JSON.stringify(result));
      return toolAnswer(result);
    };
    const pending = await callTool("http_request", {
      method: "GET",
      path: "/v1/a?x=1",
      item_name: "CANARY_KEY",
    });
    await op.request("POST", `/api/grants/${pending.grant_id}/approve`, { policy: "session" });
    expect(
      (await callTool("http_request", { method: "GET", path: "/v1/a", item_name: "CANARY_KEY" }))
        .origin_status,
    ).toBe(200);
    answers.push(
      (await op.request("POST", `/api/items/${created.json().item.id}/rotate`, { value: ROTATED })).body,
    );
    expect(
      (await callTool("http_request", { method: "GET", path: "/v1/b", host: "api.latch.test" }))
        .origin_status,
    ).toBe(200);
    const miss = await callTool("http_request", {
      method: "GET",
      path: "/v1/c",
      host: "api.latch.test",
      item_name: "OTHER_KEY",
    });
    answers.push(
      (await op.request("POST", `/api/need-items/${miss.need_id}/fulfill`, { value: COLLECTED })).body,
    );
    expect(
      (await callTool("http_request", { method: "GET", path: "/v1/c", item_name: "OTHER_KEY" }))
        .origin_status,
    ).toBe(200);
    await callTool("list_items", {});
    await callTool("find_items", { host: "api.latch.test" });
    await callTool("list_grants", {});
    for (const path of [
      "/api/items",
      "/api/inbox",
      "/api/grants",
      "/api/audit",
      "/api/access",
      "/api/access/events",
    ]) {
      answers.push((await op.request("GET", path)).body);
    }
    // The one legitimate way out: a trusted runtime's resolve.
    const resolved = await fetch(`${url}/runtime/resolve`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${trusted}` },
      body: JSON.stringify({ item_name: "CANARY_KEY" }),
    });
    expect(((await resolved.json()) as { value: string }).value).toBe(ROTATED);
    await agent.close();

    await Promise.all([telemetry().flush(), egressTelemetry().flush()]);
    expect(otlp.spans().some((span) => span.name.includes("Execute"))).toBe(true);
    expect(otlp.logRecords().length).toBeGreaterThan(0);
    const everywhere: [string, string][] = [
      ["OpenTelemetry export", otlp.raw.join("\n")],
      ["answers", answers.join("\n")],
      ["control plane logs", h.logs.text()],
      ["egress proxy logs", h.egress.logs.text()],
      ["mails", h.inbox.mails.map((m) => m.raw).join("\n")],
    ];
    const tables = await sql<{ tablename: string }>`
      select tablename from pg_tables where schemaname = 'public'`.execute(h.plane.database.db);
    for (const { tablename } of tables.rows) {
      const rows = await sql<{
        row: string;
      }>`select row_to_json(t)::text as row from ${sql.table(tablename)} t`.execute(h.plane.database.db);
      everywhere.push([`table ${tablename}`, rows.rows.map((r) => r.row).join("\n")]);
    }
    for (const [where, text] of everywhere) {
      for (const canary of canaries) {
        for (const form of forms(canary))
          expect(text.includes(form), `${where} contains ${form}`).toBe(false);
      }
    }
  });
});
