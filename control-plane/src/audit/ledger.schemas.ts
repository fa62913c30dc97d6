// The ledger's shapes at the edge (DECISIONS "Ledger and telemetry").
import { z } from "zod";
import { MAX_IGNORED_LISTED } from "./ledger-verify.ts";

const hex64 = z.string().regex(/^[0-9a-f]{64}$/);

export const ledgerQuery = z.object({
  since_seq: z.coerce
    .number()
    .int()
    .min(0)
    .max(Number.MAX_SAFE_INTEGER)
    .optional()
    .describe("only rows after this seq (to resume an export); their checkpoints too"),
});

export const ledgerRow = z
  .object({
    type: z.literal("event"),
    organisation_id: z.string(),
    seq: z.number().int().min(1),
    prev_hash: hex64,
    at: z.string().describe("RFC 3339 UTC with milliseconds"),
    environment: z.string().nullable(),
    actor: z.string(),
    action: z.string(),
    item_name: z.string().nullable(),
    host: z.string().nullable(),
    reason: z.string().nullable(),
    detail: z.record(z.string(), z.unknown()),
    trace_id: z.string().nullable(),
    hash: hex64.describe("hex SHA-256 of the RFC 8785 canonical JSON of this row without hash"),
  })
  .meta({ id: "LedgerRow" });

export const ledgerCheckpoint = z
  .object({
    type: z.literal("checkpoint"),
    organisation_id: z.string(),
    seq: z.number().int().min(1),
    hash: hex64,
    at: z.string(),
    key_id: z.string(),
    signature: z
      .string()
      .describe("base64url Ed25519 over the RFC 8785 canonical JSON of this checkpoint without signature"),
  })
  .meta({ id: "LedgerCheckpoint" });

export const ledgerVerification = z.object({
  ok: z.boolean(),
  rows: z.number().int().min(0),
  last_seq: z.number().int().min(0),
  first_bad_seq: z.number().int().optional(),
  problem: z.string().optional().describe("what is wrong at first_bad_seq, in one sentence"),
  last_checkpoint: ledgerCheckpoint.nullable(),
  ignored_checkpoints: z
    .array(
      z.object({
        seq: z.number().int(),
        key_id: z.string(),
        at: z.string(),
        reason: z.string().describe("why it vouches for nothing, in one sentence"),
      }),
    )
    .max(MAX_IGNORED_LISTED)
    .optional()
    .describe(
      "checkpoints signed by a retired key after its retirement (the first 100): they vouch for nothing and were passed over; the next valid checkpoint covers their rows",
    ),
});

export const auditKeysDocument = z.object({
  keys: z.array(
    z.object({
      key_id: z.string(),
      alg: z.literal("Ed25519"),
      public_key: z.string().describe("base64url, 32 bytes"),
      created_at: z.string(),
      retired_at: z
        .string()
        .optional()
        .describe(
          "RFC 3339; a retired key: a checkpoint it signed after this time, over a row written after it, or after a checkpoint of a key made after it, vouches for nothing (verification passes over it)",
        ),
    }),
  ),
});

/** The JSON Lines export: one LedgerRow or LedgerCheckpoint per line. */
export const ledgerExport = z
  .string()
  .describe("JSON Lines: each line a LedgerRow or a LedgerCheckpoint, in seq order");
