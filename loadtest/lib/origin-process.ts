// Starts the benchmark origin (echo-origin.ts) as a child process and talks to it over IPC.
import { type ChildProcess, fork } from "node:child_process";
import { once } from "node:events";
import type { OriginCommand, OriginMessage } from "./echo-origin.ts";

export const TEST_CA_PATH = new URL("../../egress-proxy/test/pki/trusted-ca.pem", import.meta.url).pathname;
/** The origin's certificate is for *.latch.test; this name is mapped to 127.0.0.1 everywhere. */
export const ORIGIN_HOST = "api.latch.test";

export interface OriginStats {
  requests: number;
  connections: number;
  cpuMs: number;
}

export interface OriginProcess {
  port: number;
  pid: number;
  /** Requests answered, TLS connections accepted and CPU time used (user + system) so far. */
  stats(): Promise<OriginStats>;
  close(): Promise<void>;
}

function nextMessage<T extends OriginMessage["type"]>(
  child: ChildProcess,
  type: T,
): Promise<Extract<OriginMessage, { type: T }>> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: OriginMessage) => {
      if (message.type !== type) return;
      cleanup();
      resolve(message as Extract<OriginMessage, { type: T }>);
    };
    const onExit = (code: number | null) => {
      cleanup();
      reject(new Error(`the benchmark origin exited (code ${code}) before sending "${type}"`));
    };
    const cleanup = () => {
      child.off("message", onMessage);
      child.off("exit", onExit);
    };
    child.on("message", onMessage);
    child.on("exit", onExit);
  });
}

export async function startOriginProcess(): Promise<OriginProcess> {
  const child = fork(new URL("./echo-origin.ts", import.meta.url).pathname, [], {
    execPath: process.execPath,
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const ready = await nextMessage(child, "ready");
  const command = (c: OriginCommand) => child.send(c);
  return {
    port: ready.port,
    pid: child.pid ?? -1,
    async stats() {
      const reply = nextMessage(child, "stats");
      command("stats");
      const { requests, connections, cpuMs } = await reply;
      return { requests, connections, cpuMs };
    },
    async close() {
      if (child.exitCode !== null || !child.connected) return;
      const exited = once(child, "exit");
      const closed = nextMessage(child, "closed").catch(() => undefined);
      command("close");
      await closed;
      await exited;
    },
  };
}
