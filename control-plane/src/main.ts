// The control plane process: config -> keys -> egress proxy (spawned on loopback unless
// EGRESS_URL is set) -> database -> services -> listen. The only place that wires. On SIGTERM
// it stops listening (requests that still arrive on open connections get 503), lets the requests
// in flight finish within SHUTDOWN_TIMEOUT_MS, then exits.
import { resolve } from "node:path";
import { ensurePrivateDir } from "@latch/shared/files";
import pino from "pino";
import { loadConfig } from "./config.ts";
import { buildControlPlane } from "./control-plane.ts";
import { connectEgress } from "./egress/connect-egress.ts";
import { loadOrCreateTicketKey } from "./egress/ticket-key.ts";
import { requestContextFields } from "./http/request-context.ts";
import { tryLocalLock } from "./local/local-lock.ts";
import { createControlPlaneMetrics, serveMetrics } from "./metrics/metrics.ts";

const logger = pino({
  name: "control-plane",
  level: process.env.LOG_LEVEL ?? "info",
  mixin: requestContextFields,
});

async function main(): Promise<void> {
  // Everything this process writes (keys, the embedded database, the outbox) is owner-only.
  process.umask(0o077);
  const config = loadConfig(process.env);
  const dataDir = resolve(config.DATA_DIR);
  ensurePrivateDir(dataDir);
  // PGlite is single-process: of two processes on one DATA_DIR, the second stops here.
  const lock = config.DATABASE_URL ? undefined : tryLocalLock(dataDir);
  if (lock && "heldBy" in lock) {
    throw new Error(`another process (pid ${lock.heldBy}) holds the embedded database in ${dataDir}`);
  }
  const ticketKey = loadOrCreateTicketKey(dataDir, config.TICKET_SIGNING_KEY_FILE);
  const metrics = createControlPlaneMetrics();
  const connected = await connectEgress(config, dataDir, logger);
  const egress = { ...connected, client: metrics.instrumentEgress(connected.client) };
  const plane = await buildControlPlane({ config, dataDir, ticketKey, egress, logger, metrics });
  const metricsServer = config.METRICS_LISTEN
    ? await serveMetrics(metrics, config.METRICS_LISTEN)
    : undefined;
  const address = await plane.app.listen({ host: config.HOST, port: config.PORT });
  logger.info({ address, database: plane.databaseKind, egress: egress.address }, "control plane listening");
  process.stdout.write(
    `Latch is running at ${address} (health: ${address}/health)\n` +
      `Sign up or sign in at ${config.BASE_URL}/sign-up${config.SMTP_URL ? "" : ` (email codes are written to files in ${dataDir}/outbox)`}\n`,
  );

  let isStopping = false;
  const stop = async (signal: string) => {
    if (isStopping) return;
    isStopping = true;
    logger.info({ signal }, "stopping: no new requests, finishing the requests in flight");
    let timer: NodeJS.Timeout | undefined;
    const isClosed = await Promise.race([
      plane.close().then(() => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), config.SHUTDOWN_TIMEOUT_MS);
      }),
    ]);
    clearTimeout(timer);
    if (!isClosed) logger.warn("shutdown deadline passed with requests still in flight");
    metricsServer?.close();
    await egress.close();
    lock?.release();
    logger.info({ signal }, "control plane stopped");
    process.exit(isClosed ? 0 : 1);
  };
  process.once("SIGINT", () => void stop("SIGINT"));
  process.once("SIGTERM", () => void stop("SIGTERM"));
}

main().catch((error: unknown) => {
  logger.fatal(
    { err: error instanceof Error ? error.message : String(error) },
    "control plane failed to start",
  );
  process.exit(1);
});
