// Local MCP sessions over HTTP (spec 4.4), their shape: initialize hands out an Mcp-Session-Id that
// every later frame sends back; a session idle for 8 hours is forgotten (404). The agent id is fixed
// at initialize from the client's name, so a later frame cannot claim to be another agent. The
// store is `local/local-mcp-sessions.ts`.
import { createHash } from "node:crypto";

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

/** The characters an agent id keeps from a client's name; `~` is not one of them (see below). */
const UNSAFE_NAME_CHARACTERS = /[^A-Za-z0-9 ._@:/-]/g;
const AGENT_ID_MAX = 64;
const FOLD_MARK = "~";
const FOLD_HASH_HEX = 12;

/**
 * An agent id from an MCP client's name (spec 4.4): printable, at most 64 characters, and one
 * name, one id. Approvals are keyed by this id, so two names that cleaned to the same text would
 * share them: `my-agent!` would use what the operator approved for `my-agent`, `助手` what an
 * unnamed client was given. A name already clean keeps itself as its id, as before, so existing
 * approvals still match; any other name keeps its clean part and gains `~` and 12 hex of the
 * SHA-256 of the raw name. Cleaning removes `~`, so no client can name itself into another's id.
 * @example agentIdFromClientName("my-agent!") // "my-agent~" + 12 hex, not "my-agent"
 */
export function agentIdFromClientName(name: string | undefined): string {
  if (!name) return "unnamed-agent";
  const cleaned = name.replace(UNSAFE_NAME_CHARACTERS, "").trim();
  if (cleaned === name && name.length <= AGENT_ID_MAX) return name;
  const suffix = `${FOLD_MARK}${hashClientName(name)}`;
  const kept = cleaned.slice(0, AGENT_ID_MAX - suffix.length).trimEnd();
  return `${kept || "agent"}${suffix}`;
}

/**
 * The SHA-256 of the name's UTF-8, first 12 hex. A name with an unpaired surrogate has no UTF-8
 * (Node would write U+FFFD, folding every lone surrogate together), so its UTF-16 code units are
 * hashed behind a 0xFF byte, which no UTF-8 text contains: it cannot meet a well-formed name.
 */
function hashClientName(name: string): string {
  const hash = createHash("sha256");
  if (name.isWellFormed()) hash.update(name, "utf8");
  else hash.update(Buffer.from([0xff])).update(Buffer.from(name, "utf16le"));
  return hash.digest("hex").slice(0, FOLD_HASH_HEX);
}
