// Short codes people type: email codes (8 digits) and backup codes (10 characters), drawn without
// modulo bias, compared in constant time through their peppered hashes.
import { randomInt, timingSafeEqual } from "node:crypto";

/** An 8-digit code: email sign-in codes and approval codes alike (spec 4.3, 2.4). */
export function newEightDigitCode(): string {
  return String(randomInt(0, 100_000_000)).padStart(8, "0");
}

// No 0/O, 1/I/L: read off a screen or a sheet of paper without confusion.
const BACKUP_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ";
export const BACKUP_CODE_COUNT = 10;

/** A backup code shown as XXXXX-XXXXX. */
export function newBackupCode(): string {
  let code = "";
  for (let i = 0; i < 10; i++) code += BACKUP_ALPHABET[randomInt(0, BACKUP_ALPHABET.length)];
  return `${code.slice(0, 5)}-${code.slice(5)}`;
}

/** How a typed backup code is compared: case, spaces and the dash do not matter. */
export function normaliseBackupCode(typed: string): string {
  return typed.toUpperCase().replace(/[^0-9A-Z]/g, "");
}

export function isSameHash(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}
