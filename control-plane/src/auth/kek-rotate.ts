// `vault kek-rotate`: a new key-encryption key, every authenticator secret re-wrapped under it
// (twice: again after the writes that began under the old key have ended), then the keys no row
// uses are retired. Hosted, where each replica reads its own copy of the file, in three steps with
// a roll after each: `--stage` (every replica opens the new key), the switch and re-wrap (every
// replica wraps under it), `--retire` (what they wrapped meanwhile moved, the old key dropped). Safe to interrupt and rerun: each row is re-wrapped by a
// conditional UPDATE on its old key id, and a rerun that finds rows still under an older key
// finishes them before it adds another key. Every step first refuses a file that lacks a key the
// database's rows are wrapped under (`refuseKeyringBehind`): an old copy of kek.json.
import {
  addKeyringKey,
  type Keyring,
  keyringKeyIds,
  loadOrCreateKeyring,
  retireKeyringKeys,
  stagedKeyringKey,
} from "./kek.ts";
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

/**
 * How long a rotation waits, after its first pass, for writes that read the old key before the
 * new one was added (an authenticator confirmed at that moment): far longer than such a write.
 */
export const SETTLE_MS = 10_000;

export interface RotationOptions {
  /** Tests: what the rotation waits on between its two passes (default: SETTLE_MS). */
  settle?: () => Promise<void>;
  /**
   * Hosted: the replicas hold their own copy of the file and keep wrapping under the old key until
   * they are given the new one, so the old keys stay (`retireKek` takes them out after the roll),
   * and a key is made current only once it was staged, so that every replica already opens it.
   */
  isHosted?: boolean;
}

/** A step refused before it changed anything: the file lacks keys the database's rows are under. */
export class KekKeyringBehindError extends Error {
  readonly code = "kek_keyring_behind";
}

/** How many missing key ids the refusal names. */
const MISSING_NAMED = 5;

/**
 * Refuses (KekKeyringBehindError) a keyring file that lacks a key id some authenticator secret in
 * the database is wrapped under: an old copy of kek.json, taken before another rotation moved
 * rows. Any step run with it would hand the replicas (through the Secret) a file that cannot open
 * those rows, and `--retire` would drop keys the copy in the Secret still needs. Run by every step
 * of `vault kek-rotate` before it changes anything; reads the file without creating it.
 */
export async function refuseKeyringBehind(repo: OperatorsRepo, keyringFile: string): Promise<void> {
  const held = new Set(keyringKeyIds(keyringFile));
  const missing = [...(await repo.findUsedKeyIds())].filter((id) => !held.has(id)).sort();
  if (missing.length === 0) return;
  const named = missing.slice(0, MISSING_NAMED).join(", ");
  const more = missing.length > MISSING_NAMED ? ` and ${missing.length - MISSING_NAMED} more` : "";
  throw new KekKeyringBehindError(
    `${keyringFile} does not hold key ${named}${more}, under which authenticator secrets in the database are wrapped: ` +
      "it is an older copy of kek.json than the one the control plane uses. Nothing was changed: " +
      "take the control plane's current kek.json (its Secret) and run this step again",
  );
}

const settleDefault = () => new Promise<void>((resolve) => setTimeout(resolve, SETTLE_MS));

export async function rotateKek(
  repo: OperatorsRepo,
  keyringFile: string,
  progress: (line: string) => void,
  options: RotationOptions = {},
): Promise<RotationReport> {
  let keyring = loadOrCreateKeyring(keyringFile);
  const isKnown = (id: string | null) => id === null || keyring.keyIds().includes(id);
  const behind = (await repo.findOperatorsNotUnderKey(keyring.currentId)).filter(
    (r) => isKnown(r.totp_kek_id) && isKnown(r.pending_totp_kek_id),
  );
  const staged = stagedKeyringKey(keyringFile);
  if (behind.length > 0 && staged === undefined) {
    progress(`finishing an interrupted rotation to ${keyring.currentId}`);
  } else if (options.isHosted && staged === undefined) {
    // The replicas would meet secrets under a key their copy of the file does not hold.
    throw new Error(
      "no key is staged: run vault kek-rotate --stage, put the new kek.json in the control plane's Secret and roll it, then run vault kek-rotate again",
    );
  } else {
    keyring = addKeyringKey(keyringFile);
    progress(`new key-encryption key ${keyring.currentId}`);
  }
  const passes = await rewrapTwice(repo, keyring, progress, options.settle ?? settleDefault);
  if (options.isHosted) {
    progress(
      "the old keys stay until the replicas wrap under the new one: put this kek.json in the Secret, roll the control plane, then run vault kek-rotate --retire",
    );
    return { keyId: keyring.currentId, ...passes, retired: [] };
  }
  const retired = retireKeyringKeys(keyringFile, await repo.findUsedKeyIds());
  if (retired.length > 0) progress(`retired ${retired.join(", ")}`);
  return { keyId: keyring.currentId, ...passes, retired };
}

/**
 * A hosted rotation's last step, after the replicas were rolled with the new current key: what
 * they wrapped under an old key meanwhile is re-wrapped, then the keys no row uses are retired.
 */
export async function retireKek(
  repo: OperatorsRepo,
  keyringFile: string,
  progress: (line: string) => void,
  settle: () => Promise<void> = settleDefault,
): Promise<RotationReport> {
  const keyring = loadOrCreateKeyring(keyringFile);
  const passes = await rewrapTwice(repo, keyring, progress, settle);
  const retired = retireKeyringKeys(keyringFile, await repo.findUsedKeyIds());
  progress(retired.length > 0 ? `retired ${retired.join(", ")}` : "no key to retire");
  return { keyId: keyring.currentId, ...passes, retired };
}

/** Two passes of re-wrapping, a settling wait between them. */
async function rewrapTwice(
  repo: OperatorsRepo,
  keyring: Keyring,
  progress: (line: string) => void,
  settle: () => Promise<void>,
): Promise<{ rewrapped: number; unknownKeyRows: number }> {
  const first = await rewrapBehind(repo, keyring, progress);
  // A write that wrapped under the old key just before the new one was added may commit after the
  // pass above: its row would then be under a key about to be deleted, and never open again.
  progress(`waiting ${Math.round(SETTLE_MS / 1000)} s for writes under the old key to finish`);
  await settle();
  const second = await rewrapBehind(repo, keyring, progress);
  return { rewrapped: first.rewrapped + second.rewrapped, unknownKeyRows: second.unknownKeyRows };
}

/** Re-wraps every secret not under the current key (and known to this keyring) under it. */
async function rewrapBehind(
  repo: OperatorsRepo,
  keyring: Keyring,
  progress: (line: string) => void,
): Promise<{ rewrapped: number; unknownKeyRows: number }> {
  const isKnown = (id: string | null) => id === null || keyring.keyIds().includes(id);
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
  return { rewrapped, unknownKeyRows };
}
