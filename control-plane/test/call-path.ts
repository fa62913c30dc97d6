// One organisation's items and grants services over a test database as services.ts wires them,
// sealing to the egress harness's proxy, with API_KEY stored for api.latch.test and no policy
// rules: the set-up of the tests that drive runHttpRequest and the calls service beneath the MCP
// edge (held-retry, late-fence-fault, spent-once). Each builds its own calls service around it.
import { createAuditRepo } from "../src/audit/audit.repo.ts";
import type { OpenDatabase } from "../src/db/database.ts";
import { runInTransaction } from "../src/db/transaction.ts";
import { createGrantsRepo } from "../src/grants/grants.repo.ts";
import { createGrantsService, type GrantsServiceDeps } from "../src/grants/grants.service.ts";
import { createItemsRepo } from "../src/items/items.repo.ts";
import { createItemsService } from "../src/items/items.service.ts";
import { newTestOrganisation } from "./database.ts";
import type { EgressHarness } from "./egress-harness.ts";

/** No policy rules: today's approvals decide every call. */
export const NO_POLICIES = {
  decideCall: async () => undefined,
  admitCall: async () => undefined,
  recordPolicyEvent: async () => {},
};

export async function callPathOrganisation(
  database: OpenDatabase,
  harness: EgressHarness,
  secret: string,
  grantsOptions: Pick<GrantsServiceDeps, "approvalCodes" | "notifyApproval"> = {},
) {
  const organisationId = await newTestOrganisation(database);
  const audit = createAuditRepo(database.db);
  const items = createItemsService({
    repo: createItemsRepo(database.db),
    sealingKey: async () => harness.proxy.sealingKey,
    recordEvent: audit.insertAuditEvent,
    environments: ["production"],
    defaultEnvironment: "production",
  });
  const grants = createGrantsService({
    repo: createGrantsRepo(database.db),
    recordEvent: audit.insertAuditEvent,
    inTransaction: (fn) =>
      runInTransaction(database.db, (trx) =>
        fn({ repo: createGrantsRepo(trx), recordEvent: createAuditRepo(trx).insertAuditEvent }),
      ),
    ...grantsOptions,
  });
  await items.storeItem(organisationId, "operator", {
    name: "API_KEY",
    value: secret,
    allowed_hosts: ["api.latch.test"],
    environment: "production",
  });
  return { organisationId, audit, items, grants };
}

/** A grant's status, held mark and named ticket, as the call path leaves them. */
export function grantCallState(database: OpenDatabase, grantId: string) {
  return database.db
    .selectFrom("grants")
    .select(["status", "held_until", "call_ticket_id"])
    .where("id", "=", grantId)
    .executeTakeFirstOrThrow();
}
