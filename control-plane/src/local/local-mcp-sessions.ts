// The MCP sessions of `vault serve` (spec 4.4): initialize hands out an Mcp-Session-Id that every
// later frame sends back; a session idle for 8 hours is forgotten (404).
//
// Every MCP client of one vault holds the same model bearer and names itself, so the store must not
// let one of them end or crowd out another's session. It once dropped the least recently used
// session beyond a cap, so any holder of the bearer could end every other agent's session with a
// loop of initialize; refusing new sessions when full instead let a holder that spread its sessions
// over many names lock every other client out for 8 hours. So room is made at the expense of whoever
// holds the most: an agent name at its share gives up its own least recently used session, and a
// full store takes the least recently used session of the name holding the most. A client with a
// few sessions in use is never the one to lose one while a flooder holds more.

import { randomBytes } from "node:crypto";
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

  /** The least recently used session of `agentId` (the map is in order of use). */
  function oldestOf(agentId: string): McpSession | undefined {
    for (const session of sessions.values()) if (session.agentId === agentId) return session;
    return undefined;
  }

  /** The name holding the most sessions: the one that makes room when the store is full. */
  function largestHolder(): string | undefined {
    let largest: string | undefined;
    let most = 0;
    for (const [agentId, count] of countOf) {
      if (count > most) {
        largest = agentId;
        most = count;
      }
    }
    return largest;
  }

  return {
    open(agentId) {
      forgetIdle();
      // An agent name at its share makes room from its own sessions, never from another's.
      if ((countOf.get(agentId) ?? 0) >= limits.perAgent) {
        const own = oldestOf(agentId);
        if (own) forget(own);
      }
      if (sessions.size >= limits.total) {
        const largest = largestHolder();
        const taken = largest === undefined ? undefined : oldestOf(largest);
        if (taken) forget(taken);
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
