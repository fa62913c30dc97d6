// POST /mcp on `vault serve`: the model bearer, then the Mcp-Session-Id rules of spec 4.4, then
// the same method table `vault mcp` serves over stdio.
import { AppError } from "@latch/shared/errors";
import type { FastifyInstance } from "fastify";
import type { McpServer } from "../mcp/mcp-server.ts";
import { agentIdFromClientName, type McpSessionStore } from "../mcp/mcp-sessions.ts";
import { requireRole } from "./local-guards.ts";

const SESSION_HEADER = "mcp-session-id";

export function registerLocalMcpRoutes(
  app: FastifyInstance,
  mcp: McpServer,
  sessions: McpSessionStore,
): void {
  // JSON-RPC: the frame's depth and arguments are refused by the MCP server, for the frame's id.
  // No body schema, on purpose: a route schema would answer a bad frame with our 400 envelope,
  // where JSON-RPC wants an error object carrying the frame's id (config.isJsonRpc).
  app.post("/mcp", { config: { isJsonRpc: true } }, async (request, reply) => {
    requireRole(request, "model");
    const frame = request.body as
      | { method?: unknown; params?: { clientInfo?: { name?: unknown } } }
      | undefined;
    if (frame && typeof frame === "object" && frame.method === "initialize") {
      const name = frame.params?.clientInfo?.name;
      const session = sessions.open(agentIdFromClientName(typeof name === "string" ? name : undefined));
      reply.header("Mcp-Session-Id", session.id);
      return reply.send(await mcp.handle(request.body, { agentId: session.agentId }));
    }
    const sessionId = request.headers[SESSION_HEADER];
    if (typeof sessionId !== "string" || sessionId.length === 0) {
      throw new AppError("invalid_request", "send the Mcp-Session-Id header that initialize returned");
    }
    const session = sessions.touch(sessionId);
    if (!session) throw new AppError("not_found", "this MCP session is unknown or expired; initialize again");
    const response = await mcp.handle(request.body, { agentId: session.agentId });
    if (response === undefined) return reply.status(202).send();
    return reply.send(response);
  });
  // No server-to-client stream locally: the SDK client treats 405 as "no SSE offered".
  app.get("/mcp", async (request, reply) => {
    requireRole(request, "model");
    return reply.status(405).header("allow", "POST, DELETE").send();
  });
  app.delete("/mcp", async (request, reply) => {
    requireRole(request, "model");
    const sessionId = request.headers[SESSION_HEADER];
    if (typeof sessionId !== "string" || !sessions.close(sessionId)) {
      throw new AppError("not_found", "no such MCP session");
    }
    return reply.status(204).send();
  });
}
