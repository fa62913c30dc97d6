// Starts the benchmark origin (echo-origin.ts) as a child process and talks to it over IPC.
import { type ChildProcess, fork } from "node:child_process";
import { once } from "node:events";
import { nextMessage } from "./child-ipc.ts";
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

const nextOriginMessage = <T extends OriginMessage["type"]>(child: ChildProcess, type: T) =>
  nextMessage<OriginMessage, T>(child, type, "the benchmark origin");

export async function startOriginProcess(): Promise<OriginProcess> {
  const child = fork(new URL("./echo-origin.ts", import.meta.url).pathname, [], {
    execPath: process.execPath,
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const ready = await nextOriginMessage(child, "ready");
  const command = (c: OriginCommand) => child.send(c);
  return {
    port: ready.port,
    pid: child.pid ?? -1,
    async stats() {
      const reply = nextOriginMessage(child, "stats");
      command("stats");
      const { requests, connections, cpuMs } = await reply;
      return { requests, connections, cpuMs };
    },
    async close() {
      if (child.exitCode !== null || !child.connected) return;
      const exited = once(child, "exit");
      const closed = nextOriginMessage(child, "closed").catch(() => undefined);
      command("close");
      await closed;
      await exited;
    },
  };
}
