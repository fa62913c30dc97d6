// Group commit for the local vault's audit rows: calls that finish while a row is being written
// have theirs written together, in one statement, right after it. Each caller still waits for its
// own row to be committed, so a row is durable before the answer it records leaves; a call alone
// is written at once, with no added wait. On the embedded database a statement costs far more
// than a row, and at 16 concurrent calls several rows share one.
import type { AuditEvent, AuditRepo } from "../audit/audit.repo.ts";

interface Waiting {
  event: AuditEvent;
  resolve(): void;
  reject(error: unknown): void;
}

/**
 * `repo` with insertAuditEvent batched as above; everything else unchanged.
 *
 * @example const audit = batchAuditInserts(createAuditRepo(db)); await audit.insertAuditEvent(event);
 */
export function batchAuditInserts(repo: AuditRepo): AuditRepo {
  let waiting: Waiting[] = [];
  let isWriting = false;

  async function writeAll(): Promise<void> {
    isWriting = true;
    while (waiting.length > 0) {
      const batch = waiting;
      waiting = [];
      try {
        if (batch.length === 1) await repo.insertAuditEvent(batch[0]!.event);
        else await repo.insertAuditEvents(batch.map((w) => w.event));
        for (const w of batch) w.resolve();
      } catch (error) {
        if (batch.length === 1) batch[0]!.reject(error);
        // One row the database refuses must not take the others with it: each alone again.
        else for (const w of batch) await repo.insertAuditEvent(w.event).then(w.resolve, w.reject);
      }
    }
    isWriting = false;
  }

  return {
    ...repo,
    insertAuditEvent(event) {
      return new Promise<void>((resolve, reject) => {
        waiting.push({ event, resolve, reject });
        if (!isWriting) void writeAll();
      });
    },
  };
}
