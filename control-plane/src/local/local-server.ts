// `vault serve` and `vault mcp` keep the local vault open and listen on loopback; the address goes
// into DATA_DIR/local/runtime.json (owner-only) so the CLI's commands reach it instead of opening
// the database a second time, with this start's proof key, so they can tell it from whatever else
// may listen at that address (`server-proof.ts`).
import { existsSync, readFileSync, unlinkSync } from "node:fs";
import { writePrivateFileAtomic } from "@latch/shared/files";
import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { z } from "zod";
import { buildLocalApp } from "./local-app.ts";
import { readLockHolder } from "./local-lock.ts";
import { createLocalMcpSessions } from "./local-mcp-sessions.ts";
import type { LocalTokens } from "./local-tokens.ts";
import { type LocalVault, localRuntimePath } from "./local-vault.ts";
import { isProofToken, newServerProofKey } from "./server-proof.ts";

export const LOCAL_PORT = 8788;

export interface RunningLocalServer {
  url: string;
  app: FastifyInstance;
  close(): Promise<void>;
}

const runtimeFile = z.object({
  pid: z.number().int(),
  url: z.string().startsWith("http://127.0.0.1:"),
  proof_key: z.string().refine(isProofToken),
});

export interface LocalRuntime {
  pid: number;
  url: string;
  /** The key only the server that wrote the file holds (`server-proof.ts`). */
  proofKey: string;
}

export async function startLocalServer(options: {
  vault: LocalVault;
  tokens: LocalTokens;
  logger: Logger;
  dataDir: string;
  port: number;
  /** When the port is taken, listen on any free one instead (vault mcp). */
  isPortFlexible?: boolean;
}): Promise<RunningLocalServer> {
  const proofKey = newServerProofKey();
  const app = buildLocalApp({
    vault: options.vault,
    tokens: options.tokens,
    sessions: createLocalMcpSessions(),
    logger: options.logger,
    proofKey,
  });
  let url: string;
  try {
    url = await app.listen({ host: "127.0.0.1", port: options.port });
  } catch (error) {
    if ((error as { code?: string }).code !== "EADDRINUSE" || !options.isPortFlexible) throw error;
    url = await app.listen({ host: "127.0.0.1", port: 0 });
  }
  const runtimePath = localRuntimePath(options.dataDir);
  writePrivateFileAtomic(runtimePath, `${JSON.stringify({ pid: process.pid, url, proof_key: proofKey })}\n`);
  return {
    url,
    app,
    async close() {
      try {
        unlinkSync(runtimePath);
      } catch {
        // Already gone.
      }
      await app.close();
    },
  };
}

/**
 * The address of a live local server, if one says it is running. The CLI sends the operator token
 * and plaintext values to that address, so a file left behind by a server that died is not
 * trusted: another local user could be listening on the freed port. The process named in it must
 * be alive, ours to signal (EPERM means another user's process) and the holder of the vault lock.
 * A reused pid passes these checks, so the CLI also has the server prove it holds `proofKey`
 * (`askServerProof`) before it sends anything.
 */
export function readLocalRuntime(dataDir: string): LocalRuntime | undefined {
  const path = localRuntimePath(dataDir);
  if (!existsSync(path)) return undefined;
  try {
    const runtime = runtimeFile.parse(JSON.parse(readFileSync(path, "utf8")));
    if (readLockHolder(dataDir) !== runtime.pid) return undefined;
    process.kill(runtime.pid, 0);
    return { pid: runtime.pid, url: runtime.url, proofKey: runtime.proof_key };
  } catch {
    // Unreadable, no lock, or the process is gone (ESRCH) or not ours (EPERM).
    return undefined;
  }
}
