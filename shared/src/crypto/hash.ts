// The one-way hash under which tokens, link tokens and CSRF tokens are stored and compared.
import { createHash } from "node:crypto";

/**
 * Lowercase hex SHA-256 of a string's UTF-8 bytes.
 * @example sha256Hex("abc") // "ba7816bf..."
 */
export function sha256Hex(value: string): string {
  return createHash("sha256").update(value).digest("hex");
}
