// The call's one read (call-context.repo.ts) answers what each feature's own read answers: the
// credential as items.repo finds it by name or by host, the agent's usable grants as grants.repo
// findUsableGrants lists them (folder grants, expiry, status, other agents and tools included),
// and whether the client still holds its bearer.
import { randomBytes } from "node:crypto";
import { sha256Hex } from "@latch/shared/crypto/hash";
import { newId } from "@latch/shared/ids";
import { beforeAll, describe, expect, it } from "vitest";
import { newTestItem, newTestOrganisation, testDatabase } from "../../test/database.ts";
import type { OpenDatabase } from "../db/database.ts";
import { HTTP_REQUEST_TOOL } from "../grants/grant-scope.ts";
import { createGrantsRepo, type GrantsRepo } from "../grants/grants.repo.ts";
import { createItemsRepo, type ItemsRepo } from "../items/items.repo.ts";
import { toCallableItem } from "../items/items.service.ts";
import { createPoliciesRepo } from "../policies/policies.repo.ts";
import { type CallContextRepo, createCallContextRepo } from "./call-context.repo.ts";

let database: OpenDatabase;
let context: CallContextRepo;
let items: ItemsRepo;
let grants: GrantsRepo;

beforeAll(async () => {
  database = await testDatabase();
  context = createCallContextRepo(database.db);
  items = createItemsRepo(database.db);
  grants = createGrantsRepo(database.db);
});

const NOW = new Date("2026-11-26T06:00:00.000Z");
const HOST = "api.context.test";

async function client(organisationId: string, token: string, name = "agent") {
  const id = newId("cli");
  await database.db
    .insertInto("clients")
    .values({
      id,
      organisation_id: organisationId,
      kind: "model",
      name,
      environment: "staging",
      token_hash: sha256Hex(token),
      token_last4: token.slice(-4),
      created_at: NOW,
      rotated_at: null,
      revoked_at: null,
      first_used_at: null,
      last_used_at: null,
    })
    .execute();
  return id;
}

async function folder(organisationId: string, name: string) {
  const id = newId("fld");
  await database.db
    .insertInto("folders")
    .values({ id, organisation_id: organisationId, environment: "staging", name })
    .execute();
  return id;
}

const item = (organisationId: string, name: string, hosts: string[], folderId: string | null = null) =>
  newTestItem(database, organisationId, { name, hosts, folderId });

async function grant(
  organisationId: string,
  itemId: string,
  agentId: string,
  fields: {
    policy?: string;
    status?: string;
    expires_at?: Date | null;
    tool_id?: string;
    folder_id?: string;
  } = {},
) {
  const id = newId("grt");
  await database.db
    .insertInto("grants")
    .values({
      id,
      organisation_id: organisationId,
      environment: "staging",
      item_id: itemId,
      agent_id: agentId,
      tool_id: fields.tool_id ?? HTTP_REQUEST_TOOL,
      policy: fields.policy ?? "item_standing",
      status: fields.status ?? "active",
      task_id: null,
      task_description: null,
      created_at: NOW,
      approved_at: NOW,
      expires_at: fields.expires_at ?? null,
      consumed_at: null,
      revoked_at: null,
      folder_id: fields.folder_id ?? null,
      scope_host: HOST,
    })
    .execute();
  return id;
}

describe("the call's one read", () => {
  it("finds by name what items and grants find, each usable grant and nothing else", async () => {
    const org = await newTestOrganisation(database);
    const other = await newTestOrganisation(database);
    const token = `avm_${randomBytes(12).toString("hex")}_context_one`;
    const agent = await client(org, token);
    const someoneElse = await client(org, `avm_${randomBytes(12).toString("hex")}_context_two`, "other");
    const shelf = await folder(org, "shelf");
    const key = await item(org, "CTX_KEY", [HOST], shelf);
    const sibling = await item(org, "CTX_SIBLING", [HOST], shelf);
    await item(other, "CTX_KEY", [HOST]);
    await grant(org, key, agent, { policy: "prompt" });
    await grant(org, key, agent, { policy: "session", expires_at: new Date(NOW.getTime() + 3_600_000) });
    await grant(org, key, agent, { policy: "session", expires_at: new Date(NOW.getTime() - 1) });
    await grant(org, key, agent, { status: "revoked" });
    await grant(org, key, agent, { tool_id: "request_grant" });
    await grant(org, key, someoneElse);
    await grant(org, sibling, agent, { policy: "folder_standing", folder_id: shelf });
    await grant(org, sibling, agent);

    const read = await context.findCallContext({
      organisationId: org,
      environment: "staging",
      itemName: "CTX_KEY",
      agentId: agent,
      toolId: HTTP_REQUEST_TOOL,
      bearerHash: sha256Hex(token),
      now: NOW,
    });
    expect(read.clientLive).toBe(true);
    const found = await items.findItemByName(org, "staging", "CTX_KEY");
    expect(read.items).toEqual([toCallableItem(found!)]);
    const usable = await grants.findUsableGrants(
      { organisationId: org, itemId: key, folderId: shelf, agentId: agent, toolId: HTTP_REQUEST_TOOL },
      NOW,
    );
    expect(usable.map((g) => g.policy)).toEqual(["folder_standing", "session", "prompt"]);
    expect(read.grantsOf(key)).toEqual(usable);
  });

  it("finds by host every credential allowing it, in name order, each with its own grants", async () => {
    const org = await newTestOrganisation(database);
    const token = `avm_${randomBytes(12).toString("hex")}_context_host`;
    const agent = await client(org, token);
    const b = await item(org, "B_KEY", [HOST, "other.context.test"]);
    const a = await item(org, "A_KEY", [HOST]);
    await item(org, "C_ELSEWHERE", ["other.context.test"]);
    await grant(org, b, agent);
    const read = await context.findCallContext({
      organisationId: org,
      environment: "staging",
      host: HOST,
      agentId: agent,
      toolId: HTTP_REQUEST_TOOL,
      bearerHash: sha256Hex(token),
      now: NOW,
    });
    const found = await items.findItemsByHost(org, "staging", HOST);
    expect(read.items).toEqual(found.map(toCallableItem));
    expect(read.items.map((i) => i.name)).toEqual(["A_KEY", "B_KEY"]);
    expect(read.grantsOf(a)).toEqual([]);
    expect(read.grantsOf(b)).toEqual(
      await grants.findUsableGrants(
        { organisationId: org, itemId: b, agentId: agent, toolId: HTTP_REQUEST_TOOL },
        NOW,
      ),
    );
  });

  it("says the client is not live when it is revoked, holds another bearer, or is another org's", async () => {
    const org = await newTestOrganisation(database);
    const token = `avm_${randomBytes(12).toString("hex")}_context_live`;
    const agent = await client(org, token);
    await item(org, "LIVE_KEY", [HOST]);
    const read = (query: { organisationId?: string; bearerHash?: string }) =>
      context.findCallContext({
        organisationId: query.organisationId ?? org,
        environment: "staging",
        itemName: "LIVE_KEY",
        agentId: agent,
        toolId: HTTP_REQUEST_TOOL,
        bearerHash: query.bearerHash,
        now: NOW,
      });
    expect((await read({ bearerHash: sha256Hex(token) })).clientLive).toBe(true);
    // No bearer to check (an OAuth client, or a bearer confirmed already): the row's liveness alone.
    expect((await read({})).clientLive).toBe(true);
    expect((await read({ bearerHash: sha256Hex(`${token}x`) })).clientLive).toBe(false);
    expect((await read({ organisationId: await newTestOrganisation(database) })).clientLive).toBe(false);
    await database.db.updateTable("clients").set({ revoked_at: NOW }).where("id", "=", agent).execute();
    const revoked = await read({ bearerHash: sha256Hex(token) });
    expect(revoked.clientLive).toBe(false);
    // The credential is still read (the answer is the 401 the route gives, not a need_item).
    expect(revoked.items.map((i) => i.name)).toEqual(["LIVE_KEY"]);
  });

  it("answers no credential and the client's liveness when nothing matches", async () => {
    const org = await newTestOrganisation(database);
    const token = `avm_${randomBytes(12).toString("hex")}_context_none`;
    const agent = await client(org, token);
    const read = await context.findCallContext({
      organisationId: org,
      environment: "staging",
      itemName: "NOT_STORED",
      agentId: agent,
      toolId: HTTP_REQUEST_TOOL,
      bearerHash: sha256Hex(token),
      now: NOW,
    });
    expect(read).toMatchObject({ clientLive: true, items: [] });
  });

  it("reads the organisation's policy version in the same statement: 0 with none, then each save's", async () => {
    const org = await newTestOrganisation(database);
    const token = `avm_${randomBytes(12).toString("hex")}_context_policy`;
    const agent = await client(org, token);
    const read = () =>
      context.findCallContext({
        organisationId: org,
        environment: "staging",
        itemName: "NOT_STORED",
        agentId: agent,
        toolId: HTTP_REQUEST_TOOL,
        now: NOW,
      });
    expect((await read()).policyVersion).toBe(0);
    const policies = createPoliciesRepo(database.db);
    const change = { rules: [], at: NOW, by: "operator:opr_test" };
    expect(await policies.updatePolicyList(org, 0, change)).toBe(1);
    expect((await read()).policyVersion).toBe(1);
    expect(await policies.updatePolicyList(org, 1, change)).toBe(2);
    expect((await read()).policyVersion).toBe(2);
    // Another organisation's list is not this one's.
    await policies.updatePolicyList(await newTestOrganisation(database), 0, change);
    expect((await read()).policyVersion).toBe(2);
  });
});
