// `vault kek-rotate`: a new key-encryption key, every authenticator secret re-wrapped under it,
// then the keys no row uses are retired. Safe to interrupt and rerun: each row is re-wrapped by a
// conditional UPDATE on its old key id, and a rerun that finds rows still under an older key
// finishes them before it adds another key.
import type { Kysely } from "kysely";
import type { Database } from "../db/schema.ts";
import { addKeyringKey, loadOrCreateKeyring, retireKeyringKeys } from "./kek.ts";

const ACTIVE = (id: string) => `${id}:totp`;
const PENDING = (id: string) => `${id}:pending-totp`;

export interface RotationReport {
  keyId: string;
  rewrapped: number;
  retired: string[];
  /** Operators whose secret is under a key this keyring does not hold: left alone, reported. */
  unknownKeyRows: number;
}

export async function rotateKek(
  db: Kysely<Database>,
  keyringFile: string,
  progress: (line: string) => void,
): Promise<RotationReport> {
  let keyring = loadOrCreateKeyring(keyringFile);
  const isKnown = (id: string | null) => id === null || keyring.keyIds().includes(id);
  const behind = (await findRowsNotUnder(db, keyring.currentId)).filter(
    (r) => isKnown(r.totp_kek_id) && isKnown(r.pending_totp_kek_id),
  );
  if (behind.length === 0) {
    keyring = addKeyringKey(keyringFile);
    progress(`new key-encryption key ${keyring.currentId}`);
  } else {
    progress(`finishing an interrupted rotation to ${keyring.currentId}`);
  }
  const all = await findRowsNotUnder(db, keyring.currentId);
  const rows = all.filter((r) => isKnown(r.totp_kek_id) && isKnown(r.pending_totp_kek_id));
  const unknownKeyRows = all.length - rows.length;
  if (unknownKeyRows > 0) {
    progress(
      `${unknownKeyRows} operator(s) have a secret under a key this keyring does not hold; left unchanged`,
    );
  }
  let rewrapped = 0;
  for (const row of rows) {
    if (row.totp_secret && row.totp_kek_id && row.totp_kek_id !== keyring.currentId) {
      const next = keyring.wrap(
        keyring.unwrap(row.totp_kek_id, row.totp_secret, ACTIVE(row.id)),
        ACTIVE(row.id),
      );
      await db
        .updateTable("operators")
        .set({ totp_secret: next.blob, totp_kek_id: next.kekId })
        .where("id", "=", row.id)
        .where("totp_kek_id", "=", row.totp_kek_id)
        .execute();
    }
    if (row.pending_totp_secret && row.pending_totp_kek_id && row.pending_totp_kek_id !== keyring.currentId) {
      const next = keyring.wrap(
        keyring.unwrap(row.pending_totp_kek_id, row.pending_totp_secret, PENDING(row.id)),
        PENDING(row.id),
      );
      await db
        .updateTable("operators")
        .set({ pending_totp_secret: next.blob, pending_totp_kek_id: next.kekId })
        .where("id", "=", row.id)
        .where("pending_totp_kek_id", "=", row.pending_totp_kek_id)
        .execute();
    }
    rewrapped++;
    if (rewrapped % 100 === 0 || rewrapped === rows.length)
      progress(`re-wrapped ${rewrapped} of ${rows.length}`);
  }
  const stillUsed = new Set<string>();
  for (const row of await db
    .selectFrom("operators")
    .select(["totp_kek_id", "pending_totp_kek_id"])
    .execute()) {
    if (row.totp_kek_id) stillUsed.add(row.totp_kek_id);
    if (row.pending_totp_kek_id) stillUsed.add(row.pending_totp_kek_id);
  }
  const retired = retireKeyringKeys(keyringFile, stillUsed);
  if (retired.length > 0) progress(`retired ${retired.join(", ")}`);
  return { keyId: keyring.currentId, rewrapped, retired, unknownKeyRows };
}

function findRowsNotUnder(db: Kysely<Database>, keyId: string) {
  return db
    .selectFrom("operators")
    .select(["id", "totp_secret", "totp_kek_id", "pending_totp_secret", "pending_totp_kek_id"])
    .where((eb) =>
      eb.or([
        eb.and([eb("totp_kek_id", "is not", null), eb("totp_kek_id", "!=", keyId)]),
        eb.and([eb("pending_totp_kek_id", "is not", null), eb("pending_totp_kek_id", "!=", keyId)]),
      ]),
    )
    .orderBy("id")
    .execute();
}
