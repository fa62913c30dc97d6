// `vault mcp`: MCP over stdio, one JSON-RPC frame per line. stdout carries frames only; progress
// and logs go to stderr. When a `vault serve` already holds the vault, frames are relayed to its
// /mcp with the model token; otherwise this process opens the vault itself and also listens on
// loopback, so `vault approve` in another terminal reaches it.
import { createInterface } from "node:readline";
import type { Logger } from "pino";
import { tryLocalLock } from "../local/local-lock.ts";
import { LOCAL_PORT, readLocalRuntime, startLocalServer } from "../local/local-server.ts";
import { loadOrCreateLocalTokens } from "../local/local-tokens.ts";
import { openLocalVault } from "../local/local-vault.ts";
import { LOCAL_INSTRUCTIONS } from "../mcp/instructions.ts";
import { RPC_PARSE_ERROR, rpcError } from "../mcp/jsonrpc.ts";
import { createMcpServer } from "../mcp/mcp-server.ts";
import { agentIdFromClientName } from "../mcp/mcp-sessions.ts";

type FrameHandler = (frame: unknown) => Promise<unknown | undefined>;

export async function runMcpStdio(dataDir: string, logger: Logger): Promise<void> {
  const tokens = loadOrCreateLocalTokens(dataDir);
  const runtime = readLocalRuntime(dataDir);
  let handle: FrameHandler;
  let close: () => Promise<void>;
  if (runtime && (await isUp(runtime.url))) {
    logger.info({ url: runtime.url }, "relaying MCP to the running vault serve");
    handle = relayTo(runtime.url, tokens.model);
    close = async () => {};
  } else {
    const lock = tryLocalLock(dataDir);
    if ("heldBy" in lock) throw new Error(`another vault process (pid ${lock.heldBy}) holds ${dataDir}`);
    const vault = await openLocalVault({ dataDir, logger }).catch((error: unknown) => {
      lock.release();
      throw error;
    });
    const server = await startLocalServer({
      vault,
      tokens,
      logger,
      dataDir,
      port: LOCAL_PORT,
      isPortFlexible: true,
    });
    logger.info({ url: server.url }, "local vault open; the operator API and console listen here too");
    let agentId = agentIdFromClientName(undefined);
    const mcp = createMcpServer({
      instructions: LOCAL_INSTRUCTIONS,
      tools: vault.tools,
      onInitialize: (name) => {
        agentId = agentIdFromClientName(name);
      },
      logError: (error) => logger.error({ err: error }, "tool failed"),
    });
    handle = (frame) => mcp.handle(frame, { agentId });
    close = async () => {
      await server.close();
      await vault.close();
      lock.release();
    };
  }

  const lines = createInterface({ input: process.stdin, crlfDelay: Number.POSITIVE_INFINITY });
  // Frames are answered in order: an agent may pipeline, and its ids must come back in sequence.
  let queue = Promise.resolve();
  lines.on("line", (line) => {
    if (line.trim() === "") return;
    queue = queue.then(async () => {
      let frame: unknown;
      try {
        frame = JSON.parse(line);
      } catch {
        write(rpcError(null, RPC_PARSE_ERROR, "a frame must be one line of JSON"));
        return;
      }
      try {
        const response = await handle(frame);
        if (response !== undefined) write(response);
      } catch (error) {
        logger.error({ err: error instanceof Error ? error.message : String(error) }, "frame failed");
      }
    });
  });
  await new Promise<void>((resolve) => lines.once("close", () => resolve()));
  await queue;
  await close();
}

function write(frame: unknown): void {
  process.stdout.write(`${JSON.stringify(frame)}\n`);
}

async function isUp(url: string): Promise<boolean> {
  try {
    return (await fetch(`${url}/health`, { signal: AbortSignal.timeout(2000) })).ok;
  } catch {
    return false;
  }
}

function relayTo(baseUrl: string, modelToken: string): FrameHandler {
  let sessionId: string | undefined;
  return async (frame) => {
    const response = await fetch(`${baseUrl}/mcp`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${modelToken}`,
        "content-type": "application/json",
        accept: "application/json",
        ...(sessionId ? { "mcp-session-id": sessionId } : {}),
      },
      body: JSON.stringify(frame),
      signal: AbortSignal.timeout(120_000),
    });
    const issued = response.headers.get("mcp-session-id");
    if (issued) sessionId = issued;
    if (response.status === 202) return undefined;
    const text = await response.text();
    return text ? JSON.parse(text) : undefined;
  };
}
