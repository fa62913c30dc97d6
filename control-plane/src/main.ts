// The control plane process: config -> keys -> egress proxy (spawned on loopback unless
// EGRESS_URL is set, which production requires) -> database -> services -> listen. The only place
// that wires. On SIGTERM it stops listening (requests that still arrive on open connections get
// 503), lets the requests in flight finish within SHUTDOWN_TIMEOUT_MS, then exits.
import { resolve } from "node:path";
import { ensurePrivateDir } from "@latch/shared/files";
import { logProcessFaults } from "@latch/shared/process";
import pino from "pino";
import { ConfigError, loadConfig } from "./config.ts";
import { buildControlPlane } from "./control-plane.ts";
import { buildOnlineIndexes } from "./db/online-indexes.ts";
import { connectEgress, findReadableSealingKeyring } from "./egress/connect-egress.ts";
import { loadOrCreateTicketKey } from "./egress/ticket-key.ts";
import { logDestination } from "./http/human-log.ts";
import { serializeLoggedError } from "./http/logging.ts";
import { requestContextFields } from "./http/request-context.ts";
import { tryLocalLock } from "./local/local-lock.ts";
import { createControlPlaneMetrics, serveMetrics } from "./metrics/metrics.ts";

const logger = pino(
  {
    name: "control-plane",
    // A LOG_LEVEL pino does not know is refused by loadConfig in one sentence, not by pino here.
    level: Object.hasOwn(pino.levels.values, process.env.LOG_LEVEL ?? "") ? process.env.LOG_LEVEL : "info",
    mixin: requestContextFields,
    // As the request logger: a raw database error (which quotes parameters) is never written whole.
    serializers: { err: serializeLoggedError },
  },
  logDestination(1),
);

/** A reason not to start that the person starting it can fix: printed as its one sentence. */
class StartRefused extends Error {}

/** Listens, or says in one sentence which port is taken and which setting moves it. */
async function listenOn<T>(listen: () => Promise<T>, where: string, knob: string): Promise<T> {
  try {
    return await listen();
  } catch (error) {
    if ((error as { code?: string }).code !== "EADDRINUSE") throw error;
    throw new StartRefused(
      `Latch cannot start: ${where} is already in use by another program; stop that program, or set ${knob} to a free port.`,
    );
  }
}

async function main(): Promise<void> {
  logProcessFaults(logger);
  // Everything this process writes (keys, the embedded database, the outbox) is owner-only.
  process.umask(0o077);
  const config = loadConfig(process.env);
  logger.level = config.LOG_LEVEL;
  const dataDir = resolve(config.DATA_DIR);
  ensurePrivateDir(dataDir);
  const keyring = config.NODE_ENV === "production" ? findReadableSealingKeyring(dataDir) : undefined;
  if (keyring) throw new StartRefused(`Latch cannot start: ${keyring}.`);
  // PGlite is single-process: of two processes on one DATA_DIR, the second stops here.
  const lock = config.DATABASE_URL ? undefined : tryLocalLock(dataDir);
  if (lock && "heldBy" in lock) {
    throw new StartRefused(
      `Latch cannot start: another Latch process (pid ${lock.heldBy}) is already running on the data directory ${dataDir}; stop it, or set DATA_DIR to another directory.`,
    );
  }
  // What a failed start undoes, last step first: no proxy child left behind, no lock left held.
  const undo: (() => unknown)[] = [() => lock?.release()];
  const started = await (async () => {
    const ticketKey = loadOrCreateTicketKey(dataDir, config.TICKET_SIGNING_KEY_FILE);
    const metrics = createControlPlaneMetrics();
    const connected = await listenOn(
      () => connectEgress(config, dataDir, logger),
      `port ${config.EGRESS_PORT} (the egress proxy's, on 127.0.0.1)`,
      "EGRESS_PORT",
    );
    undo.push(() => connected.close());
    const egress = { ...connected, client: metrics.instrumentEgress(connected.client) };
    const plane = await buildControlPlane({ config, dataDir, ticketKey, egress, logger, metrics });
    undo.push(() => plane.close());
    const metricsListen = config.METRICS_LISTEN;
    const metricsServer = metricsListen
      ? await listenOn(() => serveMetrics(metrics, metricsListen), metricsListen, "METRICS_LISTEN")
      : undefined;
    if (metricsServer) undo.push(() => metricsServer.close());
    const address = await listenOn(
      () => plane.app.listen({ host: config.HOST, port: config.PORT }),
      `port ${config.PORT} on ${config.HOST}`,
      "PORT",
    );
    return { egress, plane, metricsServer, address };
  })().catch(async (error: unknown) => {
    for (const step of undo.reverse())
      await Promise.resolve()
        .then(step)
        .catch(() => undefined);
    throw error;
  });
  const { egress, plane, metricsServer, address } = started;
  logger.info({ address, database: plane.databaseKind, egress: egress.address }, "control plane listening");
  // The indexes no migration builds without stopping writes (db/online-indexes.ts), while serving.
  buildOnlineIndexes(plane.database.db, plane.databaseKind === "postgres").then(
    (built) => {
      if (built.length > 0) logger.info({ indexes: built }, "indexes built while serving");
    },
    (err: unknown) =>
      logger.warn({ err }, "indexes not built; the queries they serve stay slower until the next start"),
  );
  // BASE_URL is the address that works: the pages check Origin against it, and the bind address
  // may be 0.0.0.0 or a port a load balancer maps.
  process.stdout.write(
    `Latch is running at ${config.BASE_URL} (listening on ${address}; health: ${config.BASE_URL}/health)\n` +
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
  // The spawned proxy refused its settings and has said why in one sentence on stderr.
  if ((error as { code?: string }).code === "PROXY_START_REFUSED") process.exit(1);
  if (error instanceof ConfigError || error instanceof StartRefused) {
    // Something the person starting Latch fixes: one sentence, not a log entry.
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
  logger.fatal(
    { err: error instanceof Error ? error.message : String(error) },
    "control plane failed to start",
  );
  process.exit(1);
});
