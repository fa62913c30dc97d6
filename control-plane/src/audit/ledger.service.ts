// The ledger's work above the database: exporting an organisation's chain (with a checkpoint
// signed at its end when the last row is newer than the last checkpoint), verifying it, and the
// hourly checkpoints. Hosted and local alike.

import {
  checkpointSigningInput,
  type LedgerCheckpoint,
  type LedgerLine,
  ledgerTime,
} from "@latch/shared/ledger/ledger-format";
import type { Logger } from "pino";
import type { AuditSigner } from "./audit-keys.ts";
import type { LedgerHead, LedgerRepo } from "./ledger.repo.ts";
import {
  type AuditKeysDocument,
  createLedgerVerifier,
  type LedgerVerification,
  verifyingKeys,
} from "./ledger-verify.ts";

/** DECISIONS: checkpoints are signed hourly. */
export const CHECKPOINT_INTERVAL_MS = 60 * 60_000;

export interface LedgerServiceDeps {
  repo: LedgerRepo;
  signer: AuditSigner;
  /** The published keys, read afresh (another replica may have rotated). */
  publishedKeys(): AuditKeysDocument;
  now: () => Date;
}

export function createLedgerService(deps: LedgerServiceDeps) {
  async function signCheckpoint(organisationId: string, head: LedgerHead): Promise<LedgerCheckpoint> {
    const unsigned = {
      type: "checkpoint" as const,
      organisation_id: organisationId,
      seq: head.seq,
      hash: head.hash,
      at: ledgerTime(deps.now()),
      key_id: deps.signer.keyId,
    };
    const checkpoint = { ...unsigned, signature: deps.signer.sign(checkpointSigningInput(unsigned)) };
    await deps.repo.insertCheckpoint(checkpoint);
    return checkpoint;
  }

  return {
    signCheckpoint,

    /**
     * GET /api/audit/ledger: the rows after `sinceSeq` and their checkpoints, in order, then a
     * checkpoint of the last row when none covers it yet.
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
      const known = await deps.repo.findLastCheckpoint(organisationId);
      if (known && known.seq >= last.seq) return;
      yield await signCheckpoint(organisationId, last);
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
      } else if (head && head.seq === result.last_seq && head.hash !== lastHash) {
        verifier.fail(head.seq, `seq ${head.seq} was changed (it is not the row the chain's head recorded)`);
      } else if (!head && result.rows > 0) {
        verifier.fail(result.last_seq, "the chain's head is missing");
      }
      return verifier.result();
    },

    /** One round of the hourly checkpoints: every organisation whose head no checkpoint covers. */
    async checkpointAll(): Promise<number> {
      let signed = 0;
      // Bounded: organisations appending all the while cannot keep one round going for ever.
      for (let round = 0; round < 100; round++) {
        const heads = await deps.repo.findHeadsWithoutCheckpoint(100);
        for (const head of heads) await signCheckpoint(head.organisation_id, head);
        signed += heads.length;
        if (heads.length < 100) break;
      }
      return signed;
    },
  };
}

export type LedgerService = ReturnType<typeof createLedgerService>;

/** Signs checkpoints every `intervalMs` until stopped; a failed round is logged and retried next time. */
export function startCheckpointSchedule(
  ledger: Pick<LedgerService, "checkpointAll">,
  logger: Pick<Logger, "error" | "debug">,
  intervalMs = CHECKPOINT_INTERVAL_MS,
): () => void {
  const timer = setInterval(() => {
    ledger.checkpointAll().then(
      (signed) => logger.debug({ signed }, "audit checkpoints signed"),
      (error: unknown) =>
        logger.error(
          { code: (error as { code?: string }).code ?? "unknown" },
          "audit checkpoints not signed",
        ),
    );
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
