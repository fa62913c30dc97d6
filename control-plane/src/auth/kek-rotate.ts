// `vault kek-rotate`: a new key-encryption key, every authenticator secret re-wrapped under it,
// then the keys no row uses are retired. Safe to interrupt and rerun: each row is re-wrapped by a
// conditional UPDATE on its old key id, and a rerun that finds rows still under an older key
// finishes them before it adds another key.
import { addKeyringKey, loadOrCreateKeyring, retireKeyringKeys } from "./kek.ts";
import type { OperatorsRepo } from "./operators.repo.ts";

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
  repo: OperatorsRepo,
  keyringFile: string,
  progress: (line: string) => void,
): Promise<RotationReport> {
  let keyring = loadOrCreateKeyring(keyringFile);
  const isKnown = (id: string | null) => id === null || keyring.keyIds().includes(id);
  const behind = (await repo.findOperatorsNotUnderKey(keyring.currentId)).filter(
    (r) => isKnown(r.totp_kek_id) && isKnown(r.pending_totp_kek_id),
  );
  if (behind.length === 0) {
    keyring = addKeyringKey(keyringFile);
    progress(`new key-encryption key ${keyring.currentId}`);
  } else {
    progress(`finishing an interrupted rotation to ${keyring.currentId}`);
  }
  const all = await repo.findOperatorsNotUnderKey(keyring.currentId);
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
      await repo.updateTotpSecretRewrapped(row.id, row.totp_kek_id, next);
    }
    if (row.pending_totp_secret && row.pending_totp_kek_id && row.pending_totp_kek_id !== keyring.currentId) {
      const next = keyring.wrap(
        keyring.unwrap(row.pending_totp_kek_id, row.pending_totp_secret, PENDING(row.id)),
        PENDING(row.id),
      );
      await repo.updatePendingTotpRewrapped(row.id, row.pending_totp_kek_id, next);
    }
    rewrapped++;
    if (rewrapped % 100 === 0 || rewrapped === rows.length)
      progress(`re-wrapped ${rewrapped} of ${rows.length}`);
  }
  const retired = retireKeyringKeys(keyringFile, await repo.findUsedKeyIds());
  if (retired.length > 0) progress(`retired ${retired.join(", ")}`);
  return { keyId: keyring.currentId, rewrapped, retired, unknownKeyRows };
}
