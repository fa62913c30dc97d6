// The MCP sessions of `vault serve` (spec 4.4): initialize hands out an Mcp-Session-Id that every
// later frame sends back; a session idle for 8 hours is forgotten (404).
//
// Every MCP client of one vault holds the same model bearer, so the store must not let one of them
// end or crowd out another's session. It once dropped the least recently used session beyond a
// cap, so any holder of the bearer could end every other agent's session with a loop of
// initialize. Now nothing ends a session but its own DELETE or 8 idle hours: a full store refuses
// the new session instead (429 rate_limited, retry_after the time until the oldest one in the way
// idles out), and each agent name may hold only a share of it, so one client re-initializing in a
// loop fills its own share and not the store.

import { randomBytes } from "node:crypto";
import { AppError } from "@latch/shared/errors";
import { type McpSession, type McpSessionStore, SESSION_IDLE_MS } from "../mcp/mcp-sessions.ts";

export interface SessionLimits {
  /** Live sessions in all (memory stays bounded). */
  total: number;
  /** Live sessions of one agent name. */
  perAgent: number;
}

export const SESSION_LIMITS: SessionLimits = { total: 10_000, perAgent: 100 };

export function createLocalMcpSessions(
  now: () => number = Date.now,
  limits: SessionLimits = SESSION_LIMITS,
): McpSessionStore {
  // A Map iterates in insertion order; re-inserting on touch keeps the least recently seen first.
  const sessions = new Map<string, McpSession>();
  const countOf = new Map<string, number>();

  const isIdle = (session: McpSession) => now() - session.lastSeenMs > SESSION_IDLE_MS;

  function forget(session: McpSession): void {
    sessions.delete(session.id);
    const left = (countOf.get(session.agentId) ?? 1) - 1;
    if (left > 0) countOf.set(session.agentId, left);
    else countOf.delete(session.agentId);
  }

  /** Forgets the sessions idle past 8 hours: they lead the map, so the walk stops at the first live one. */
  function forgetIdle(): void {
    for (const session of sessions.values()) {
      if (!isIdle(session)) return;
      forget(session);
    }
  }

  function oldestOf(agentId: string): McpSession | undefined {
    for (const session of sessions.values()) if (session.agentId === agentId) return session;
    return undefined;
  }

  function refuse(oldestInTheWay: McpSession | undefined, message: string): never {
    const waitMs = oldestInTheWay ? oldestInTheWay.lastSeenMs + SESSION_IDLE_MS - now() : SESSION_IDLE_MS;
    throw new AppError("rate_limited", message, {
      extra: { retry_after: Math.max(1, Math.ceil(waitMs / 1000)) },
    });
  }

  return {
    open(agentId) {
      forgetIdle();
      if (sessions.size >= limits.total) {
        refuse(
          sessions.values().next().value,
          `this vault holds ${limits.total} MCP sessions, as many as it keeps; a client ends its own with DELETE /mcp, and one idle 8 hours is forgotten`,
        );
      }
      if ((countOf.get(agentId) ?? 0) >= limits.perAgent) {
        refuse(
          oldestOf(agentId),
          `the agent ${agentId} holds ${limits.perAgent} MCP sessions, as many as one agent name may; end one with DELETE /mcp or reuse it`,
        );
      }
      const session = { id: randomBytes(24).toString("base64url"), agentId, lastSeenMs: now() };
      sessions.set(session.id, session);
      countOf.set(agentId, (countOf.get(agentId) ?? 0) + 1);
      return session;
    },
    touch(id) {
      const session = sessions.get(id);
      if (!session) return undefined;
      if (isIdle(session)) {
        forget(session);
        return undefined;
      }
      sessions.delete(id);
      session.lastSeenMs = now();
      sessions.set(id, session);
      return session;
    },
    close(id) {
      const session = sessions.get(id);
      if (!session) return false;
      forget(session);
      return true;
    },
  };
}
