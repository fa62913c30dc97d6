// Starts the egress proxy as a child process when EGRESS_URL is unset (npm start, vault serve).
// A separate process, not an import: the key that opens secrets never enters the control
// plane's memory, even on one laptop.
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { EXIT_ADDRESS_IN_USE, EXIT_START_REFUSED, SPAWNED_BY_CONTROL_PLANE } from "@latch/shared/process";
import { humanLogLine } from "../http/human-log.ts";

const PROXY_MAIN = fileURLToPath(new URL("../../../egress-proxy/src/main.ts", import.meta.url));
const READY = /^LATCH_EGRESS_READY port=(\d+)$/;
const START_TIMEOUT_MS = 30_000;

export interface SpawnedProxy {
  address: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Spawns the proxy on loopback and resolves once it prints its ready line. Its log lines are
 * passed through to our stderr; its environment is ours (DATA_DIR, EGRESS_* knobs).
 */
export function spawnEgressProxy(options: {
  dataDir: string;
  port: number;
  env?: NodeJS.ProcessEnv;
}): Promise<SpawnedProxy> {
  const child = spawn(process.execPath, [PROXY_MAIN], {
    env: {
      ...process.env,
      ...options.env,
      DATA_DIR: options.dataDir,
      EGRESS_LISTEN: `127.0.0.1:${options.port}`,
      [SPAWNED_BY_CONTROL_PLANE]: "1",
    },
    // Its standard input is a pipe we never write to: when this process ends, however it ends
    // (kill -9, the OOM killer, a crash), the pipe closes and the proxy stops with it. No proxy
    // holding the key that opens secrets outlives the process that started it.
    stdio: ["pipe", "pipe", "inherit"],
  });
  // The pipe alone never keeps this process alive.
  (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error("the egress proxy did not start within 30 seconds"));
    }, START_TIMEOUT_MS);
    const lines = createInterface({ input: child.stdout! });
    lines.on("line", (line) => {
      const ready = READY.exec(line);
      if (!ready) {
        // Readable on a terminal like our own lines (human-log.ts), JSON for a collector.
        process.stderr.write(process.stderr.isTTY ? humanLogLine(`${line}\n`) : `${line}\n`);
        return;
      }
      clearTimeout(timer);
      resolve({
        address: `127.0.0.1:${ready[1]}`,
        child,
        stop: () =>
          new Promise<void>((done) => {
            if (child.exitCode !== null) return done();
            child.once("exit", () => done());
            child.kill("SIGTERM");
          }),
      });
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      if (code === EXIT_ADDRESS_IN_USE) {
        // The caller names the setting that moves the port (main.ts listenOn).
        reject(Object.assign(new Error(`port ${options.port} is taken`), { code: "EADDRINUSE" }));
        return;
      }
      if (code === EXIT_START_REFUSED) {
        // The proxy said why on our stderr, in one sentence; nothing to add to it (main.ts).
        reject(
          Object.assign(new Error("the egress proxy refused its settings (the line above says why)"), {
            code: "PROXY_START_REFUSED",
          }),
        );
        return;
      }
      reject(new Error(`the egress proxy exited during start-up (code ${code})`));
    });
  });
}
