// `vault serve`: the local vault on 127.0.0.1:8788 until interrupted. Prints the two bearers as
// lines of their own (DECISIONS.md), then the address. The operator bearer is new at each start.
import type { Logger } from "pino";
import { startCheckpointSchedule } from "../audit/ledger.service.ts";
import { startAbandonedCallsSchedule } from "../calls/abandoned-calls.ts";
import { tryLocalLock } from "../local/local-lock.ts";
import { startLocalServer } from "../local/local-server.ts";
import { rotateLocalOperatorToken } from "../local/local-tokens.ts";
import { openLocalVault } from "../local/local-vault.ts";

export async function runServe(dataDir: string, port: number, logger: Logger): Promise<void> {
  const lock = tryLocalLock(dataDir);
  if ("heldBy" in lock) {
    throw new Error(
      `another vault (pid ${lock.heldBy}) is already running on ${dataDir}; use that one, stop it, or set DATA_DIR to another directory.`,
    );
  }
  process.stderr.write(`Opening the local vault in ${dataDir} ...\n`);
  // A fresh operator token each start: an earlier run's console tab or URL no longer counts.
  const tokens = rotateLocalOperatorToken(dataDir);
  const vault = await openLocalVault({ dataDir, logger }).catch((error: unknown) => {
    lock.release();
    throw error;
  });
  // Start the proxy now, so a problem shows before the tokens are printed.
  await vault.egressReady().catch(async (error: unknown) => {
    await vault.close();
    lock.release();
    throw error;
  });
  const server = await startLocalServer({ vault, tokens, logger, dataDir, port }).catch(
    async (error: unknown) => {
      await vault.close();
      lock.release();
      if ((error as { code?: string }).code === "EADDRINUSE") {
        throw new Error(
          `port ${port} on 127.0.0.1 is already in use by another program; stop that program, or pick another port with vault serve --port N.`,
        );
      }
      throw error;
    },
  );
  process.stdout.write(
    [
      `LATCH_OPERATOR_TOKEN=${tokens.operator}`,
      `LATCH_MODEL_TOKEN=${tokens.model}`,
      `Latch local vault listening on ${server.url}`,
      `  MCP endpoint: ${server.url}/mcp (Authorization: Bearer $LATCH_MODEL_TOKEN)`,
      `  console:      ${server.url}/#token=${tokens.operator}`,
      "",
    ].join("\n"),
  );
  // The audit ledger's hourly checkpoints, as the hosted plane signs them.
  const stopCheckpoints = startCheckpointSchedule(vault.ledger, logger);
  // A vault killed mid-call left its one-call approval's outcome unwritten: the ledger gets it.
  const stopAbandonedCalls = startAbandonedCallsSchedule(vault.abandonedCalls, logger);
  let isStopping = false;
  const stop = async () => {
    if (isStopping) return;
    isStopping = true;
    stopCheckpoints();
    stopAbandonedCalls();
    await server.close();
    await vault.close();
    lock.release();
    process.exit(0);
  };
  process.once("SIGINT", () => void stop());
  process.once("SIGTERM", () => void stop());
}
