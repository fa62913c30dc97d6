import { AppError } from "@latch/shared/errors";
import { describe, expect, it } from "vitest";
import { MAX_RULES, parsePolicyRules, RULE_ID } from "./policy-rules.ts";

/** The refusal of a list, as its code, message and named rule/field. */
function refusalOf(rules: unknown): { code: string; message: string; extra: Record<string, unknown> } {
  try {
    parsePolicyRules(rules);
  } catch (error) {
    if (error instanceof AppError)
      return { code: error.code, message: error.message, extra: { ...error.extra } };
    throw error;
  }
  throw new Error("the list was accepted");
}

describe("a valid list", () => {
  it("is answered as stored: ids made, hosts lowercased, methods uppercased, enabled by default", () => {
    const [rule] = parsePolicyRules([
      {
        name: "GitHub reads",
        effect: "allow",
        match: { hosts: ["API.GitHub.com."], methods: ["get", "GET"] },
      },
    ]);
    expect(rule).toMatchObject({
      name: "GitHub reads",
      effect: "allow",
      match: { hosts: ["api.github.com"], methods: ["GET"] },
      enabled: true,
    });
    expect(rule?.id).toMatch(RULE_ID);
    expect(rule?.id.startsWith("github-reads-")).toBe(true);
  });

  it("stores a client id as ids are made (lowercase, no spaces), and a name as written", () => {
    const [rule] = parsePolicyRules([
      {
        id: "agents",
        effect: "deny",
        match: { agents: ["CLI_0123456789ABCDEF", " cli_0123456789abcdee ", "Claude Code"] },
      },
    ]);
    expect(rule?.match.agents).toEqual(["cli_0123456789abcdef", "cli_0123456789abcdee", "Claude Code"]);
  });

  it("keeps the caller's ids, and a rule without a name is named by its id", () => {
    const rules = parsePolicyRules([
      { id: "a", effect: "deny", match: { paths: ["/admin/**"] } },
      { id: "b", effect: "ask", rate_limit: { calls: 3, per: "minute" } },
    ]);
    expect(rules.map((r) => [r.id, r.name])).toEqual([
      ["a", "a"],
      ["b", "b"],
    ]);
    expect(rules[1]?.rate_limit).toEqual({ calls: 3, per: "minute" });
    expect(rules[1]?.match).toEqual({});
  });

  it("takes 500 rules", () => {
    const rules = Array.from({ length: MAX_RULES }, (_, i) => ({ id: `r${i}`, effect: "ask" }));
    expect(parsePolicyRules(rules)).toHaveLength(MAX_RULES);
  });
});

describe("a refused list names the rule and the field", () => {
  it.each<[string, unknown, RegExp, Record<string, unknown>]>([
    ["not a list", { rules: [] }, /rules must be a list/, {}],
    [
      "an unknown effect",
      [{ id: "x", effect: "permit" }],
      /^rule 1 \(x\): effect: /,
      { rule_id: "x", field: "effect" },
    ],
    [
      "a bad glob",
      [{ effect: "deny" }, { id: "g", effect: "deny", match: { paths: ["admin/**"] } }],
      /^rule 2 \(g\): match\.paths\[0\]: a path glob starts with \//,
      { rule_index: 1, field: "match.paths[0]" },
    ],
    [
      "a * inside a segment",
      [{ id: "g", effect: "deny", match: { paths: ["/files/*.txt"] } }],
      /whole segments/,
      { field: "match.paths[0]" },
    ],
    ["a glob with a query", [{ id: "g", effect: "deny", match: { paths: ["/search?q=*"] } }], /no query/, {}],
    [
      "a glob with ..",
      [{ id: "g", effect: "deny", match: { paths: ["/a/../b"] } }],
      /no \. or \.\. segments/,
      {},
    ],
    [
      "a glob with an encoded slash",
      [{ id: "g", effect: "deny", match: { paths: ["/a%2Fb"] } }],
      /encoded/,
      {},
    ],
    [
      "a glob with a space",
      [{ id: "g", effect: "deny", match: { paths: ["/a b"] } }],
      /URL path characters/,
      {},
    ],
    [
      "an empty match list (a rule matching nothing)",
      [{ id: "e", effect: "allow", match: { hosts: [] } }],
      /^rule 1 \(e\): match\.hosts: an empty list matches no call/,
      { field: "match.hosts" },
    ],
    [
      "a host with two wildcards",
      [{ id: "h", effect: "deny", match: { hosts: ["*.*.example.com"] } }],
      /one `\*\.`/,
      { field: "match.hosts[0]" },
    ],
    [
      "a host with a path",
      [{ id: "h", effect: "deny", match: { hosts: ["https://api.example.com/"] } }],
      /letters, digits/,
      {},
    ],
    [
      "an IP address as host",
      [{ id: "h", effect: "deny", match: { hosts: ["10.0.0.1"] } }],
      /IP address/,
      {},
    ],
    ["a Unicode host", [{ id: "h", effect: "deny", match: { hosts: ["bücher.de"] } }], /xn--/, {}],
    ["a one-label host", [{ id: "h", effect: "deny", match: { hosts: ["localhost"] } }], /two labels/, {}],
    [
      "an unknown method",
      [{ id: "m", effect: "deny", match: { methods: ["TRACE"] } }],
      /^rule 1 \(m\): match\.methods\[0\]/,
      {},
    ],
    [
      "a lowercase item name",
      [{ id: "i", effect: "deny", match: { items: ["github_token"] } }],
      /credential name/,
      {},
    ],
    [
      "an unknown match field",
      [{ id: "u", effect: "deny", match: { urls: ["/x"] } }],
      /unknown field "urls"/,
      { field: "match" },
    ],
    ["an unknown rule field", [{ id: "u", effect: "deny", priority: 1 }], /unknown field "priority"/, {}],
    ["a bad id", [{ id: "Bad_Id", effect: "deny" }], /^rule 1: id: /, { field: "id" }],
    ["an id over 40 characters", [{ id: "a".repeat(41), effect: "deny" }], /^rule 1: id: /, {}],
    [
      "a repeated id",
      [
        { id: "a", effect: "deny" },
        { id: "a", effect: "ask" },
      ],
      /^rule 2 \(a\): id: another rule has this id/,
      { rule_index: 1 },
    ],
    [
      "a rate limit on a deny rule",
      [{ id: "d", effect: "deny", rate_limit: { calls: 1, per: "minute" } }],
      /rate_limit: a deny rule/,
      {},
    ],
    [
      "a rate limit per day",
      [{ id: "d", effect: "allow", rate_limit: { calls: 1, per: "day" } }],
      /rate_limit\.per/,
      {},
    ],
    [
      "a rate limit of zero",
      [{ id: "d", effect: "allow", rate_limit: { calls: 0, per: "hour" } }],
      /rate_limit\.calls/,
      {},
    ],
    [
      "a NUL in an agent name",
      [{ id: "n", effect: "deny", match: { agents: ["a\u0000b"] } }],
      /match\.agents\[0\]: .*NUL/,
      {},
    ],
    ["501 rules", Array.from({ length: MAX_RULES + 1 }, () => ({ effect: "ask" })), /at most 500 rules/, {}],
  ])("%s", (_label, rules, message, extra) => {
    const refusal = refusalOf(rules);
    expect(refusal.code).toBe("invalid_policy");
    expect(refusal.message).toMatch(message);
    expect(refusal.extra).toMatchObject(extra);
  });

  it("never echoes an id that is not of the id's form", () => {
    const refusal = refusalOf([{ id: "<script>", effect: "nope" }]);
    expect(refusal.message).not.toContain("<script>");
  });
});
