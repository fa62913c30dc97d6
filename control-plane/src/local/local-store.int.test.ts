// `vault set` over a name already stored (spec 4.4: "stores or replaces"): a replace that widens
// the credential (a host added, the inject mode changed) ends the approvals of the whole credential
// the operator gave the narrower one; a replace of the value alone, or one that narrows, keeps them;
// an approval of one named call keeps its host. Through the operator API and the CLI's direct path.
import { sql } from "kysely";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type EgressHarness, LogCapture, startEgressHarness } from "../../test/egress-harness.ts";
import {
  connectLocalAgent,
  type LocalRig,
  localOperator,
  startLocalVault,
  toolPayload,
} from "../../test/local.ts";
import { storeLocalItem } from "./local-store.ts";

let harness: EgressHarness;

beforeAll(async () => {
  harness = await startEgressHarness();
  harness.setHandler((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end("{}");
  });
}, 60_000);

afterAll(async () => {
  await harness.close();
});

interface Answer {
  grant?: { grant_id: string; status: string };
  grants?: { grant_id: string; status: string }[];
  events?: { action: string; item_name: string | null; reason: string | null }[];
  secrets?: { name: string; allowed_hosts: string[] }[];
}

const operator = (v: LocalRig, method: string, path: string, body?: unknown) =>
  localOperator<Answer>(v, method, path, body);

const store = (v: LocalRig, extra: Record<string, unknown>) =>
  operator(v, "POST", "/api/secrets", { name: "GITHUB_TOKEN", value: "ghp_value_one_0123456789", ...extra });

async function wholeSession(v: LocalRig, agentId: string): Promise<string> {
  const granted = await operator(v, "POST", "/api/grants", {
    item_name: "GITHUB_TOKEN",
    agent_id: agentId,
    scope: "session",
  });
  expect(granted.status).toBe(201);
  return granted.json.grant!.grant_id;
}

async function statusOf(v: LocalRig, grantId: string): Promise<string | undefined> {
  const listed = await operator(v, "GET", "/api/grants");
  return listed.json.grants!.find((g) => g.grant_id === grantId)?.status;
}

it("a replace that adds a host ends the whole-credential approvals; the value alone or fewer hosts keep them", async () => {
  const v = await startLocalVault(harness, { logs: new LogCapture() });
  expect((await store(v, { allowed_hosts: ["api.latch.test"] })).status).toBe(201);
  const grantId = await wholeSession(v, "widen-agent");
  const agent = await connectLocalAgent(v.url, "widen-agent");
  const call = async (host: string) =>
    toolPayload(
      await agent.callTool({ name: "http_request", arguments: { method: "GET", path: "/v1/echo", host } }),
    );
  expect((await call("api.latch.test")).origin_status).toBe(200);

  // A new value under the same hosts is a rotation: the approval stays.
  expect(
    (await store(v, { value: "ghp_value_two_0123456789", allowed_hosts: ["api.latch.test"] })).status,
  ).toBe(201);
  expect(await statusOf(v, grantId)).toBe("active");

  // A host added: the 8-hour approval given for api.latch.test alone must not reach it.
  const widened = await store(v, { allowed_hosts: ["api.latch.test", "other.latch.test"] });
  expect(widened.status).toBe(201);
  expect(await statusOf(v, grantId)).toBe("revoked");
  expect((await call("other.latch.test")).status).toBe("pending");
  const audit = await operator(v, "GET", "/api/audit?item_name=GITHUB_TOKEN");
  expect(audit.json.events!.map((e) => e.action)).toContain("grant_revoked");

  // Fewer hosts narrow it: a new approval stays.
  const again = await wholeSession(v, "widen-agent");
  expect((await store(v, { allowed_hosts: ["api.latch.test"] })).status).toBe(201);
  expect(await statusOf(v, again)).toBe("active");
  await agent.close();
  await v.app.close();
});

it("the CLI's direct path ends them too when the inject mode changes", async () => {
  const v = await startLocalVault(harness, { logs: new LogCapture() });
  expect((await store(v, { allowed_hosts: ["api.latch.test"] })).status).toBe(201);
  const grantId = await wholeSession(v, "inject-agent");
  await storeLocalItem(v.vault, {
    name: "GITHUB_TOKEN",
    value: "ghp_value_one_0123456789",
    allowed_hosts: ["api.latch.test"],
    inject: "query:access_token",
  });
  expect(await statusOf(v, grantId)).toBe("revoked");
  await v.app.close();
});

it("the widening replace and its revokes commit together: a revoke that fails leaves the credential as it was", async () => {
  const v = await startLocalVault(harness, { logs: new LogCapture() });
  expect((await store(v, { allowed_hosts: ["api.latch.test"] })).status).toBe(201);
  const grantId = await wholeSession(v, "atomic-agent");
  // The database refuses this organisation's revokes (a trigger, as a vault killed between the
  // replace and its revokes would leave them undone): the replace must not commit without them.
  const { db } = v.vault.database;
  const guard = sql.id(`refuse_revoke_${v.vault.organisationId.toLowerCase().replace(/[^a-z0-9]/g, "_")}`);
  await sql`create function ${guard}() returns trigger language plpgsql as $$
    begin raise exception 'revoke refused by the test'; end $$`.execute(db);
  await sql`create trigger ${guard} before update on grants for each row
    when (new.status = 'revoked' and new.organisation_id = ${sql.lit(v.vault.organisationId)})
    execute function ${guard}()`.execute(db);
  try {
    await expect(
      storeLocalItem(v.vault, {
        name: "GITHUB_TOKEN",
        value: "ghp_value_one_0123456789",
        allowed_hosts: ["api.latch.test", "other.latch.test"],
      }),
    ).rejects.toThrow(/P0001/);
  } finally {
    await sql`drop trigger ${guard} on grants`.execute(db);
    await sql`drop function ${guard}()`.execute(db);
  }
  const listed = await operator(v, "GET", "/api/secrets");
  expect(listed.json.secrets!.find((s) => s.name === "GITHUB_TOKEN")?.allowed_hosts).toEqual([
    "api.latch.test",
  ]);
  expect(await statusOf(v, grantId)).toBe("active");
  const before = await operator(v, "GET", "/api/audit?item_name=GITHUB_TOKEN");
  expect(before.json.events!.map((e) => e.action)).not.toContain("item_replaced");

  // With the revokes allowed, both commit: the wider credential and its approval revoked, audited.
  expect((await store(v, { allowed_hosts: ["api.latch.test", "other.latch.test"] })).status).toBe(201);
  expect(await statusOf(v, grantId)).toBe("revoked");
  const after = await operator(v, "GET", "/api/audit?item_name=GITHUB_TOKEN");
  expect(after.json.events!.find((e) => e.action === "grant_revoked")?.reason).toBe("credential_widened");
  await v.app.close();
});

it("refuses a name that is not safe text with 400, before any lookup", async () => {
  const v = await startLocalVault(harness, { logs: new LogCapture() });
  await expect(
    storeLocalItem(v.vault, { name: "A\u0000B", value: "x", allowed_hosts: [] }),
  ).rejects.toMatchObject({
    code: "invalid_request",
    status: 400,
  });
  await v.app.close();
});
