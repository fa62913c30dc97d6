// A one-call approval is spent the moment the request leaves the service, and only the proxy's
// reached_origin gives it back (DECISIONS "Approvals"). These tests go beneath the edge validation
// on purpose: they hand http_request text the edge would refuse, and an audit store that fails, to
// show that the layer below holds by itself (defence in depth), on PGlite and PostgreSQL.
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuditEvent } from "../src/audit/audit.repo.ts";
import { logAuditFailure } from "../src/audit/audit-failure.ts";
import { createCallsService } from "../src/calls/calls.service.ts";
import type { OpenDatabase } from "../src/db/database.ts";
import { runHttpRequest } from "../src/tools/http-request.tool.ts";
import { LOCAL_SURFACE } from "../src/tools/tool-context.ts";
import { callPathOrganisation, NO_POLICIES } from "./call-path.ts";
import { testDatabase } from "./database.ts";
import { type EgressHarness, LogCapture, startEgressHarness } from "./egress-harness.ts";

const SECRET = "sk_live_spentonce_canary_5e0c";
let harness: EgressHarness;
let database: OpenDatabase;

beforeAll(async () => {
  harness = await startEgressHarness();
  harness.setHandler((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end('{"deleted":true}');
  });
  database = await testDatabase();
}, 60_000);
afterAll(async () => {
  await harness.close();
});

/** The services of one organisation; `auditFails` makes every http_request audit insert throw. */
async function services(options: { auditFails?: boolean } = {}) {
  const { organisationId, audit, items, grants } = await callPathOrganisation(database, harness, SECRET);
  const logs = new LogCapture();
  const calls = createCallsService({
    findItemByName: items.findCallableByName,
    findItemsByHost: items.findCallableByHost,
    recordEvent: async (event: AuditEvent) => {
      if (options.auditFails && event.action.startsWith("http_request")) {
        // What PostgreSQL says of a NUL in jsonb, with the offending text in its message.
        throw Object.assign(new Error(`unsupported Unicode escape sequence near "x\u0000y" ${SECRET}`), {
          code: "22P05",
        });
      }
      await audit.insertAuditEvent(event);
    },
    minter: harness.minter,
    egress: harness.client,
    onAuditFailure: logAuditFailure(pino({ level: "info" }, logs)),
  });
  const deps = { items, grants, calls, policies: NO_POLICIES, surface: LOCAL_SURFACE };
  const scope = { organisationId, environment: "production", agentId: "attacker" };
  const args = { method: "DELETE" as const, path: "/v1/everything", item_name: "API_KEY" };
  const pending = (await runHttpRequest(deps, scope, args)).payload as { grant_id: string };
  await grants.approveGrant(organisationId, "operator", pending.grant_id, "prompt");
  return { organisationId, deps, scope, args, grantId: pending.grant_id, grants, audit, logs };
}

const grantStatus = async (s: Awaited<ReturnType<typeof services>>) =>
  (await s.grants.listGrants(s.organisationId)).find((g) => g.grant_id === s.grantId)?.status;

describe("a one-call approval is spent once, whatever happens after the proxy answered", () => {
  it("an audit insert that fails gives nothing back: the answer goes out, the grant stays spent, the log has the code only", async () => {
    const s = await services({ auditFails: true });
    const before = harness.origin.requests.length;
    const answer = await runHttpRequest(s.deps, s.scope, s.args);
    expect(answer.payload).toMatchObject({ origin_status: 200, grant_id: s.grantId });
    expect(await grantStatus(s)).toBe("consumed");
    // Repeating it is a new request for approval, never another DELETE.
    for (let i = 0; i < 4; i++) {
      expect((await runHttpRequest(s.deps, s.scope, s.args)).payload).toMatchObject({ status: "pending" });
    }
    expect(harness.origin.requests.length).toBe(before + 1);
    const logged = s.logs.lines.join("\n");
    expect(logged).toContain('"code":"22P05"');
    expect(logged).toContain("audit row not written");
    expect(logged).not.toContain(SECRET);
    expect(logged).not.toContain("x\\u0000y");
  });

  it("a NUL and an unpaired surrogate in client_id beneath the edge: one call, one audit row with U+FFFD, the grant spent", async () => {
    for (const clientId of ["x\u0000y", "\ud800"]) {
      const s = await services();
      const before = harness.origin.requests.length;
      const answer = await runHttpRequest(s.deps, s.scope, { ...s.args, client_id: clientId });
      expect(answer.payload).toMatchObject({ origin_status: 200 });
      expect(await grantStatus(s)).toBe("consumed");
      const again = await runHttpRequest(s.deps, s.scope, { ...s.args, client_id: clientId });
      expect(again.payload).toMatchObject({ status: "pending" });
      expect(harness.origin.requests.length).toBe(before + 1);
      const rows = await s.audit.findAuditEvents(s.organisationId, { actions: ["http_request"] });
      expect(rows).toHaveLength(1);
      expect(rows[0]!.detail).toMatchObject({ method: "DELETE", path: "/v1/everything", origin_status: 200 });
      expect(rows[0]!.detail.client_id).toBe(clientId === "\ud800" ? "\uFFFD" : "x\uFFFDy");
    }
  });

  it("a request the proxy refused before sending gives the approval back", async () => {
    const s = await services();
    await s.deps.items.storeItem(s.organisationId, "operator", {
      name: "NOWHERE_KEY",
      value: SECRET,
      allowed_hosts: ["nowhere.invalid"],
      environment: "production",
    });
    const args = { method: "GET" as const, path: "/v1/x", item_name: "NOWHERE_KEY" };
    const pending = (await runHttpRequest(s.deps, s.scope, args)).payload as { grant_id: string };
    await s.grants.approveGrant(s.organisationId, "operator", pending.grant_id, "prompt");
    const refused = (await runHttpRequest(s.deps, s.scope, args)).payload as { error?: { code: string } };
    expect(refused.error?.code).toBeDefined();
    const row = await database.db
      .selectFrom("grants")
      .select(["status", "consumed_at"])
      .where("id", "=", pending.grant_id)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ status: "active", consumed_at: null });
    // And the audit says it was refused, not that it happened.
    const refusedRows = await s.audit.findAuditEvents(s.organisationId, {
      actions: ["http_request_refused"],
    });
    expect(refusedRows).toHaveLength(1);
  });
});
