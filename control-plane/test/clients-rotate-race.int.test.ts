// A rotation racing a revoke or another rotation (the real service, repos and audit on the test's
// database; the other request is made to commit between the rotation's read of the client and its
// write, the window two replicas share): the rotation that loses replaces nothing, hands out no
// token and writes no ledger row. A revoke that won answers 404, as rotating a revoked client does;
// a rotation that won, 409 stale_version. Nothing is ever rotated after it was revoked.
import { AppError } from "@latch/shared/errors";
import { beforeAll, describe, expect, it } from "vitest";
import { createAuditRepo } from "../src/audit/audit.repo.ts";
import { createClientsRepo } from "../src/clients/clients.repo.ts";
import { type ClientsService, createClientsService } from "../src/clients/clients.service.ts";
import type { OpenDatabase } from "../src/db/database.ts";
import { runInTransaction } from "../src/db/transaction.ts";
import { createGrantsRepo } from "../src/grants/grants.repo.ts";
import { createGrantsService } from "../src/grants/grants.service.ts";
import { createNeedsRepo } from "../src/needs/needs.repo.ts";
import { closeAgentNeeds } from "../src/needs/needs.service.ts";
import { newTestOrganisation, testDatabase } from "./database.ts";

let database: OpenDatabase;
let clients: ClientsService;
/** Runs once, right after the next read of a client outside a transaction (the rotation's read). */
let afterRead: (() => Promise<void>) | undefined;

beforeAll(async () => {
  database = await testDatabase();
  const repo = createClientsRepo(database.db);
  clients = createClientsService({
    // The repo as it is, but the other request commits right after the rotation has read the row.
    repo: {
      ...repo,
      async findClientById(organisationId, id) {
        const row = await repo.findClientById(organisationId, id);
        const other = afterRead;
        afterRead = undefined;
        await other?.();
        return row;
      },
    },
    // As services.ts wires it: the repos, the approvals, the requests and the audit on one handle.
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
            closeAgentNeeds({ repo: createNeedsRepo(trx), recordEvent }, organisationId, agentId, actor, at),
          recordEvent,
        });
      }),
    recordEvent: createAuditRepo(database.db).insertAuditEvent,
    environments: ["staging"],
    defaultEnvironment: "staging",
    baseUrl: "https://latch.test",
    now: () => new Date(),
  });
});

/** The client's ledger rows, oldest first. */
async function ledger(organisationId: string, clientId: string) {
  const rows = await database.db
    .selectFrom("audit_events")
    .select(["action", "detail"])
    .where("organisation_id", "=", organisationId)
    .where("action", "in", ["client_issued", "client_rotated", "client_revoked"])
    .orderBy("seq")
    .execute();
  return rows
    .filter((row) => (row.detail as { client_id?: string }).client_id === clientId)
    .map((row) => row.action);
}

async function refusal(attempt: Promise<unknown>): Promise<AppError> {
  const error = await attempt.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(AppError);
  return error as AppError;
}

describe("a rotation racing a revoke", () => {
  it("answers 404 and hands out no token when the revoke commits first", async () => {
    const org = await newTestOrganisation(database);
    const actor = "operator:opr_race";
    const issued = await clients.issueClient(org, "trusted", { name: "runtime" }, actor);
    afterRead = () => clients.revokeClient(org, issued.client_id, "operator:opr_other");

    const lost = await refusal(clients.rotateClient(org, issued.client_id, actor));
    expect(lost.code).toBe("not_found");
    expect(lost.message).toBe("this client is revoked");
    expect(await clients.authenticate(issued.token)).toBeUndefined();
    const row = (await clients.listClients(org)).find((c) => c.id === issued.client_id);
    expect(row?.rotated_at).toBeNull();
    expect(await ledger(org, issued.client_id)).toEqual(["client_issued", "client_revoked"]);
  });
});

describe("two rotations at once", () => {
  it("answer one token: the later one is 409 stale_version, replacing and recording nothing", async () => {
    const org = await newTestOrganisation(database);
    const actor = "operator:opr_race";
    const issued = await clients.issueClient(org, "trusted", { name: "runtime" }, actor);
    let won: string | undefined;
    afterRead = async () => {
      won = (await clients.rotateClient(org, issued.client_id, "operator:opr_other")).token;
    };

    const lost = await refusal(clients.rotateClient(org, issued.client_id, actor));
    expect(lost.code).toBe("stale_version");
    expect(won).toMatch(/^avt_/);
    // The token the winner handed out is the live one; the first is dead.
    expect((await clients.authenticate(won!))?.id).toBe(issued.client_id);
    expect(await clients.authenticate(issued.token)).toBeUndefined();
    expect(await ledger(org, issued.client_id)).toEqual(["client_issued", "client_rotated"]);
  });
});
