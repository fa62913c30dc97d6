// A client issued, rotated or revoked: its audit row names the member who did it (DECISIONS
// "Teams": the audit names the member), and is written in the change's transaction, so that a row
// the database refuses leaves no client issued, rotated or revoked (test/audit-atomic.int.test.ts
// does the same for the members' changes).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newTestOrganisation, refuseAuditRows, testDatabase } from "../../test/database.ts";
import { type HostedHarness, startHosted } from "../../test/hosted.ts";
import { startTeam } from "../../test/teams.ts";
import { createAuditRepo } from "../audit/audit.repo.ts";
import type { OpenDatabase } from "../db/database.ts";
import { runInTransaction } from "../db/transaction.ts";
import { createGrantsRepo } from "../grants/grants.repo.ts";
import { createGrantsService } from "../grants/grants.service.ts";
import { createNeedsRepo } from "../needs/needs.repo.ts";
import { closeAgentNeeds } from "../needs/needs.service.ts";
import { createClientsRepo } from "./clients.repo.ts";
import { type ClientsService, createClientsService } from "./clients.service.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
});
afterAll(async () => {
  await h?.close();
});

/** The organisation's audit rows about clients, oldest first. */
async function clientRows(database: OpenDatabase, organisationId: string) {
  return database.db
    .selectFrom("audit_events")
    .select(["actor", "action", "detail"])
    .where("organisation_id", "=", organisationId)
    .where("action", "in", ["client_issued", "client_rotated", "client_revoked"])
    .orderBy("seq")
    .execute();
}

describe("the clients' audit rows", () => {
  it("name the member who issued, rotated and revoked the client", async () => {
    const team = await startTeam(h);
    const issued = await team.admin.browser.request("POST", "/api/clients/model", { name: "named agent" });
    expect(issued.statusCode, issued.body).toBe(201);
    const clientId = issued.json().client_id as string;
    const rotated = await team.owner.browser.request("POST", `/api/clients/${clientId}/rotate`);
    expect(rotated.statusCode, rotated.body).toBe(200);
    const revoked = await team.admin.browser.request("POST", `/api/clients/${clientId}/revoke`);
    expect(revoked.statusCode, revoked.body).toBe(200);

    const rows = (await clientRows(h.plane.database, team.organisationId)).filter(
      (row) => (row.detail as { client_id?: string }).client_id === clientId,
    );
    expect(rows.map((row) => [row.action, row.actor])).toEqual([
      ["client_issued", `operator:${team.admin.operatorId}`],
      ["client_rotated", `operator:${team.owner.operatorId}`],
      ["client_revoked", `operator:${team.admin.operatorId}`],
    ]);
  });
});

describe("a client change whose audit row cannot be written", () => {
  let database: OpenDatabase;
  let clients: ClientsService;
  beforeAll(async () => {
    database = await testDatabase();
    // As services.ts wires it: the repos, the approvals, the requests and the audit on one handle.
    const audit = createAuditRepo(database.db);
    clients = createClientsService({
      repo: createClientsRepo(database.db),
      inTransaction: (fn) =>
        runInTransaction(database.db, (trx) => {
          const recordEvent = createAuditRepo(trx).insertAuditEvent;
          const grantsRepo = createGrantsRepo(trx);
          return fn({
            repo: createClientsRepo(trx),
            grants: createGrantsService({
              repo: grantsRepo,
              recordEvent,
              inTransaction: (inner) => inner({ repo: grantsRepo, recordEvent }),
            }),
            closeAgentNeeds: (organisationId, agentId, actor, at) =>
              closeAgentNeeds(
                { repo: createNeedsRepo(trx), recordEvent },
                organisationId,
                agentId,
                actor,
                at,
              ),
            recordEvent,
          });
        }),
      recordEvent: audit.insertAuditEvent,
      environments: ["staging"],
      defaultEnvironment: "staging",
      baseUrl: "https://latch.test",
      now: () => new Date(),
    });
  });

  async function refused(organisationId: string, action: string, attempt: () => Promise<unknown>) {
    const restore = await refuseAuditRows(database, organisationId, action);
    try {
      await expect(attempt()).rejects.toMatchObject({ name: "DatabaseError" });
    } finally {
      await restore();
    }
  }

  it("issues, rotates and revokes nothing; the retry does it once, with one row", async () => {
    const org = await newTestOrganisation(database);
    const actor = "operator:opr_test";
    await refused(org, "client_issued", () => clients.issueClient(org, "model", { name: "a" }, actor));
    expect(await clients.listClients(org)).toEqual([]);

    const issued = await clients.issueClient(org, "model", { name: "a" }, actor);
    await refused(org, "client_rotated", () => clients.rotateClient(org, issued.client_id, actor));
    // The old bearer still works: the token was not replaced.
    expect((await clients.authenticate(issued.token))?.id).toBe(issued.client_id);

    await refused(org, "client_revoked", () => clients.revokeClient(org, issued.client_id, actor));
    expect((await clients.authenticate(issued.token))?.revoked_at ?? null).toBeNull();
    expect(await clients.isLiveAgent(org, issued.client_id, "staging")).toBe(true);

    const rotated = await clients.rotateClient(org, issued.client_id, actor);
    expect(await clients.authenticate(issued.token)).toBeUndefined();
    await clients.revokeClient(org, issued.client_id, actor);
    expect(await clients.authenticate(rotated.token)).toBeUndefined();
    expect((await clientRows(database, org)).map((row) => [row.action, row.actor])).toEqual([
      ["client_issued", actor],
      ["client_rotated", actor],
      ["client_revoked", actor],
    ]);
  });
});
