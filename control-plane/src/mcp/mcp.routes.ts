// The hosted MCP endpoint (spec 4.1, 5): POST /mcp (JSON-RPC), GET /mcp (SSE keepalive), GET
// /mcp/tools. A model client's avm_ bearer names the organisation and environment; the agent is
// the client. No bearer: 401 with WWW-Authenticate pointing at the protected-resource document.
import { sha256Hex } from "@latch/shared/crypto/hash";
import { AppError } from "@latch/shared/errors";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { decodeJwt } from "jose";
import { BearerNotLive, clientOf, type RouteAccess } from "../auth/principal.ts";
import type { ClientRow } from "../db/schema.ts";
import { bearerOf } from "../http/bearer.ts";
import { createKeepaliveStreams, STREAM_LIMITS, type StreamLimits } from "../http/keepalive-streams.ts";
import type { ZodTypeProvider } from "../http/route-schemas.ts";
import type { ToolDeps } from "../tools/tool-context.ts";
import { HOSTED_TOOL_ALIASES, listToolDefinitions } from "../tools/tool-schemas.ts";
import { createToolHandlers } from "../tools/tools.ts";
import { HOSTED_INSTRUCTIONS } from "./instructions.ts";
import { protectedResource, toolList } from "./mcp.schemas.ts";
import { createMcpServer } from "./mcp-server.ts";

const KEEPALIVE_MS = 25_000;
/** How often an open stream checks that its bearer still authenticates the same client. */
const RECHECK_MS = 60_000;

export interface McpRouteDeps {
  baseUrl: string;
  tools: ToolDeps;
  logError(error: unknown): void;
  /**
   * Whether the client still holds the bearer of this hash (not revoked, not rotated): asked for a
   * bearer let in unconfirmed (principal.ts `confirmsBearer`) by any frame but an http_request,
   * which confirms it in the one statement its call reads.
   */
  isBearerLive?(clientId: string, bearerHash: string): Promise<boolean>;
  /**
   * The client a bearer (avm_ or OAuth access token) authenticates now, or undefined: asked again
   * while a keepalive stream is open on an OAuth access token, which ends when it was revoked or
   * has expired (an avm_ bearer's stream asks `isBearerLive`, which marks no use).
   */
  authenticateBearer?(token: string): Promise<ClientRow | undefined>;
  /** As authenticateBearer, without marking the client used: an open stream's re-check. */
  recheckBearer?(token: string): Promise<ClientRow | undefined>;
}

/**
 * Who holds a keepalive stream, for its cap: an avm_ bearer by its hash; an OAuth access token by
 * the operator who signed in (its `sub`) and the client row, as every member of an organisation
 * using one app shares that row (clients.service.ts ensureOAuthClient) and each refresh brings a
 * new token. The token was verified by the principal hook before this reads its claims.
 */
function streamHolderOf(token: string, client: ClientRow): string {
  if (!token.startsWith("av")) {
    try {
      const { sub } = decodeJwt(token);
      if (typeof sub === "string") return `oauth:${client.id}:${sub}`;
    } catch {
      // Not a JWT after all: counted by its hash as a bearer is.
    }
  }
  return `bearer:${sha256Hex(token)}`;
}

/** A tools/call of http_request (or its alias): the frames that confirm the bearer themselves. */
function callsHttpRequest(frame: unknown): boolean {
  if (typeof frame !== "object" || frame === null) return false;
  const { method, params } = frame as { method?: unknown; params?: { name?: unknown } };
  if (method !== "tools/call" || typeof params?.name !== "string") return false;
  return (HOSTED_TOOL_ALIASES[params.name] ?? params.name) === "http_request";
}

/**
 * `limits`: the caps on keep-alive streams (http/keepalive-streams.ts); a test passes small ones
 * rather than open 2,000 sockets.
 */
export function registerMcpRoutes(
  app: FastifyInstance,
  deps: McpRouteDeps,
  limits: StreamLimits = STREAM_LIMITS,
): void {
  const challenge = `Bearer resource_metadata="${deps.baseUrl}/.well-known/oauth-protected-resource/mcp", scope="mcp"`;

  /** Spec 5 rule 6: /mcp reflects the caller's Origin (agents in browsers call it). */
  const reflectOrigin = (request: FastifyRequest, reply: FastifyReply) => {
    const origin = request.headers.origin;
    if (origin) {
      reply
        .header("access-control-allow-origin", origin)
        .header("vary", "Origin")
        // A browser-based client reads the challenge of a 401 to find the authorization server.
        .header("access-control-expose-headers", "www-authenticate, mcp-session-id");
    }
  };

  /** Spec 4.1: only a model client; no credential is 401 with the challenge, a refusal reflects Origin too. */
  const modelOnly = {
    config: { principals: ["model"], challenge } satisfies RouteAccess,
    onSend: async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
      reflectOrigin(request, reply);
      return payload;
    },
  };

  const server = (client: ClientRow, bearerToConfirm: string | undefined) =>
    createMcpServer({
      instructions: HOSTED_INSTRUCTIONS,
      tools: createToolHandlers(deps.tools, {
        organisationId: client.organisation_id,
        environment: client.environment,
        clientName: client.name,
        ...(bearerToConfirm !== undefined ? { bearerToConfirm } : {}),
      }),
      logError: deps.logError,
    });

  /** The 401 the principal hook gives an unknown bearer, with the same challenge. */
  const notLive = (reply: FastifyReply) => {
    reply.header("www-authenticate", challenge);
    return new AppError("unauthorized", "unknown bearer token");
  };

  app.options("/mcp", async (request, reply) => {
    reflectOrigin(request, reply);
    return reply
      .header("access-control-allow-methods", "GET, POST, OPTIONS")
      .header(
        "access-control-allow-headers",
        "authorization, content-type, mcp-protocol-version, mcp-session-id",
      )
      .status(204)
      .send();
  });

  // JSON-RPC: the frame's depth and arguments are refused by the MCP server, for the frame's id.
  // No body schema, on purpose: a route schema would answer a bad frame with our 400 envelope,
  // where JSON-RPC wants an error object carrying the frame's id (config.isJsonRpc).
  // A bearer found live in the last minutes comes in unconfirmed (confirmsBearer) and is confirmed
  // here before anything acts: by the statement an http_request reads anyway, or by asking.
  app.post(
    "/mcp",
    { ...modelOnly, config: { ...modelOnly.config, isJsonRpc: true, confirmsBearer: true } },
    async (request, reply) => {
      const client = clientOf(request);
      const principal = request.principal;
      const unconfirmed = principal.kind === "model" ? principal.unconfirmedBearerHash : undefined;
      const isCall = unconfirmed !== undefined && callsHttpRequest(request.body);
      if (unconfirmed !== undefined && !isCall) {
        if (!(await deps.isBearerLive?.(client.id, unconfirmed))) throw notLive(reply);
      }
      let response: Awaited<ReturnType<ReturnType<typeof server>["handle"]>>;
      try {
        response = await server(client, isCall ? unconfirmed : undefined).handle(request.body, {
          agentId: client.id,
        });
      } catch (error) {
        if (error instanceof BearerNotLive) {
          // Asked once more, which also drops it from what the plane remembers (a failure path).
          if (unconfirmed !== undefined) await deps.isBearerLive?.(client.id, unconfirmed);
          throw notLive(reply);
        }
        throw error;
      }
      if (response === undefined) return reply.status(202).send();
      return reply.send(response);
    },
  );

  const api = app.withTypeProvider<ZodTypeProvider>();
  api.get("/mcp/tools", { ...modelOnly, schema: { response: { 200: toolList } } }, async () => {
    return { tools: listToolDefinitions() };
  });

  // Keepalive streams are hijacked from Fastify, so closing the server must end them itself.
  const streams = createKeepaliveStreams(limits);
  app.addHook("preClose", async () => {
    streams.endAll();
  });

  app.get("/mcp", modelOnly, async (request, reply) => {
    const client = clientOf(request);
    // The principal hook let a model client in, so there is a bearer.
    const token = bearerOf(request.headers.authorization) ?? "";
    const holder = streamHolderOf(token, client);
    const raw = reply.raw;
    // The client went away while its bearer was checked: its socket's `close` has fired already,
    // so nothing would ever end this stream, clear its timers or give its place back (eight such
    // and the bearer would be refused streams until the process ends). Nothing to answer.
    if (raw.destroyed || request.raw.destroyed || request.raw.socket.destroyed) {
      reply.hijack();
      return;
    }
    // Ended cleanly, as a server close ends it, when a smaller organisation takes its place.
    const stream = streams.admit(holder, client.organisation_id, () => raw.end());
    if (stream === undefined) {
      throw new AppError(
        "rate_limited",
        "too many keepalive streams are open for this bearer, its organisation or this server",
        { extra: { retry_after: 30 } },
      );
    }
    reply.hijack();
    raw.writeHead(200, {
      "content-type": "text/event-stream",
      "cache-control": "no-store",
      connection: "keep-alive",
      ...(request.headers.origin
        ? { "access-control-allow-origin": request.headers.origin, vary: "Origin" }
        : {}),
    });
    const write = (text: string) => {
      if (!raw.writableEnded) raw.write(text);
    };
    write(": latch keepalive\n\n");
    const keepalive = setInterval(() => write(": latch keepalive\n\n"), KEEPALIVE_MS);
    // The bearer was checked when the stream opened; a revoked client or an expired access token
    // must not keep it open for ever. An idle stream is no use of the client: an avm_ bearer is
    // asked about without marking it used (last_used_at), or an unused agent would look active.
    const bearerHash = token.startsWith("av") ? sha256Hex(token) : undefined;
    const isStillLive = async (): Promise<boolean | undefined> => {
      if (bearerHash !== undefined && deps.isBearerLive) return deps.isBearerLive(client.id, bearerHash);
      const recheck = deps.recheckBearer ?? deps.authenticateBearer;
      if (!recheck) return undefined;
      return (await recheck(token))?.id === client.id;
    };
    let isChecking = false;
    const recheck = setInterval(() => {
      if (isChecking || !token) return;
      isChecking = true;
      isStillLive()
        .then(
          (isLive) => {
            if (isLive === false) raw.end();
          },
          // The database is down: keep the stream; the next check decides.
          () => {},
        )
        .finally(() => {
          isChecking = false;
        });
    }, RECHECK_MS);
    raw.once("close", () => {
      clearInterval(keepalive);
      clearInterval(recheck);
      streams.forget(stream);
    });
  });

  const resourceSchema = { schema: { response: { 200: protectedResource } } };
  api.get("/.well-known/oauth-protected-resource", resourceSchema, describeResource);
  api.get("/.well-known/oauth-protected-resource/mcp", resourceSchema, describeResource);
  async function describeResource(request: FastifyRequest, reply: FastifyReply) {
    reflectOrigin(request, reply);
    return {
      resource: `${deps.baseUrl}/mcp`,
      authorization_servers: [deps.baseUrl],
      scopes_supported: ["mcp"],
      bearer_methods_supported: ["header"],
    };
  }
}
