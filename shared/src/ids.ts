// Identifiers: a short type prefix and 96 random bits, so an id says what it names in a log line
// and cannot be guessed or enumerated (another organisation's ids answer 404, not 403).
import { randomBytes } from "node:crypto";

export type IdPrefix = "org" | "itm" | "fld" | "grt" | "ses" | "cli" | "ned" | "opr" | "inv";

/** @example newId("itm") // "itm_3k9v0f1qz7m2c8hx5n4b" */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBytes(12).toString("base64url").toLowerCase().replace(/[-_]/g, "0")}`;
}
