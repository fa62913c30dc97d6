// The id of a sealing key, derived from its public half; apart from seal.ts so that the proxy,
// which opens with native libsodium, does not load the WebAssembly build just to name a key.
import { createHash } from "node:crypto";

/**
 * A key id derived from the public key itself, so a control plane can check that the key a proxy
 * announces is the one it was told to pin: "sk_" + 16 base64url characters of SHA-256(public key).
 */
export function deriveSealingKeyId(publicKey: Uint8Array): string {
  return `sk_${createHash("sha256").update(publicKey).digest("base64url").slice(0, 16)}`;
}
