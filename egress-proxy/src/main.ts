// The egress proxy process: config -> keys -> gRPC server. On SIGTERM (a rolling update, a scale
// down) it drains: NOT_SERVING, new calls refused for another replica, calls in flight finished
// within EGRESS_DRAIN_TIMEOUT_MS, then exit. SIGINT stops at once (a developer's Ctrl-C).

import { AppError } from "@latch/shared/errors";
import {
  EXIT_ADDRESS_IN_USE,
  EXIT_START_REFUSED,
  logProcessFaults,
  SPAWNED_BY_CONTROL_PLANE,
} from "@latch/shared/process";
import { EgressConfigError, loadEgressConfig } from "./config.ts";
import { startEgressProxy } from "./egress-proxy.ts";
import { createProxyLogger } from "./logger.ts";

const { logger, flush, discard } = createProxyLogger({ level: process.env.LOG_LEVEL ?? "info" });
logProcessFaults(logger, flush);
try {
  const config = loadEgressConfig(process.env);
  const proxy = await startEgressProxy(config, logger);
  // The start's lines (a warning about a test knob or a role that reads too much) are out before
  // the ready line: whoever waits for that line may read the output then, not 250 ms later.
  flush();
  // The parent (npm start) waits for this line on stdout before it starts the control plane.
  process.stdout.write(`LATCH_EGRESS_READY port=${proxy.port}\n`);
  let isStopping = false;
  const stop = async (signal: string) => {
    if (isStopping) return;
    isStopping = true;
    if (signal === "SIGTERM") {
      logger.info(
        { signal, inFlight: proxy.inFlight },
        "draining: no new calls, finishing the calls in flight",
      );
      const isDrained = await proxy.drain(config.EGRESS_DRAIN_TIMEOUT_MS);
      if (!isDrained) {
        logger.warn({ inFlight: proxy.inFlight }, "drain deadline passed with calls still in flight");
      }
    }
    await proxy.close();
    logger.info({ signal }, "egress proxy stopped");
    // Our output is a pipe to the process that started us: once that process is gone, writing to it
    // would hold the exit for ever, and nobody would read the lines.
    if (signal === "parent gone") discard();
    process.exit(0);
  };
  process.once("SIGINT", () => void stop("SIGINT"));
  process.once("SIGTERM", () => void stop("SIGTERM"));
  if (process.env[SPAWNED_BY_CONTROL_PLANE] === "1") {
    // Our standard input is a pipe from the process that started us, which never writes to it:
    // its end means that process is gone, and nobody is left to send us calls or stop us.
    process.stdin.on("end", () => void stop("parent gone"));
    process.stdin.on("error", () => void stop("parent gone"));
    process.stdin.resume();
  }
} catch (error) {
  if ((error as { code?: string }).code === "EADDRINUSE") {
    // Spawned by the control plane (npm start, vault serve), the parent names the setting that
    // moves the port; on its own, the proxy says it in one sentence.
    if (process.env[SPAWNED_BY_CONTROL_PLANE] !== "1") {
      process.stderr.write(
        `Latch's egress proxy cannot start: ${(error as Error).message}; stop that program, or set EGRESS_LISTEN to a free address.\n`,
      );
    }
    process.exit(EXIT_ADDRESS_IN_USE);
  }
  // A setting or file the person starting the proxy fixes (a plain Error of ours: a bad address
  // range, an unreadable key file): one sentence, not a log entry. A TypeError and its kind are
  // bugs, and stay a fatal log line.
  if (
    error instanceof EgressConfigError ||
    error instanceof AppError ||
    (error instanceof Error && error.constructor === Error)
  ) {
    const sentence =
      error instanceof EgressConfigError
        ? error.message
        : `Latch's egress proxy cannot start: ${error.message.replace(/\.$/, "")}.`;
    process.stderr.write(`${sentence}\n`);
    process.exit(EXIT_START_REFUSED);
  }
  logger.fatal(
    { err: error instanceof Error ? error.message : String(error) },
    "egress proxy failed to start",
  );
  process.exit(1);
}
