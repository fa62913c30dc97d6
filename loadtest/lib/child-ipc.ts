// The benches' forked children (the origin, the proxy, the floor) answer their parent over IPC:
// one typed message per command. This waits for the next message of one type from a child.
import type { ChildProcess } from "node:child_process";

/**
 * The next message of `type` from `child`; rejects if the child exits first.
 *
 * @example
 * const ready = await nextMessage<OriginMessage, "ready">(child, "ready", "the benchmark origin");
 */
export function nextMessage<M extends { type: string }, T extends M["type"]>(
  child: ChildProcess,
  type: T,
  who: string,
): Promise<Extract<M, { type: T }>> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: M) => {
      if (message.type !== type) return;
      cleanup();
      resolve(message as Extract<M, { type: T }>);
    };
    const onExit = (code: number | null) => {
      cleanup();
      reject(new Error(`${who} exited (code ${code}) before sending "${type}"`));
    };
    const cleanup = () => {
      child.off("message", onMessage);
      child.off("exit", onExit);
    };
    child.on("message", onMessage);
    child.on("exit", onExit);
  });
}
