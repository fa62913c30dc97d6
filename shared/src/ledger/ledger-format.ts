// The ledger's public form (DECISIONS "Ledger and telemetry"; ARCHITECTURE.md "The audit ledger"
// writes it down with a test vector): each row as GET /api/audit/ledger exports it, its hash, and a
// checkpoint and what its signature covers. Pure: the API, the append statement and the offline
// `vault audit verify` all compute from here, so they cannot disagree.
import { createHash } from "node:crypto";
import { canonicalJson, type JsonValue } from "./canonical-json.ts";

/** The prev_hash of seq 1. */
export const ZERO_HASH = "0".repeat(64);

/** One audit row as exported. `hash` covers every other field. */
export interface LedgerRow {
  type: "event";
  organisation_id: string;
  seq: number;
  prev_hash: string;
  /** RFC 3339 UTC with milliseconds, as Date.prototype.toISOString writes it. */
  at: string;
  environment: string | null;
  actor: string;
  action: string;
  item_name: string | null;
  host: string | null;
  reason: string | null;
  detail: { [key: string]: JsonValue };
  /** The W3C trace id (32 hex) of the request that wrote the row, when telemetry traced it. */
  trace_id: string | null;
  hash: string;
}

/** A signed statement that the organisation's chain had `hash` at `seq`. */
export interface LedgerCheckpoint {
  type: "checkpoint";
  organisation_id: string;
  seq: number;
  hash: string;
  at: string;
  key_id: string;
  /** base64url Ed25519 over checkpointSigningInput(this checkpoint). */
  signature: string;
}

export type LedgerLine = LedgerRow | LedgerCheckpoint;

/** hex SHA-256 of the JCS of the row without its `hash`. */
export function rowHash(row: Omit<LedgerRow, "hash"> & { hash?: string }): string {
  const { hash: _hash, ...hashed } = row;
  return sha256Hex(canonicalJson(hashed));
}

/** The bytes a checkpoint's signature covers: the JCS of the checkpoint without `signature`. */
export function checkpointSigningInput(checkpoint: Omit<LedgerCheckpoint, "signature">): Buffer {
  const { signature: _signature, ...signed } = checkpoint as LedgerCheckpoint;
  return Buffer.from(canonicalJson(signed), "utf8");
}

/** A time as the ledger writes it (RFC 3339, UTC, milliseconds). */
export function ledgerTime(at: Date): string {
  return at.toISOString();
}

/**
 * The JCS text of a row whose `holes` are filled in later by the database (seq, prev_hash and at
 * are known only under the organisation's head lock): `literals[0] + hole(holes[0]) + literals[1]
 * + ...` is canonicalJson(row) once each hole holds its value in canonical form. Top-level members
 * only, and JCS sorts them, so each literal is the exact text between two holes.
 * @example canonicalTemplate({ a: 1, b: 2, c: 3 }, ["b"]) // { literals: ['{"a":1,"b":', ',"c":3}'], holes: ["b"] }
 */
export function canonicalTemplate<K extends string>(
  row: Record<string, unknown>,
  holes: readonly K[],
): { literals: string[]; holes: K[] } {
  const keys = [...new Set([...Object.keys(row), ...holes])].sort();
  const literals: string[] = [];
  const order: K[] = [];
  let text = "{";
  keys.forEach((key, i) => {
    text += `${i === 0 ? "" : ","}${canonicalJson(key)}:`;
    if ((holes as readonly string[]).includes(key)) {
      literals.push(text);
      order.push(key as K);
      text = "";
    } else {
      text += canonicalJson(row[key]);
    }
  });
  literals.push(`${text}}`);
  return { literals, holes: order };
}

export function sha256Hex(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}
