// Local MCP sessions over HTTP (spec 4.4): initialize hands out an Mcp-Session-Id that every later
// frame sends back; a session idle for 8 hours is forgotten (404). The agent id is fixed at
// initialize from the client's name, so a later frame cannot claim to be another agent.
import { randomBytes } from "node:crypto";

export const SESSION_IDLE_MS = 8 * 60 * 60 * 1000;
/** Bounds memory: beyond this many live sessions the least recently used is dropped. */
const MAX_SESSIONS = 1000;

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

export function createMcpSessionStore(now: () => number = Date.now): McpSessionStore {
  // A Map iterates in insertion order; re-inserting on touch keeps the oldest first.
  const sessions = new Map<string, McpSession>();
  return {
    open(agentId) {
      if (sessions.size >= MAX_SESSIONS) {
        const oldest = sessions.keys().next().value;
        if (oldest !== undefined) sessions.delete(oldest);
      }
      const session = { id: randomBytes(24).toString("base64url"), agentId, lastSeenMs: now() };
      sessions.set(session.id, session);
      return session;
    },
    touch(id) {
      const session = sessions.get(id);
      if (!session) return undefined;
      sessions.delete(id);
      if (now() - session.lastSeenMs > SESSION_IDLE_MS) return undefined;
      session.lastSeenMs = now();
      sessions.set(id, session);
      return session;
    },
    close: (id) => sessions.delete(id),
  };
}

/** An agent id from an MCP client's name: printable, at most 64 characters. */
export function agentIdFromClientName(name: string | undefined): string {
  const cleaned = (name ?? "")
    .replace(/[^A-Za-z0-9 ._@:/-]/g, "")
    .trim()
    .slice(0, 64);
  return cleaned || "unnamed-agent";
}
