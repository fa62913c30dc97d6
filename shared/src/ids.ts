// Identifiers: a short type prefix and 96 random bits, so an id says what it names in a log line
// and cannot be guessed or enumerated (another organisation's ids answer 404, not 403).
import { randomBytes } from "node:crypto";

export type IdPrefix = "org" | "itm" | "fld" | "grt" | "ses" | "cli" | "ned" | "opr" | "inv" | "psh" | "pky";

/** @example newId("itm") // "itm_3k9v0f1qz7m2c8hx5n4b" */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBytes(12).toString("base64url").toLowerCase().replace(/[-_]/g, "0")}`;
}

/** Whether `text` has the shape of an id `newId(prefix)` makes, in any letter case. */
export function isIdShaped(prefix: IdPrefix, text: string): boolean {
  return new RegExp(`^${prefix}_[a-z0-9]{16}$`, "i").test(text);
}
