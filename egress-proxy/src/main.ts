// The egress proxy process: config -> keys -> gRPC server. Stops cleanly on SIGINT/SIGTERM.
import pino from "pino";
import { loadEgressConfig } from "./config.ts";
import { startEgressProxy } from "./egress-proxy.ts";

const logger = pino({ name: "egress-proxy", level: process.env.LOG_LEVEL ?? "info" });
try {
  const config = loadEgressConfig(process.env);
  const proxy = await startEgressProxy(config, logger);
  // The parent (npm start) waits for this line on stdout before it starts the control plane.
  process.stdout.write(`LATCH_EGRESS_READY port=${proxy.port}\n`);
  const stop = async () => {
    await proxy.close();
    process.exit(0);
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
} catch (error) {
  logger.fatal(
    { err: error instanceof Error ? error.message : String(error) },
    "egress proxy failed to start",
  );
  process.exit(1);
}
