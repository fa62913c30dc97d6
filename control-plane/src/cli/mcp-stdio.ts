// `vault mcp`: MCP over stdio, one JSON-RPC frame per line. stdout carries frames only; progress
// and logs go to stderr. When a `vault serve` already holds the vault, frames are relayed to its
// /mcp with the model token; otherwise this process opens the vault itself and also listens on
// loopback, so `vault approve` in another terminal reaches it.
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";
import type { Logger } from "pino";
import { startCheckpointSchedule } from "../audit/ledger.service.ts";
import { startAbandonedCallsSchedule } from "../calls/abandoned-calls.ts";
import { LOCAL_PORT, readLocalRuntime, startLocalServer } from "../local/local-server.ts";
import { loadOrCreateLocalTokens, localTokensPath, rotateLocalOperatorToken } from "../local/local-tokens.ts";
import { openLocalVault } from "../local/local-vault.ts";
import { askServerProof } from "../local/server-proof.ts";
import { LOCAL_INSTRUCTIONS } from "../mcp/instructions.ts";
import { RPC_PARSE_ERROR, RPC_TOOL_ERROR, refuseDeepFrame, rpcError } from "../mcp/jsonrpc.ts";
import { createMcpServer } from "../mcp/mcp-server.ts";
import { agentIdFromClientName } from "../mcp/mcp-sessions.ts";
import { LOCAL_TOOL_ALIASES } from "../tools/tool-schemas.ts";
import { reachLocalVault } from "./local-operator.ts";

type FrameHandler = (frame: unknown) => Promise<unknown | undefined>;

export async function runMcpStdio(dataDir: string, logger: Logger): Promise<void> {
  // A `vault set` or `vault list` at work, or a `vault serve` still starting, is waited for: an
  // agent's MCP server does not fail to start because the operator ran a command at that moment.
  const holder = await reachLocalVault(dataDir);
  let handle: FrameHandler;
  let close: () => Promise<void>;
  if ("url" in holder) {
    const { url } = holder;
    // Read once the holder is known (it may have been starting): the model token outlives restarts,
    // unless tokens.json was deleted and that vault serve restarted with a new one, read on a 401.
    const { model } = loadOrCreateLocalTokens(dataDir);
    // Read only: a relay never mints the token a vault serve is to accept.
    const readModelToken = () =>
      existsSync(localTokensPath(dataDir)) ? loadOrCreateLocalTokens(dataDir).model : undefined;
    logger.info({ url }, "relaying MCP to the running vault serve");
    // Checked again before each frame: once that vault serve stops, its port is anyone's, and
    // the model token must not go to whoever listens there next. The relay may live for days,
    // across restarts of that server (each writes a new key), so each frame asks the server at
    // that address for the proof of the key runtime.json holds now: one loopback round trip.
    handle = relayTo(
      url,
      model,
      async () => {
        const runtime = readLocalRuntime(dataDir);
        return runtime?.url === url && (await askServerProof(url, runtime.proofKey)) === "proven";
      },
      readModelToken,
    );
    close = async () => {};
  } else {
    const { lock } = holder;
    // A fresh operator token, as at each `vault serve` start, written while this process holds
    // db.lock: the API served below must not accept the token an earlier run printed (a console URL
    // in scrollback or history), and the CLI's commands read tokens.json anew, so they carry this one.
    const tokens = rotateLocalOperatorToken(dataDir);
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
      aliases: LOCAL_TOOL_ALIASES,
      tools: vault.tools,
      onInitialize: (name) => {
        agentId = agentIdFromClientName(name);
      },
      logError: (error) => logger.error({ err: error }, "tool failed"),
    });
    handle = (frame) => mcp.handle(frame, { agentId });
    // The audit ledger's hourly checkpoints, as `vault serve` and the hosted plane sign them: an
    // agent's `vault mcp` may hold the vault for days.
    const stopCheckpoints = startCheckpointSchedule(vault.ledger, logger);
    // A vault killed mid-call (an MCP client quitting) left its one-call approval's outcome unwritten.
    const stopAbandonedCalls = startAbandonedCallsSchedule(vault.abandonedCalls, logger);
    close = async () => {
      stopCheckpoints();
      stopAbandonedCalls();
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
      try {
        const response = await answerLine(line, handle);
        if (response !== undefined) write(response);
      } catch (error) {
        logger.error({ err: error instanceof Error ? error.message : String(error) }, "frame failed");
      }
    });
  });
  // An MCP client stopping its server (SIGTERM), or Ctrl-C: no new frames, the frames in flight
  // answered, then the vault, its proxy and the lock closed as at the end of input.
  const stopReading = () => lines.close();
  process.once("SIGINT", stopReading);
  process.once("SIGTERM", stopReading);
  await new Promise<void>((resolve) => lines.once("close", () => resolve()));
  await queue;
  await close();
  process.off("SIGINT", stopReading);
  process.off("SIGTERM", stopReading);
}

/**
 * One stdin line to its answer: a parse error, a frame nested too deeply (refused here, before the
 * relay serialises it again and JSON.stringify overflows), or what the handler answers.
 */
export async function answerLine(line: string, handle: FrameHandler): Promise<unknown | undefined> {
  let frame: unknown;
  try {
    frame = JSON.parse(line);
  } catch {
    return rpcError(null, RPC_PARSE_ERROR, "a frame must be one line of JSON");
  }
  return refuseDeepFrame(frame) ?? handle(frame);
}

function write(frame: unknown): void {
  process.stdout.write(`${JSON.stringify(frame)}\n`);
}

/**
 * Relays frames to a running `vault serve`. Its session is forgotten after 8 idle hours (spec 4.4,
 * 404): the relay then replays the client's initialize (same client name, so the same agent id)
 * and sends the frame again once. Any other HTTP refusal, a failed connection, or a `vault serve`
 * no longer running there (`isStillServing`, asked before each frame) becomes a JSON-RPC error for
 * the frame's id, so the MCP client gets an answer rather than silence or a foreign body on stdout.
 * `isStillServing` has the server prove it is the one the relay started with before the model
 * token is sent again. A 401 means that server holds another model token (tokens.json deleted and
 * vault serve restarted): `readModelToken` reads tokens.json again, once per frame, and a changed
 * token is sent with the same frame, to that same proven server; still refused, the answer tells
 * the user to restart the agent's `vault mcp` rather than repeating an HTTP status.
 */
export function relayTo(
  baseUrl: string,
  initialModelToken: string,
  isStillServing: () => boolean | Promise<boolean>,
  readModelToken: () => string | undefined,
): FrameHandler {
  let modelToken = initialModelToken;
  let sessionId: string | undefined;
  let initializeFrame: unknown;
  const post = (frame: unknown) =>
    fetch(`${baseUrl}/mcp`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${modelToken}`,
        "content-type": "application/json",
        accept: "application/json",
        ...(sessionId ? { "mcp-session-id": sessionId } : {}),
      },
      body: JSON.stringify(frame),
      signal: AbortSignal.timeout(120_000),
    }).then((response) => {
      const issued = response.headers.get("mcp-session-id");
      if (issued) sessionId = issued;
      return response;
    });
  return async (frame) => {
    const request = typeof frame === "object" && frame !== null ? (frame as Record<string, unknown>) : {};
    const id = typeof request.id === "string" || typeof request.id === "number" ? request.id : null;
    const refuse = (message: string) =>
      request.id === undefined ? undefined : rpcError(id, RPC_TOOL_ERROR, message);
    if (!(await isStillServing())) {
      return refuse("the vault serve this relay was started for has stopped; restart vault mcp");
    }
    if (request.method === "initialize") initializeFrame = frame;
    try {
      return await relayFrame(frame, refuse);
    } catch {
      return refuse("the running vault serve did not answer the frame");
    }
  };

  async function relayFrame(frame: unknown, refuse: (message: string) => unknown): Promise<unknown> {
    let response = await post(frame);
    if (response.status === 401) {
      const current = readCurrentModelToken();
      if (current !== undefined && current !== modelToken) {
        await response.body?.cancel();
        modelToken = current;
        response = await post(frame);
      }
    }
    if (response.status === 404 && sessionId && initializeFrame !== undefined && frame !== initializeFrame) {
      sessionId = undefined;
      const renewed = await post(initializeFrame);
      await renewed.body?.cancel();
      if (renewed.ok) response = await post(frame);
    }
    if (response.status === 202) return undefined;
    const text = await response.text();
    if (response.ok) return text ? JSON.parse(text) : undefined;
    if (response.status === 401) {
      return refuse(
        "the running vault serve refused the model token, also the one tokens.json holds now (was it deleted and vault serve restarted?); restart the agent's vault mcp so that it starts with the current token",
      );
    }
    return refuse(`the running vault serve refused the frame (HTTP ${response.status})`);
  }

  /** tokens.json's model token now; undefined when it cannot be read (gone, half written). */
  function readCurrentModelToken(): string | undefined {
    try {
      return readModelToken();
    } catch {
      return undefined;
    }
  }
}
