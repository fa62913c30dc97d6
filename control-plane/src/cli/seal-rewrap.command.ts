// `vault seal-rewrap [--local]`: every stored secret sealed again, as an envelope, under the egress
// proxy's current sealing key (items/seal-rewrap.ts): the values stored before envelopes, and
// after a rotation of the proxy's key (a new key first in its key file) every value still under an
// older one. Hosted, against the same DATA_DIR / DATABASE_URL / EGRESS_URL as npm start; --local,
// the local vault (which must not be running: one process holds its database). Safe to interrupt
// and rerun. `vault kek-rotate` is another key (the control plane's, for authenticator secrets).
import type { Logger } from "pino";
import { loadConfig } from "../config.ts";
import { connectEgress } from "../egress/connect-egress.ts";
import { loadOrCreateTicketKey } from "../egress/ticket-key.ts";
import { createTicketMinter } from "../egress/tickets.ts";
import { type RewrapReport, rewrapSealedValues } from "../items/seal-rewrap.ts";
import { createSealedValuesRepo } from "../items/sealed-values.repo.ts";
import { tryLocalLock } from "../local/local-lock.ts";
import { openLocalVault } from "../local/local-vault.ts";
import { withServiceDatabase } from "./service-database.ts";

export async function runSealRewrap(
  env: NodeJS.ProcessEnv,
  localDataDir: string | undefined,
  logger: Logger,
  progress: (line: string) => void,
): Promise<number> {
  const report = localDataDir
    ? await rewrapLocal(localDataDir, logger, progress)
    : await rewrapHosted(env, logger, progress);
  progress(
    `done: ${report.rewrapped} value(s) sealed again under ${report.keyId}` +
      (report.changedMeanwhile > 0 ? `, ${report.changedMeanwhile} written meanwhile (kept)` : "") +
      (report.unopened > 0 ? `, ${report.unopened} the proxy could not open (left as they are)` : ""),
  );
  // Written under the old key during the run (a control plane or proxy that had not read the new
  // key yet): the old key must stay until a run ends with none.
  progress(
    report.left === 0
      ? "nothing is left under an older key: the old sealing keys may leave the file"
      : `${report.left} value(s) are still under an older key: keep the old keys, and run it again in a few minutes`,
  );
  return report.unopened > 0 || report.left > 0 ? 1 : 0;
}

async function rewrapLocal(
  dataDir: string,
  logger: Logger,
  progress: (line: string) => void,
): Promise<RewrapReport> {
  const lock = tryLocalLock(dataDir);
  if ("heldBy" in lock) {
    throw new Error(`the vault (pid ${lock.heldBy}) holds ${dataDir}; stop vault serve first`);
  }
  try {
    const vault = await openLocalVault({ dataDir, logger });
    try {
      return await vault.rewrapSealedValues(progress);
    } finally {
      await vault.close();
    }
  } finally {
    lock.release();
  }
}

async function rewrapHosted(
  env: NodeJS.ProcessEnv,
  logger: Logger,
  progress: (line: string) => void,
): Promise<RewrapReport> {
  const config = loadConfig(env);
  return withServiceDatabase(config, async (database, dataDir) => {
    // The proxy at EGRESS_URL (or one started alongside, as npm start does): only it opens values.
    const egress = await connectEgress(config, dataDir, logger);
    try {
      return await rewrapSealedValues({
        repo: createSealedValuesRepo(database.db),
        sealingKey: egress.sealingKey,
        minter: createTicketMinter({
          key: loadOrCreateTicketKey(dataDir, config.TICKET_SIGNING_KEY_FILE),
          issuer: config.BASE_URL,
          audience: config.EGRESS_AUDIENCE,
        }),
        egress: egress.client,
        progress,
      });
    } finally {
      await egress.close();
    }
  });
}
