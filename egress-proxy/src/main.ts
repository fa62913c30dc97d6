// The egress proxy process: config -> keys -> gRPC server. On SIGTERM (a rolling update, a scale
// down) it drains: NOT_SERVING, new calls refused for another replica, calls in flight finished
// within EGRESS_DRAIN_TIMEOUT_MS, then exit. SIGINT stops at once (a developer's Ctrl-C).
import pino from "pino";
import { loadEgressConfig } from "./config.ts";
import { startEgressProxy } from "./egress-proxy.ts";
import { callContextFields } from "./grpc/call-context.ts";

const logger = pino({
  name: "egress-proxy",
  level: process.env.LOG_LEVEL ?? "info",
  mixin: callContextFields,
});
try {
  const config = loadEgressConfig(process.env);
  const proxy = await startEgressProxy(config, logger);
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
    process.exit(0);
  };
  process.once("SIGINT", () => void stop("SIGINT"));
  process.once("SIGTERM", () => void stop("SIGTERM"));
} catch (error) {
  logger.fatal(
    { err: error instanceof Error ? error.message : String(error) },
    "egress proxy failed to start",
  );
  process.exit(1);
}
