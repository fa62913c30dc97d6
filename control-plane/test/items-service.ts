// An items service over a test database as services.ts wires it (its transaction, the token cache,
// the audit rows), sealing to a key pair of its own: for tests of the items feature alone.
import { deriveSealingKeyId, readySodium } from "@latch/shared/crypto/seal";
import type { Kysely } from "kysely";
import { createAuditRepo } from "../src/audit/audit.repo.ts";
import type { Database } from "../src/db/schema.ts";
import { runInTransaction } from "../src/db/transaction.ts";
import { createItemTokensRepo } from "../src/items/item-tokens.repo.ts";
import { createItemsRepo } from "../src/items/items.repo.ts";
import { createItemsService, type ItemsService } from "../src/items/items.service.ts";

export async function testItemsService(
  db: Kysely<Database>,
  environments: readonly [string, ...string[]],
): Promise<ItemsService> {
  const sodium = await readySodium();
  const keys = sodium.crypto_box_keypair();
  return createItemsService({
    repo: createItemsRepo(db),
    inTransaction: (fn) =>
      runInTransaction(db, (trx) =>
        fn({ repo: createItemsRepo(trx), recordEvent: createAuditRepo(trx).insertAuditEvent }),
      ),
    tokens: createItemTokensRepo(db),
    sealingKey: async () => ({ keyId: deriveSealingKeyId(keys.publicKey), publicKey: keys.publicKey }),
    recordEvent: createAuditRepo(db).insertAuditEvent,
    environments: [...environments],
    defaultEnvironment: environments[0],
  });
}
