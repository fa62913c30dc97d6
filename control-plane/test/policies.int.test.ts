// Organisation policies, hosted (DECISIONS "Policies"): the list over HTTP (versioned, validated,
// audited), and what it does to an agent's http_request through the official MCP SDK client: first
// match in both orders, deny over a standing grant with nothing sent or spent, allow without an
// approval, globs and suffixes, agents by name (never by a name the agent gives itself), a rate
// limit of 3 per minute, disabled rules, dry_run and audit rows naming the rule, and the preview.
import { createHash } from "node:crypto";
import { canonicalJson } from "@latch/shared/ledger/canonical-json";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { refuseAuditRows } from "./database.ts";
import {
  type Browser,
  connectAgent,
  type HostedHarness,
  listenHosted,
  operatorWithClient,
  startHosted,
  toolAnswer,
} from "./hosted.ts";

const SECRET = "sk_live_policies_canary_7d41";
let h: HostedHarness;
let url: string;

beforeAll(async () => {
  ({ h, url } = await listenHosted((req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ path: req.url }));
  }));
}, 60_000);
afterAll(async () => {
  await h.close();
});

/** An operator with API_KEY for api.latch.test, a model client named "policy agent" and its agent. */
async function setUp(clientName = "policy agent") {
  const { op, clientId, token } = await operatorWithClient(h, {
    secret: SECRET,
    items: [{ name: "API_KEY" }],
    clientName,
  });
  return { op, clientId, token, agent: await connectAgent(url, token) };
}

const call = (agent: Client, args: Record<string, unknown>) =>
  agent
    .callTool({ name: "http_request", arguments: { item_name: "API_KEY", method: "GET", ...args } })
    .then(toolAnswer);

async function savePolicy(op: Browser, rules: unknown[]) {
  const current = await op.request("GET", "/api/policies");
  const saved = await op.request(
    "PUT",
    "/api/policies",
    { rules },
    { "if-match": current.headers.etag as string },
  );
  expect(saved.statusCode, saved.body).toBe(200);
  return saved.json() as { version: number; rules: { id: string }[]; warnings: string[] };
}

async function auditOf(op: Browser) {
  return (await op.request("GET", "/api/audit")).json().events as {
    action: string;
    reason: string | null;
    detail: Record<string, unknown>;
  }[];
}

const originHits = (path: string) => h.egress.origin.requests.filter((r) => r.url.startsWith(path)).length;

describe("GET and PUT /api/policies", () => {
  it("starts empty at version 0, and PUT replaces the list under If-Match", async () => {
    const { op, agent } = await setUp();
    const empty = await op.request("GET", "/api/policies");
    expect(empty.statusCode).toBe(200);
    expect(empty.headers.etag).toBe('"0"');
    expect(empty.json()).toMatchObject({ version: 0, rules: [] });

    const rules = [{ id: "no-admin", name: "No admin", effect: "deny", match: { paths: ["/admin/**"] } }];
    const blind = await op.request("PUT", "/api/policies", { rules });
    expect(blind.statusCode).toBe(428);
    expect(blind.json().error.code).toBe("precondition_required");

    const first = await op.request("PUT", "/api/policies", { rules }, { "if-match": '"0"' });
    expect(first.statusCode, first.body).toBe(200);
    expect(first.headers.etag).toBe('"1"');
    expect(first.json()).toMatchObject({ version: 1, rules: [{ id: "no-admin", enabled: true }] });

    // A second writer that loaded version 0 is told the list moved on, and what it is now.
    const stale = await op.request("PUT", "/api/policies", { rules: [] }, { "if-match": '"0"' });
    expect(stale.statusCode).toBe(409);
    expect(stale.json().error).toMatchObject({ code: "stale_version", version: 1 });
    expect((await op.request("GET", "/api/policies")).json().rules).toHaveLength(1);

    const any = await op.request("PUT", "/api/policies", { rules: [] }, { "if-match": "*" });
    expect(any.json().version).toBe(2);

    const changed = (await auditOf(op)).filter((e) => e.action === "policies_changed");
    expect(changed.map((e) => e.detail.version)).toEqual([2, 1]);
    expect(changed[1]?.detail).toMatchObject({ rules: 1, deny: 1, allow: 0 });
    await agent.close();
  });

  it("the policies_changed row holds the saved rules and their digest, so a later reader knows what a rule did", async () => {
    const { op, agent } = await setUp();
    const first = await savePolicy(op, [
      { id: "r1", name: "Reads", effect: "allow", match: { methods: ["GET"], paths: ["/v1/**"] } },
      { id: "r2", effect: "deny", enabled: false, match: { hosts: ["*.latch.test"] } },
    ]);
    await savePolicy(op, [{ id: "r1", effect: "deny" }]);
    const changed = (await auditOf(op)).filter((e) => e.action === "policies_changed");
    const row = changed.find((e) => e.detail.version === first.version)!;
    // The counts stay; the list itself is there although version 1 is overwritten.
    expect(row.detail).toMatchObject({ version: 1, rules: 2, allow: 1, deny: 0, disabled: 1 });
    expect(row.detail.saved_rules).toEqual(first.rules);
    expect(row.detail.saved_rules).toEqual([
      {
        id: "r1",
        name: "Reads",
        effect: "allow",
        match: { methods: ["GET"], paths: ["/v1/**"] },
        enabled: true,
      },
      { id: "r2", name: "r2", effect: "deny", match: { hosts: ["*.latch.test"] }, enabled: false },
    ]);
    expect(row.detail.rules_sha256).toBe(
      createHash("sha256").update(canonicalJson(first.rules)).digest("hex"),
    );
    expect(changed[0]?.detail.rules_sha256).not.toBe(row.detail.rules_sha256);
    await agent.close();
  });

  it("refuses a bad list with 400 naming the rule and the field, and keeps the saved one", async () => {
    const { op, agent } = await setUp();
    const cases: [unknown[], RegExp][] = [
      [
        [
          { id: "ok", effect: "ask" },
          { id: "bad-glob", effect: "deny", match: { paths: ["admin"] } },
        ],
        /^rule 2 \(bad-glob\): match\.paths\[0\]/,
      ],
      [[{ id: "x", effect: "permit" }], /^rule 1 \(x\): effect/],
      [
        [{ id: "empty", effect: "allow", match: { methods: [] } }],
        /^rule 1 \(empty\): match\.methods: an empty list matches no call/,
      ],
      [Array.from({ length: 501 }, () => ({ effect: "ask" })), /at most 500 rules/],
    ];
    for (const [rules, message] of cases) {
      const refused = await op.request("PUT", "/api/policies", { rules }, { "if-match": "*" });
      expect(refused.statusCode).toBe(400);
      expect(refused.json().error.code).toBe("invalid_policy");
      expect(refused.json().error.message).toMatch(message);
    }
    expect((await op.request("GET", "/api/policies")).json().version).toBe(0);
    await agent.close();
  });

  it("is one organisation's: another's list decides nothing here", async () => {
    const a = await setUp();
    const b = await setUp();
    await savePolicy(b.op, [{ id: "deny-all", effect: "deny" }]);
    expect((await a.op.request("GET", "/api/policies")).json().rules).toEqual([]);
    expect((await call(a.agent, { path: "/v1/other-org" })).status).toBe("pending");
    expect((await call(b.agent, { path: "/v1/other-org" })).status).toBe("policy_denied");
    await a.agent.close();
    await b.agent.close();
  });
});

describe("what a list does to http_request", () => {
  it("first match decides, in both orders", async () => {
    const { op, agent } = await setUp();
    const allowReads = { id: "allow-reads", effect: "allow", match: { methods: ["GET"] } };
    const denyReports = { id: "deny-reports", effect: "deny", match: { paths: ["/v1/reports/**"] } };
    await savePolicy(op, [allowReads, denyReports]);
    const allowed = await call(agent, { path: "/v1/reports/q3" });
    expect(allowed).toMatchObject({
      origin_status: 200,
      policy: { rule_id: "allow-reads", effect: "allow" },
    });

    await savePolicy(op, [denyReports, allowReads]);
    const before = originHits("/v1/reports");
    const denied = await call(agent, { path: "/v1/reports/q3" });
    expect(denied).toMatchObject({ status: "policy_denied", policy: { rule_id: "deny-reports" } });
    expect(originHits("/v1/reports")).toBe(before);
    await agent.close();
  });

  it("deny beats a standing grant: nothing sent, nothing spent, the agent told why and what next", async () => {
    const { op, agent } = await setUp();
    const asked = await call(agent, { path: "/v1/charges", method: "POST", body: { amount: 1 } });
    await op.request("POST", `/api/grants/${asked.grant_id}/approve`, { policy: "item_standing" });
    // And a one-call approval for exactly the call the rule will refuse.
    const once = await call(agent, { path: "/v1/refunds", method: "POST", body: { amount: 9 } });
    await op.request("POST", `/api/grants/${once.grant_id}/approve`, { policy: "prompt" });

    await savePolicy(op, [
      {
        id: "no-refunds",
        name: "No refunds by agents",
        effect: "deny",
        match: { paths: ["/v1/refunds/**"], methods: ["POST"] },
      },
    ]);
    const before = h.egress.origin.requests.length;
    const denied = await call(agent, { path: "/v1/refunds", method: "POST", body: { amount: 9 } });
    expect(denied).toMatchObject({
      status: "policy_denied",
      error: { code: "policy_denied" },
      policy: { rule_id: "no-refunds", rule_name: "No refunds by agents", effect: "deny" },
    });
    expect(denied.next?.for_model).toMatch(/No refunds by agents/);
    expect(denied.next?.for_model).toMatch(/Do not retry/);
    expect(denied.next?.for_model).toMatch(/Policies in the Latch console/);
    expect(JSON.stringify(denied)).not.toContain(SECRET);
    expect(h.egress.origin.requests.length).toBe(before);
    // The one-call approval is still there, unspent.
    const grants = (await op.request("GET", "/api/grants")).json().grants as {
      grant_id: string;
      status: string;
    }[];
    expect(grants.find((g) => g.grant_id === once.grant_id)?.status).toBe("active");
    // Calls the rule does not name still go under the standing grant.
    expect(
      (await call(agent, { path: "/v1/charges", method: "POST", body: { amount: 1 } })).origin_status,
    ).toBe(200);
    const row = (await auditOf(op)).find((e) => e.action === "policy_denied");
    expect(row).toMatchObject({
      reason: "policy_denied",
      detail: { rule_id: "no-refunds", method: "POST", path: "/v1/refunds" },
    });
    await agent.close();
  });

  it("a deny glob is not stepped around by case, encodings, doubled or trailing slashes", async () => {
    const { op, agent } = await setUp();
    await savePolicy(op, [
      { id: "no-admin", effect: "deny", match: { paths: ["/admin/**"] } },
      { id: "reads", effect: "allow", match: { methods: ["GET"] } },
    ]);
    const before = h.egress.origin.requests.length;
    for (const path of [
      "/admin",
      "/ADMIN/users",
      "/%61dmin/users",
      "/%41DMIN",
      "/Admin/",
      "/admin//x",
      "/admin/x?admin=0",
    ]) {
      const answer = await call(agent, { path });
      expect(answer.status, path).toBe("policy_denied");
    }
    // A host in another case is the same host; a full URL in path is the same call.
    expect((await call(agent, { path: "https://API.LATCH.TEST/admin/x" })).status).toBe("policy_denied");
    expect(h.egress.origin.requests.length).toBe(before);
    // Dot segments and encoded separators never reach the matcher: the path rules refuse them.
    const dotted = await agent.callTool({
      name: "http_request",
      arguments: { item_name: "API_KEY", method: "GET", path: "/x/../admin" },
    });
    expect(dotted.isError).toBe(true);
    expect(h.egress.origin.requests.length).toBe(before);
    expect((await call(agent, { path: "/administrators" })).origin_status).toBe(200);
    await agent.close();
  });

  it("a deny glob is not stepped around by ;params, trailing dots or spaces, or an escape encoded twice", async () => {
    const { op, agent } = await setUp();
    await savePolicy(op, [
      { id: "no-admin", effect: "deny", match: { hosts: ["api.latch.test"], paths: ["/admin/**"] } },
      { id: "rest", effect: "allow", match: { hosts: ["api.latch.test"] } },
    ]);
    const before = h.egress.origin.requests.length;
    // Tomcat, Spring and Jetty drop `;params`; Windows and IIS trailing dots and spaces; an origin
    // that decodes twice reads %2561 as "a". Each of these passes the path rules.
    for (const path of [
      "/admin;x/users",
      "/admin;/users",
      "/admin./users",
      "/admin%20/users",
      "/%2561dmin/users",
    ]) {
      expect(await call(agent, { path }), path).toMatchObject({
        status: "policy_denied",
        policy: { rule_id: "no-admin" },
      });
    }
    // A dot segment a Windows server would read once its trailing space is dropped is refused
    // by the path rules themselves, before any policy.
    expect(await call(agent, { path: "/public/..%20/admin/users" })).toMatchObject({
      error: { code: "invalid_path" },
    });
    expect(h.egress.origin.requests.length).toBe(before);
    expect((await call(agent, { path: "/admins;x/users" })).origin_status).toBe(200);
    await agent.close();
  });

  it("allow needs no approval, and both rows of the call name the rule", async () => {
    const { op, agent } = await setUp();
    await savePolicy(op, [
      {
        id: "latch-reads",
        effect: "allow",
        match: { hosts: ["*.latch.test"], methods: ["GET"], paths: ["/v1/*/items"] },
      },
    ]);
    const allowed = await call(agent, { path: "/v1/abc/items?page=2" });
    expect(allowed).toMatchObject({
      origin_status: 200,
      policy: { rule_id: "latch-reads", effect: "allow" },
    });
    expect(allowed.grant_id).toBeUndefined();
    expect((await op.request("GET", "/api/inbox")).json().approvals).toEqual([]);
    const events = await auditOf(op);
    expect(events.find((e) => e.action === "policy_allowed")).toMatchObject({
      detail: { rule_id: "latch-reads", method: "GET", path: "/v1/abc/items" },
    });
    expect(events.find((e) => e.action === "http_request")).toMatchObject({
      detail: { rule_id: "latch-reads", origin_status: 200 },
    });
    // The glob is exact for an allow rule: * is one segment, and a write is not a read.
    expect((await call(agent, { path: "/v1/abc/def/items" })).status).toBe("pending");
    expect((await call(agent, { path: "/v1/abc/items", method: "DELETE" })).status).toBe("pending");
    // An allowed call still obeys the item's hosts: another host is host_mismatch, not sent.
    const elsewhere = await call(agent, { path: "https://other.latch.test/v1/abc/items" });
    expect(elsewhere.status).toBe("host_mismatch");
    await agent.close();
  });

  it("an ask rule keeps today's approval, and names itself in the answer and the audit", async () => {
    const { op, agent } = await setUp();
    await savePolicy(op, [{ id: "ask-writes", effect: "ask", match: { methods: ["POST"] } }]);
    const pending = await call(agent, { path: "/v1/things", method: "POST", body: { a: 1 } });
    expect(pending).toMatchObject({ status: "pending", policy: { rule_id: "ask-writes", effect: "ask" } });
    await op.request("POST", `/api/grants/${pending.grant_id}/approve`, { policy: "prompt" });
    const sent = await call(agent, { path: "/v1/things", method: "POST", body: { a: 1 } });
    expect(sent).toMatchObject({
      origin_status: 200,
      grant_id: pending.grant_id,
      policy: { rule_id: "ask-writes" },
    });
    expect((await auditOf(op)).find((e) => e.action === "http_request")?.detail.rule_id).toBe("ask-writes");
    await agent.close();
  });

  it("matches agents by the client's name as issued, never by the name the agent gives itself", async () => {
    const trusted = await setUp("nightly sync");
    const byName = await savePolicy(trusted.op, [
      { id: "sync-reads", effect: "allow", match: { agents: ["Nightly Sync"] } },
    ]);
    // Saving says what a name trusts, and how to trust the one client instead.
    expect(byName.warnings).toEqual([
      expect.stringMatching(
        /^rule sync-reads allows by agent name \("Nightly Sync"\): a client chooses its name when it registers, so any client admitted later under that name is allowed too; write the client's id/,
      ),
    ]);
    expect((await call(trusted.agent, { path: "/v1/sync" })).origin_status).toBe(200);
    // By id too, and an id trusts that client alone: nothing to warn of.
    const byId = await savePolicy(trusted.op, [
      { id: "by-id", effect: "allow", match: { agents: [trusted.clientId] } },
    ]);
    expect(byId.warnings).toEqual([]);
    expect((await call(trusted.agent, { path: "/v1/sync" })).policy).toMatchObject({ rule_id: "by-id" });

    // A client named after the trusted client's id (in capitals, which a name's match ignores) is
    // not that client.
    const lookalike = await trusted.op.request("POST", "/api/clients/model", {
      name: trusted.clientId.toUpperCase(),
      environment: "staging",
    });
    expect(lookalike.statusCode, lookalike.body).toBe(201);
    const lookalikeAgent = await connectAgent(url, lookalike.json().token as string);
    expect((await call(lookalikeAgent, { path: "/v1/sync" })).status).toBe("pending");
    await lookalikeAgent.close();

    // Another client of the same organisation, whose MCP client calls itself "nightly sync".
    const issued = await trusted.op.request("POST", "/api/clients/model", {
      name: "scratch",
      environment: "staging",
    });
    const impostor = await connectAgent(url, issued.json().token as string, "Nightly Sync");
    await savePolicy(trusted.op, [
      { id: "sync-reads", effect: "allow", match: { agents: ["Nightly Sync"] } },
    ]);
    const answer = toolAnswer(
      await impostor.callTool({
        name: "http_request",
        arguments: { item_name: "API_KEY", method: "GET", path: "/v1/sync" },
      }),
    );
    expect(answer.status).toBe("pending");
    await impostor.close();
    await trusted.agent.close();
  });

  it("a rate limit of 3 per minute refuses the 4th call with retry_after, and holds again a minute later", async () => {
    const { op, agent } = await setUp();
    await savePolicy(op, [
      {
        id: "three-a-minute",
        name: "Three a minute",
        effect: "allow",
        rate_limit: { calls: 3, per: "minute" },
      },
    ]);
    for (let i = 0; i < 3; i++) expect((await call(agent, { path: `/v1/rl/${i}` })).origin_status).toBe(200);
    const before = h.egress.origin.requests.length;
    const limited = await call(agent, { path: "/v1/rl/3" });
    expect(limited).toMatchObject({
      status: "rate_limited",
      error: { code: "rate_limited" },
      policy: { rule_id: "three-a-minute" },
      next: { tool: "http_request", arguments: { path: "/v1/rl/3" } },
    });
    expect(limited.retry_after).toBeGreaterThan(0);
    expect(limited.retry_after).toBeLessThanOrEqual(60);
    expect(limited.next?.for_model).toMatch(/3 calls per minute/);
    expect(h.egress.origin.requests.length).toBe(before);
    expect((await auditOf(op)).find((e) => e.action === "rate_limited")?.detail).toMatchObject({
      rule_id: "three-a-minute",
      retry_after: limited.retry_after,
    });
    // A dry run looks without counting.
    expect(await call(agent, { path: "/v1/rl/3", dry_run: true })).toMatchObject({
      would_send: false,
      reason: "rate_limited",
    });
    h.clock.advance(61_000);
    expect((await call(agent, { path: "/v1/rl/4" })).origin_status).toBe(200);
    await agent.close();
  });

  /**
   * An ask rule allowing one POST an hour, its one call made; then a second call approved once
   * (`second`, its pending grant), which the full limit will refuse.
   */
  async function askRuleFullWithApproval(ruleId: string, path: string) {
    const { op, agent } = await setUp();
    await savePolicy(op, [
      { id: ruleId, effect: "ask", match: { methods: ["POST"] }, rate_limit: { calls: 1, per: "hour" } },
    ]);
    const first = await call(agent, { path, method: "POST", body: { n: 1 } });
    await op.request("POST", `/api/grants/${first.grant_id}/approve`, { policy: "prompt" });
    expect((await call(agent, { path, method: "POST", body: { n: 1 } })).origin_status).toBe(200);
    const second = await call(agent, { path: `${path}2`, method: "POST", body: { n: 2 } });
    await op.request("POST", `/api/grants/${second.grant_id}/approve`, { policy: "prompt" });
    return { op, agent, second };
  }

  it("a rate limit on an ask rule gives a spent one-call approval back", async () => {
    const { op, agent, second } = await askRuleFullWithApproval("one-write", "/v1/w");
    const before = h.egress.origin.requests.length;
    const limited = await call(agent, { path: "/v1/w2", method: "POST", body: { n: 2 } });
    expect(limited).toMatchObject({
      status: "rate_limited",
      policy: { rule_id: "one-write", effect: "ask" },
    });
    expect(limited.retry_after).toBeGreaterThan(60);
    expect(h.egress.origin.requests.length).toBe(before);
    const grants = (await op.request("GET", "/api/grants")).json().grants as {
      grant_id: string;
      status: string;
    }[];
    expect(grants.find((g) => g.grant_id === second.grant_id)?.status).toBe("active");
    await agent.close();
  });

  it("a rate limit whose rate_limited row the database refuses still gives the one-call approval back", async () => {
    const { op, agent, second } = await askRuleFullWithApproval("one-post", "/v1/f");
    const organisationId = (await op.request("GET", "/api/auth/me")).json().organisation.id as string;
    const restore = await refuseAuditRows(h.plane.database, organisationId, "rate_limited");
    const before = h.egress.origin.requests.length;
    try {
      // The limit is full and its row cannot be written: the call fails, and nothing is sent.
      const failed = await agent
        .callTool({
          name: "http_request",
          arguments: { item_name: "API_KEY", method: "POST", path: "/v1/f2", body: { n: 2 } },
        })
        .then(
          (result) => Boolean(result.isError),
          () => true,
        );
      expect(failed).toBe(true);
    } finally {
      await restore();
    }
    expect(h.egress.origin.requests.length).toBe(before);
    const grants = (await op.request("GET", "/api/grants")).json().grants as {
      grant_id: string;
      status: string;
    }[];
    expect(grants.find((g) => g.grant_id === second.grant_id)?.status).toBe("active");
    await agent.close();
  });

  it("a disabled rule decides nothing", async () => {
    const { op, agent } = await setUp();
    await savePolicy(op, [
      { id: "off", effect: "deny", enabled: false },
      { id: "on", effect: "allow", match: { paths: ["/v1/on"] } },
    ]);
    expect((await call(agent, { path: "/v1/on" })).policy).toMatchObject({ rule_id: "on" });
    expect((await call(agent, { path: "/v1/elsewhere" })).status).toBe("pending");
    await agent.close();
  });

  it("dry_run names the rule that would decide, and sends, spends and writes nothing", async () => {
    const { op, agent } = await setUp();
    await savePolicy(op, [
      { id: "no-delete", name: "No deletes", effect: "deny", match: { methods: ["DELETE"] } },
      { id: "reads", effect: "allow", match: { methods: ["GET"] } },
    ]);
    const before = h.egress.origin.requests.length;
    const rowsBefore = (await auditOf(op)).length;
    expect(await call(agent, { path: "/v1/x", method: "DELETE", dry_run: true })).toMatchObject({
      status: "dry_run",
      policy: { rule_id: "no-delete", rule_name: "No deletes", effect: "deny" },
      would_send: false,
      reason: "policy_denied",
    });
    expect(await call(agent, { path: "/v1/x", dry_run: true })).toMatchObject({
      status: "dry_run",
      policy: { rule_id: "reads", effect: "allow" },
      approval: { status: "none" },
      would_send: true,
    });
    expect(await call(agent, { path: "/v1/x", method: "PUT", body: {}, dry_run: true })).toMatchObject({
      policy: null,
      would_send: false,
      reason: "scope_denied",
    });
    expect(h.egress.origin.requests.length).toBe(before);
    expect((await auditOf(op)).length).toBe(rowsBefore);
    await agent.close();
  });
});

describe("across replicas sharing the database", () => {
  it("a list saved on one replica decides the next call on another, and a rate limit counts calls on both", async () => {
    const replica = await startHosted({ replicaOf: h });
    const replicaUrl = await replica.app.listen({ host: "127.0.0.1", port: 0 });
    try {
      const { op, token, agent } = await setUp();
      const other = await connectAgent(replicaUrl, token);
      // The replica reads (and caches) the empty list first; the save on the first replica wins.
      expect((await call(other, { path: "/v1/r/0" })).status).toBe("pending");
      await savePolicy(op, [{ id: "three", effect: "allow", rate_limit: { calls: 3, per: "minute" } }]);
      const answers = [];
      for (const [i, client] of [agent, other, agent, other].entries()) {
        answers.push(await call(client, { path: `/v1/r/${i + 1}` }));
      }
      expect(answers.map((a) => a.status ?? a.origin_status)).toEqual([200, 200, 200, "rate_limited"]);
      await other.close();
      await agent.close();
    } finally {
      await replica.close();
    }
  });

  it("leaves request_grant alone: a deny rule does not refuse asking for an approval", async () => {
    const { op, agent } = await setUp();
    await savePolicy(op, [{ id: "deny-all", effect: "deny" }]);
    const asked = toolAnswer(
      await agent.callTool({ name: "request_grant", arguments: { item_name: "API_KEY" } }),
    );
    expect(asked.status).toBe("pending");
    await agent.close();
  });
});

describe("POST /api/policies/preview", () => {
  it("counts what each rule would have decided over the last 7 days of calls", async () => {
    const { op, agent } = await setUp();
    await savePolicy(op, [{ id: "reads", effect: "allow", match: { methods: ["GET"] } }]);
    for (let i = 0; i < 4; i++) await call(agent, { path: `/v1/items/${i}` });
    await call(agent, { path: "/v1/admin/users" });
    await call(agent, { path: "/v1/items", method: "POST", body: {} });
    const preview = await op.request("POST", "/api/policies/preview", {
      rules: [
        { id: "no-admin", effect: "deny", match: { paths: ["/v1/admin/**"] } },
        {
          id: "item-reads",
          effect: "allow",
          match: { paths: ["/v1/items/*"] },
          rate_limit: { calls: 3, per: "hour" },
        },
      ],
    });
    expect(preview.statusCode, preview.body).toBe(200);
    const body = preview.json();
    // 5 GETs sent under "reads" and 1 POST asked for: 6 calls.
    expect(body).toMatchObject({
      calls: 6,
      truncated: false,
      totals: { allow: 3, ask: 0, deny: 1, rate_limited: 1, none: 1 },
      rules: [
        { id: "no-admin", effect: "deny", calls: 1, rate_limited: 0 },
        { id: "item-reads", effect: "allow", calls: 4, rate_limited: 1 },
      ],
    });
    // Against the saved list (every GET allowed): the admin call and the rate-limited one change.
    expect(body.changed).toBe(2);
    // A preview saves nothing.
    expect((await op.request("GET", "/api/policies")).json().rules.map((r: { id: string }) => r.id)).toEqual([
      "reads",
    ]);
    const bad = await op.request("POST", "/api/policies/preview", {
      rules: [{ effect: "deny", match: { hosts: [] } }],
    });
    expect(bad.json().error.code).toBe("invalid_policy");
    await agent.close();
  });

  // Last in this file: the plane's clock stays 8 days ahead of the database's afterwards.
  it("leaves out calls older than 7 days", async () => {
    const { op, agent } = await setUp();
    await call(agent, { path: "/v1/old" });
    const preview = () => op.request("POST", "/api/policies/preview", { rules: [{ effect: "ask" }] });
    expect((await preview()).json().calls).toBe(1);
    h.clock.advance(8 * 86_400_000);
    expect((await preview()).json()).toMatchObject({ calls: 0, totals: { ask: 0 } });
    await agent.close();
  });
});
