// Local MCP sessions over HTTP (spec 4.4), their shape: initialize hands out an Mcp-Session-Id that
// every later frame sends back; a session idle for 8 hours is forgotten (404). The agent id is fixed
// at initialize from the client's name, so a later frame cannot claim to be another agent. The
// store is `local/local-mcp-sessions.ts`.
export const SESSION_IDLE_MS = 8 * 60 * 60 * 1000;

export interface McpSession {
  id: string;
  agentId: string;
  lastSeenMs: number;
}

export interface McpSessionStore {
  open(agentId: string): McpSession;
  /** The session, touched; undefined when unknown or idle past 8 hours. */
  touch(id: string): McpSession | undefined;
  close(id: string): boolean;
}

/** An agent id from an MCP client's name: printable, at most 64 characters. */
export function agentIdFromClientName(name: string | undefined): string {
  const cleaned = (name ?? "")
    .replace(/[^A-Za-z0-9 ._@:/-]/g, "")
    .trim()
    .slice(0, 64);
  return cleaned || "unnamed-agent";
}
