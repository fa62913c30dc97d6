// Checks a ledger export line by line, with no database: every row's hash recomputed from its
// canonical form, each prev_hash the hash before it, seq from the first row on without a gap, one
// organisation throughout, and each checkpoint naming the hash of the row it follows and (when the
// published keys are given) signed by one of them. GET /api/audit/verify and `vault audit verify`
// both run this, so the API and an auditor's offline check agree on the first bad seq. A checkpoint
// signed by a retired key vouches for its rows only when it was made before the key's `retired_at`
// and no row so far is from after it, nor any key that signed a checkpoint before it (old evidence
// keeps verifying). One made after its retirement (a replica slow to roll, or a stolen copy of the
// key) vouches for nothing: it is ignored, listed in `ignored_checkpoints`, and the rows it covers
// are covered by the next valid checkpoint, the hash chain binding them. A file also has to end with
// a valid checkpoint of its last row (`requireClosingCheckpoint`), which a live ledger, whose newest
// rows wait for the next hourly checkpoint, does not.
import { createPublicKey, type KeyObject, verify } from "node:crypto";
import {
  checkpointSigningInput,
  type LedgerCheckpoint,
  type LedgerLine,
  type LedgerRow,
  rowHash,
  ZERO_HASH,
} from "@latch/shared/ledger/ledger-format";

export interface LedgerVerification {
  ok: boolean;
  /** Rows read. */
  rows: number;
  /** The seq of the last row read (0 for an empty ledger). */
  last_seq: number;
  /** The first seq at which the chain does not hold. */
  first_bad_seq?: number;
  /** What is wrong there, in one sentence. */
  problem?: string;
  /** The last checkpoint that held, or null. */
  last_checkpoint: LedgerCheckpoint | null;
  /**
   * Checkpoints signed by a retired key after its retirement: they vouch for nothing and were
   * passed over (the first MAX_IGNORED_LISTED; absent when there are none).
   */
  ignored_checkpoints?: IgnoredCheckpoint[];
}

/** A checkpoint the verifier passed over, and why. */
export interface IgnoredCheckpoint {
  seq: number;
  key_id: string;
  at: string;
  reason: string;
}

/** How many ignored checkpoints an answer lists: a ledger full of them still answers small. */
export const MAX_IGNORED_LISTED = 100;

/**
 * The published keys (GET /.well-known/latch-audit-keys.json). A retired key carries `retired_at`
 * (RFC 3339): it signed nothing after that time, so a checkpoint it signs later does not verify.
 */
export interface AuditKeysDocument {
  keys: { key_id: string; alg: "Ed25519"; public_key: string; created_at: string; retired_at?: string }[];
}

/**
 * A published key as the verifier uses it: its public half, when it was made (ms, when that reads
 * as a time) and when it was retired (ms), if it was.
 */
export interface VerifyingKey {
  key: KeyObject;
  createdAt?: number;
  retiredAt?: number;
}

/** Public keys by key id, from the published document. */
export function verifyingKeys(document: AuditKeysDocument): Map<string, VerifyingKey> {
  const keys = new Map<string, VerifyingKey>();
  for (const key of document.keys ?? []) {
    if (key?.alg !== "Ed25519" || typeof key.key_id !== "string" || typeof key.public_key !== "string")
      continue;
    // A retirement that does not read as a time is no key: its checkpoints are reported as
    // unpublished rather than taken as never retired.
    const retiredAt = key.retired_at === undefined ? undefined : Date.parse(String(key.retired_at));
    if (retiredAt !== undefined && !Number.isFinite(retiredAt)) continue;
    // A creation time that does not read as one only tells nothing about later checkpoints.
    const createdAt = Date.parse(String(key.created_at));
    try {
      keys.set(key.key_id, {
        key: createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: key.public_key }, format: "jwk" }),
        ...(Number.isFinite(createdAt) ? { createdAt } : {}),
        ...(retiredAt === undefined ? {} : { retiredAt }),
      });
    } catch {
      // Not an Ed25519 public key: a checkpoint naming this key id is then reported as unpublished.
    }
  }
  return keys;
}

/**
 * Why a retired key's checkpoint made at `checkpointAt` is from after the key's retirement, or
 * undefined when it is from before it. `latestRowAt` is the latest row time read so far (row times
 * need not go forward, and rows are not signed: a row dated early after rows dated late is still
 * after them), `newestSignerAt` the creation time of the newest key that signed a checkpoint before
 * this one (a key made at or after the retirement signed before it, so this one came later). Both
 * are from the chain read so far. A time that does not read as one is not before anything.
 */
function afterRetirement(
  checkpointAt: unknown,
  latestRowAt: number,
  newestSignerAt: number,
  retiredAt: number,
): string | undefined {
  const signedAt = Date.parse(String(checkpointAt));
  if (!(signedAt <= retiredAt)) return "it was made after the retirement";
  if (!(latestRowAt <= retiredAt)) return "a row it covers was written after the retirement";
  if (newestSignerAt >= retiredAt) {
    return "a checkpoint before it was signed by a key made after the retirement";
  }
  return undefined;
}

/**
 * The published key whose signature `line` carries, or why it has none: its key is not published,
 * or its signature does not verify with it (one sentence). Whether a retired key still vouches for
 * it is the caller's question.
 */
export function checkpointSigner(
  line: LedgerCheckpoint,
  keys: ReadonlyMap<string, VerifyingKey>,
): VerifyingKey | string {
  const seq = Number(line.seq);
  const key = keys.get(line.key_id);
  if (!key) {
    return `the checkpoint of seq ${seq} is signed by key ${String(line.key_id)}, which is not published`;
  }
  let isValid = false;
  try {
    isValid = verify(null, checkpointSigningInput(line), key.key, Buffer.from(line.signature, "base64url"));
  } catch {
    isValid = false;
  }
  return isValid
    ? key
    : `the checkpoint of seq ${seq} has a signature that does not verify with key ${line.key_id}`;
}

/**
 * A verifier fed the export's lines in order. Without `keys` checkpoints are checked for their
 * place and hash only (their signatures are not: the caller says so). With `from` the lines start
 * after that row (a checkpoint already trusted): the first must follow it.
 */
export function createLedgerVerifier(
  options: {
    keys?: ReadonlyMap<string, VerifyingKey> | undefined;
    from?: { seq: number; hash: string } | undefined;
  } = {},
) {
  const { from } = options;
  const state: LedgerVerification = { ok: true, rows: 0, last_seq: from?.seq ?? 0, last_checkpoint: null };
  let organisationId: string | undefined;
  /** The organisation the first line names, when it names one. */
  let namedOrganisation: string | undefined;
  let lastHash = from?.hash ?? ZERO_HASH;
  /** The latest `at` of the rows read (ms; -Infinity before any, Infinity after one that is no time). */
  let latestRowAt = Number.NEGATIVE_INFINITY;
  /** When the newest key that signed a valid checkpoint so far was made (ms). */
  let newestSignerAt = Number.NEGATIVE_INFINITY;
  const ignored: IgnoredCheckpoint[] = [];
  /** The last checkpoint passed over (listed or not), for the closing check's sentence. */
  let lastIgnored: { seq: number; reason: string } | undefined;

  function fail(seq: number, problem: string): void {
    if (!state.ok) return;
    state.ok = false;
    state.first_bad_seq = seq;
    state.problem = problem;
  }

  function checkOrganisation(line: { organisation_id?: unknown }, seq: number): boolean {
    if (organisationId === undefined) {
      organisationId = String(line.organisation_id);
      if (typeof line.organisation_id === "string") namedOrganisation = line.organisation_id;
    }
    if (line.organisation_id === organisationId) return true;
    fail(seq, `seq ${seq} belongs to another organisation`);
    return false;
  }

  function row(line: LedgerRow): void {
    const expected = state.rows === 0 && !from ? undefined : state.last_seq + 1;
    state.rows += 1;
    const seq = Number.isSafeInteger(line.seq) ? line.seq : state.last_seq + 1;
    if (!state.ok) {
      state.last_seq = seq;
      return;
    }
    if (expected === undefined) {
      // A chain is checked from its start: a file that begins later (an export resumed with
      // since_seq, or one whose first rows were cut) cannot show that its first prev_hash is real.
      // Parts of a resumed export are checked joined, in order.
      if (seq !== 1) fail(1, `seq 1 is missing (the first row is seq ${String(line.seq)})`);
      else if (line.prev_hash !== ZERO_HASH) fail(1, "seq 1 does not start from 64 zeros");
    } else if (seq !== expected) {
      fail(expected, `seq ${expected} is missing (the next row is seq ${String(line.seq)})`);
    } else if (line.prev_hash !== lastHash) {
      fail(seq, `seq ${seq} does not follow seq ${seq - 1} (its prev_hash is not that row's hash)`);
    }
    if (state.ok && checkOrganisation(line, seq)) {
      let recomputed: string | undefined;
      try {
        recomputed = rowHash(line);
      } catch {
        recomputed = undefined;
      }
      if (recomputed !== line.hash) fail(seq, `seq ${seq} was changed (its hash does not match its content)`);
    }
    state.last_seq = seq;
    lastHash = typeof line.hash === "string" ? line.hash : "";
    const rowAt = Date.parse(String(line.at));
    latestRowAt = Number.isFinite(rowAt) ? Math.max(latestRowAt, rowAt) : Number.POSITIVE_INFINITY;
  }

  function checkpoint(line: LedgerCheckpoint): void {
    if (!state.ok) return;
    const seq = Number(line.seq);
    if (!checkOrganisation(line, seq)) return;
    if ((state.rows === 0 && !from) || seq > state.last_seq) {
      fail(state.last_seq + 1, `a checkpoint covers seq ${seq}, but the rows end at seq ${state.last_seq}`);
      return;
    }
    if (seq !== state.last_seq) {
      fail(seq, `the checkpoint of seq ${seq} is out of place`);
      return;
    }
    if (line.hash !== lastHash) {
      fail(seq, `the checkpoint of seq ${seq} signed another hash: the rows up to it were changed`);
      return;
    }
    if (options.keys) {
      const signer = checkpointSigner(line, options.keys);
      if (typeof signer === "string") {
        fail(seq, signer);
        return;
      }
      const key = signer;
      const late =
        key.retiredAt === undefined
          ? undefined
          : afterRetirement(line.at, latestRowAt, newestSignerAt, key.retiredAt);
      if (late !== undefined) {
        // A retired key's private half may outlive its retirement (a replica slow to roll, a
        // copy somewhere): whatever it signs after it vouches for nothing. Passed over, not a
        // break: the rows it covers are bound by the hash chain to the next valid checkpoint,
        // and a file whose last checkpoint is this one still fails requireClosingCheckpoint.
        const reason =
          `signed by key ${line.key_id} after its retirement ` +
          `(${new Date(key.retiredAt!).toISOString()}): ${late}`;
        lastIgnored = { seq, reason };
        if (ignored.length < MAX_IGNORED_LISTED) {
          ignored.push({ seq, key_id: String(line.key_id), at: String(line.at), reason });
        }
        return;
      }
      newestSignerAt = Math.max(newestSignerAt, key.createdAt ?? Number.NEGATIVE_INFINITY);
    }
    state.last_checkpoint = line;
  }

  return {
    /** One parsed line of the export. Anything but a row or a checkpoint is a bad line. */
    push(line: LedgerLine): void {
      if (line?.type === "event") row(line);
      else if (line?.type === "checkpoint") checkpoint(line);
      else fail(state.last_seq + 1, `a line after seq ${state.last_seq} is neither a row nor a checkpoint`);
    },
    /** Marks the ledger bad at `seq` for a reason found outside the lines (the head the database holds). */
    fail,
    /**
     * After the last line of an export: a checkpoint is signed at the end of every export whose
     * last row is newer than the last checkpoint (DECISIONS "Ledger and telemetry"), so a genuine
     * export ends with a checkpoint of its last row. Rows after the last one signed are bad from
     * the first of them (a file cut short, or rows added to its end, which anyone can hash), and
     * a file with no rows is no ledger.
     */
    requireClosingCheckpoint(): void {
      if (!state.ok) return;
      if (state.rows === 0 && !from) {
        fail(1, "the file holds no rows: it is not a ledger export");
        return;
      }
      const signedSeq = state.last_checkpoint?.seq ?? from?.seq ?? 0;
      if (signedSeq === state.last_seq) return;
      if (lastIgnored?.seq === state.last_seq) {
        fail(
          signedSeq + 1,
          `the file's closing checkpoint (seq ${state.last_seq}) vouches for nothing: it was ${lastIgnored.reason}; ` +
            `the last valid checkpoint covers seq ${signedSeq}`,
        );
        return;
      }
      const unsigned = state.last_seq - signedSeq;
      const rows = unsigned === 1 ? "1 row follows it" : `${unsigned} rows follow it`;
      fail(
        signedSeq + 1,
        `the file does not end with a checkpoint of its last row (seq ${state.last_seq}), as every export does: ` +
          (signedSeq === 0
            ? `no row is signed (${state.last_seq} rows, no checkpoint); it was cut short or rows were added to its end`
            : `the last signed seq is ${signedSeq} and ${rows} unsigned; it was cut short or rows were added to its end`),
      );
    },
    result(): LedgerVerification {
      return { ...state, ...(ignored.length > 0 ? { ignored_checkpoints: [...ignored] } : {}) };
    },
    /** The hash of the last row read (`from`'s, or 64 zeros, before any). */
    lastHash: () => lastHash,
    /** The organisation_id the first line names (undefined before any, or when it names none). */
    organisation: () => namedOrganisation,
  };
}
