// The ledger's work above the database: exporting an organisation's chain (with a checkpoint
// signed at its end when the last row is newer than the last checkpoint), verifying it, and the
// hourly checkpoints. Hosted and local alike.

import { AppError } from "@latch/shared/errors";
import {
  checkpointSigningInput,
  type LedgerCheckpoint,
  type LedgerLine,
  ledgerTime,
} from "@latch/shared/ledger/ledger-format";
import type { Logger } from "pino";
import { startRounds } from "../rounds.ts";
import { AuditKeysUnreadableError, type AuditSigner } from "./audit-keys.ts";
import type { LedgerHead, LedgerRepo } from "./ledger.repo.ts";
import {
  type AuditKeysDocument,
  checkpointSigner,
  createLedgerVerifier,
  type LedgerVerification,
  type VerifyingKey,
  verifyingKeys,
} from "./ledger-verify.ts";

/** DECISIONS: checkpoints are signed hourly. */
export const CHECKPOINT_INTERVAL_MS = 60 * 60_000;
/** The first round after start: once the process is up, not in its start-up's way. */
export const CHECKPOINT_FIRST_AFTER_MS = 60_000;
/** Heads the hourly round reads at a time. */
const HEADS_PER_READ = 100;
/** Stored checkpoints the signer looks back over for one that vouches for its rows. */
const ANCHOR_LOOKBACK = 100;

export interface LedgerServiceDeps {
  repo: LedgerRepo;
  signer: AuditSigner;
  /** The published keys, read afresh (another replica may have rotated). */
  publishedKeys(): AuditKeysDocument;
  now: () => Date;
}

export function createLedgerService(deps: LedgerServiceDeps) {
  const broken = (problem: string) =>
    new AppError(
      "ledger_broken",
      `the ledger does not grow from its last checkpoint, so it is not signed: ${problem}`,
    );

  /**
   * The stored checkpoint the growth check starts from: the newest one that a published key signed
   * and still vouches for. A row in audit_checkpoints is only an insert away for the database's
   * role, so its signature is checked before it is trusted: one no published key signed refuses
   * the signing, as a cut chain does. One a retired key signed after its retirement vouches for
   * nothing (as `ledger-verify.ts` passes over it) and the one before it is looked at instead.
   */
  async function trustedAnchor(
    organisationId: string,
    keys: ReadonlyMap<string, VerifyingKey>,
  ): Promise<LedgerCheckpoint | undefined> {
    const stored = await deps.repo.findLastCheckpoints(organisationId, ANCHOR_LOOKBACK);
    for (const checkpoint of stored) {
      const signer = checkpointSigner(checkpoint, keys);
      if (typeof signer === "string") throw broken(`${signer}, so it is not trusted`);
      if (signer.retiredAt === undefined || Date.parse(checkpoint.at) <= signer.retiredAt) return checkpoint;
    }
    if (stored.length === ANCHOR_LOOKBACK) {
      throw broken(`none of its last ${ANCHOR_LOOKBACK} checkpoints was signed by a key that vouches for it`);
    }
    return undefined;
  }

  /**
   * The newest row of each organisation's chain that this plane found the chain reaching, grown
   * from a trusted checkpoint: the chain must still pass through it. A checkpoint is only a delete
   * away for whoever can switch the triggers off; without this, deleting the newest checkpoints
   * (all of them: then the growth check starts at seq 1) and rewriting the rows after the ones left
   * would have the real key sign the rewritten history. Held in memory, not in the database that
   * such a person can write: a plane that ran meanwhile refuses, one started after cannot know.
   */
  const reached = new Map<string, LedgerHead>();

  /**
   * Refuses to sign `head` unless the rows grow from the last trusted checkpoint, through it (and
   * through the row this plane last found the chain reaching), up to the chain's head as the
   * database holds it: a chain cut or rewritten behind the triggers' back must not come out signed
   * with the real key. The stored head moves with every append, in the append's own statement, so
   * rows cut from the end of the chain leave it ahead of them, and a row put beyond it (an INSERT
   * no append made) is not the chain: an export ending with such a row, or ending short of the
   * head, is not signed. Reads the rows after that checkpoint (about an hour's), recomputing each
   * hash and checking each checkpoint's signature.
   */
  async function checkGrowth(organisationId: string, head: LedgerHead): Promise<void> {
    const keys = verifyingKeys(deps.publishedKeys());
    const last = await trustedAnchor(organisationId, keys);
    // Read before the rows: every row up to it is committed (a head moves in its row's statement).
    const chainHead = await deps.repo.findHead(organisationId);
    if (!chainHead || head.seq > chainHead.seq) {
      throw broken(`seq ${head.seq} is beyond the chain's head (seq ${chainHead?.seq ?? 0})`);
    }
    const known = reached.get(organisationId);
    /** Checked only when the trusted checkpoint is not already past it. */
    const mark = known && (!last || last.seq <= known.seq) ? known : undefined;
    if (mark && mark.seq > chainHead.seq) {
      throw broken(`the chain ends at seq ${chainHead.seq}, before seq ${mark.seq}, which it had reached`);
    }
    const verifier = createLedgerVerifier({ keys, from: last && { seq: last.seq, hash: last.hash } });
    /** The hashes the chain holds at head.seq and at the mark, as read. */
    let hashAtHead = last?.seq === head.seq ? last.hash : undefined;
    let hashAtMark = last?.seq === mark?.seq ? last?.hash : undefined;
    for await (const line of deps.repo.exportLines(organisationId, last?.seq ?? 0)) {
      if (line.seq > chainHead.seq) break;
      verifier.push(line);
      if (line.type !== "event") continue;
      if (line.seq === head.seq) hashAtHead = line.hash;
      if (line.seq === mark?.seq) hashAtMark = line.hash;
    }
    const result = verifier.result();
    const problem = !result.ok
      ? result.problem
      : result.last_seq !== chainHead.seq || verifier.lastHash() !== chainHead.hash
        ? `the rows do not reach the chain's head (seq ${chainHead.seq})`
        : mark && hashAtMark !== mark.hash
          ? `seq ${mark.seq} is not the row it was when this plane last checked the chain: rows up to it were rewritten`
          : hashAtHead !== head.hash
            ? `seq ${head.seq} is not the row the chain holds there`
            : undefined;
    if (problem) throw broken(problem);
    if (!known || chainHead.seq > known.seq) reached.set(organisationId, chainHead);
  }

  async function signCheckpoint(organisationId: string, head: LedgerHead): Promise<LedgerCheckpoint> {
    await checkGrowth(organisationId, head);
    const key = deps.signer.signingKey();
    const unsigned = {
      type: "checkpoint" as const,
      organisation_id: organisationId,
      seq: head.seq,
      hash: head.hash,
      at: ledgerTime(deps.now()),
      key_id: key.keyId,
    };
    const checkpoint = { ...unsigned, signature: key.sign(checkpointSigningInput(unsigned)) };
    await deps.repo.insertCheckpoint(checkpoint);
    return checkpoint;
  }

  /**
   * Ends an export whose last row is `last` with the stored checkpoint that covers it, when one
   * does: the checkpoint of `last` itself, or the rows after it up to a later stored checkpoint and
   * that checkpoint. False (nothing written) when no stored checkpoint covers `last`.
   */
  async function* closeWithStored(
    organisationId: string,
    last: LedgerHead,
  ): AsyncGenerator<LedgerLine, boolean> {
    const known = await deps.repo.findLastCheckpoint(organisationId);
    if (!known || known.seq < last.seq) return false;
    if (known.seq === last.seq) {
      yield known;
      return true;
    }
    for await (const line of deps.repo.exportLines(organisationId, last.seq)) {
      if (line.seq > known.seq) break;
      yield line;
      if (line.type === "checkpoint" && line.seq === known.seq) return true;
    }
    return true;
  }

  return {
    signCheckpoint,

    /**
     * GET /api/audit/ledger: the rows after `sinceSeq` and their checkpoints, in order, ending with
     * a checkpoint of the last row (`vault audit verify` refuses a file that does not): the stored
     * one, or one signed now.
     */
    async *exportLedger(organisationId: string, sinceSeq = 0): AsyncGenerator<LedgerLine> {
      let last: LedgerHead | undefined;
      let lastCheckpointSeq = 0;
      for await (const line of deps.repo.exportLines(organisationId, sinceSeq)) {
        if (line.type === "event") last = { seq: line.seq, hash: line.hash };
        else lastCheckpointSeq = line.seq;
        yield line;
      }
      if (!last || lastCheckpointSeq === last.seq) return;
      // An hourly round may have signed since the rows were read: at the last row (its checkpoint
      // is written here), or beyond it, after rows appended since (they are exported up to it).
      if (yield* closeWithStored(organisationId, last)) return;
      // A chain that does not hold is exported as it is, unsigned: the auditor's check finds where.
      // So is one this plane cannot sign, its key file unreadable (the hourly round logs it).
      const signed = await signCheckpoint(organisationId, last).catch((error: unknown) => {
        if ((error as { code?: string }).code === "ledger_broken") return undefined;
        if (error instanceof AuditKeysUnreadableError) return undefined;
        throw error;
      });
      if (signed) yield signed;
      // Refused: the chain is broken, or a round signed beyond the last row while this one checked.
      else yield* closeWithStored(organisationId, last);
    },

    /** GET /api/audit/verify: the whole chain recomputed, its checkpoints and its head checked. */
    async verify(organisationId: string): Promise<LedgerVerification> {
      const verifier = createLedgerVerifier({ keys: verifyingKeys(deps.publishedKeys()) });
      let lastHash: string | undefined;
      for await (const line of deps.repo.exportLines(organisationId)) {
        verifier.push(line);
        if (line.type === "event") lastHash = line.hash;
      }
      const result = verifier.result();
      // The head moves with every append, in the same statement: rows cut from the end of the
      // chain (behind the trigger's back) leave it ahead of them.
      const head = await deps.repo.findHead(organisationId);
      if (head && head.seq > result.last_seq) {
        verifier.fail(result.last_seq + 1, `seq ${result.last_seq + 1} to ${head.seq} are missing`);
      } else if (head && head.seq < result.last_seq) {
        // Rows nobody appended through the head: the next real append would collide with them.
        verifier.fail(head.seq + 1, `seq ${head.seq + 1} to ${result.last_seq} are beyond the chain's head`);
      } else if (head && head.seq === result.last_seq && head.hash !== lastHash) {
        verifier.fail(head.seq, `seq ${head.seq} was changed (it is not the row the chain's head recorded)`);
      } else if (!head && result.rows > 0) {
        verifier.fail(result.last_seq, "the chain's head is missing");
      }
      return verifier.result();
    },

    /**
     * One round of the hourly checkpoints: every organisation whose head no checkpoint covers. A
     * ledger that does not grow from its last checkpoint is left unsigned (`refused`), and the
     * others are signed.
     */
    async checkpointAll(): Promise<{ signed: number; refused: number }> {
      // The key file first, every round, whether or not anything waits: one that cannot be read
      // fails the round at once (AuditKeysUnreadableError), and is logged each hour until fixed.
      deps.signer.signingKey();
      let signed = 0;
      let refused = 0;
      // One pass in organisation id order: ledgers left unsigned (refused) never come back in this
      // round to crowd out the ones after them, and organisations appending all the while cannot
      // keep it going for ever.
      let after: string | undefined;
      for (;;) {
        const heads = await deps.repo.findHeadsWithoutCheckpoint(HEADS_PER_READ, after);
        for (const head of heads) {
          try {
            await signCheckpoint(head.organisation_id, head);
            signed++;
          } catch (error) {
            if ((error as { code?: string }).code !== "ledger_broken") throw error;
            refused++;
          }
        }
        if (heads.length < HEADS_PER_READ) break;
        after = heads.at(-1)!.organisation_id;
      }
      return { signed, refused };
    },
  };
}

export type LedgerService = ReturnType<typeof createLedgerService>;

/** Signs checkpoints every `intervalMs` until stopped; a failed round is logged and retried next time. */
export function startCheckpointSchedule(
  ledger: Pick<LedgerService, "checkpointAll">,
  logger: Pick<Logger, "error" | "debug">,
  intervalMs = CHECKPOINT_INTERVAL_MS,
  firstAfterMs = CHECKPOINT_FIRST_AFTER_MS,
): () => void {
  // A first round soon after start, then hourly: a process that lives less than an hour (a short
  // `vault mcp`, a rolling deploy, a crash loop) still signs what it finds.
  return startRounds({
    everyMs: intervalMs,
    firstAfterMs,
    logger,
    failure: "audit checkpoints not signed",
    round: async () => {
      let outcome: { signed: number; refused: number };
      try {
        outcome = await ledger.checkpointAll();
      } catch (error) {
        if (!(error instanceof AuditKeysUnreadableError)) throw error;
        // Skipped, never signed with a key from memory, which the file may have retired. The file
        // and the cause, nothing it holds.
        logger.error(
          { code: error.code, file: error.file, cause: error.reason },
          `audit checkpoints not signed: ${error.message}`,
        );
        return;
      }
      const { signed, refused } = outcome;
      logger.debug({ signed }, "audit checkpoints signed");
      if (refused > 0) {
        logger.error(
          { code: "ledger_broken", refused },
          "audit ledgers that do not grow from their last checkpoint were not signed; GET /api/audit/verify says where",
        );
      }
    },
  });
}
