// The HTTP application of `vault serve` without listen(): health, console, operator API, MCP.
import Fastify, { type FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { BODY_LIMIT_BYTES, PRODUCT_NAME, registerJsonOnly } from "../app.ts";
import { liveness } from "../health/health.schemas.ts";
import { answerFrameworkError, registerErrorHandling } from "../http/errors.ts";
import { requestLogging } from "../http/logging.ts";
import { LOCAL_INSTRUCTIONS } from "../mcp/instructions.ts";
import { createMcpServer } from "../mcp/mcp-server.ts";
import type { McpSessionStore } from "../mcp/mcp-sessions.ts";
import { LOCAL_TOOL_ALIASES } from "../tools/tool-schemas.ts";
import { registerLocalApiRoutes } from "./local-api.routes.ts";
import { registerLocalConsole } from "./local-console.ts";
import { registerLocalGuards } from "./local-guards.ts";
import { registerLocalMcpRoutes } from "./local-mcp.routes.ts";
import { createTokenChecker, type LocalTokens } from "./local-tokens.ts";
import type { LocalVault } from "./local-vault.ts";
import { answerChallenge, CHALLENGE_HEADER, isProofToken, PROOF_HEADER } from "./server-proof.ts";

/** The local console polls these three every 5 s (public/local/assets/console.js); /health is a probe. */
const LOCAL_QUIET_GET_PATHS: ReadonlySet<string> = new Set([
  "/health",
  "/api/grants",
  "/api/items",
  "/api/audit",
]);

export interface LocalAppDeps {
  vault: LocalVault;
  tokens: LocalTokens;
  sessions: McpSessionStore;
  logger: Logger;
  /**
   * This start's key from runtime.json: /health answers a CLI's challenge with its MAC, so the CLI
   * knows this is the vault that wrote the file before it sends a bearer (`server-proof.ts`).
   */
  proofKey?: string;
}

export function buildLocalApp(deps: LocalAppDeps): FastifyInstance {
  const app = Fastify({
    ...requestLogging(deps.logger, LOCAL_QUIET_GET_PATHS),
    bodyLimit: BODY_LIMIT_BYTES,
    trustProxy: false,
    frameworkErrors: answerFrameworkError,
  }) as unknown as FastifyInstance;
  registerJsonOnly(app);
  registerErrorHandling(app);
  registerLocalGuards(app, createTokenChecker(deps.tokens));
  app.addHook("onSend", async (_request, reply) => {
    reply.header("x-content-type-options", "nosniff");
    reply.header("referrer-policy", "no-referrer");
    reply.header("cache-control", "no-store");
    reply.header("x-frame-options", "DENY");
  });
  app.get("/health", { schema: { response: { 200: liveness } } }, async (request, reply) => {
    const challenge = request.headers[CHALLENGE_HEADER];
    if (deps.proofKey && typeof challenge === "string" && isProofToken(challenge)) {
      reply.header(PROOF_HEADER, answerChallenge(deps.proofKey, challenge));
    }
    return { ok: true, product: PRODUCT_NAME };
  });
  registerLocalConsole(app);
  registerLocalApiRoutes(app, deps.vault);
  const mcp = createMcpServer({
    instructions: LOCAL_INSTRUCTIONS,
    aliases: LOCAL_TOOL_ALIASES,
    tools: deps.vault.tools,
    logError: (error) => deps.logger.error({ err: error }, "tool failed"),
  });
  registerLocalMcpRoutes(app, mcp, deps.sessions);
  return app;
}
