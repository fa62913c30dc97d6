// Sealing a secret to the egress proxy's public key: the only crypto the control plane does on a
// secret. There is deliberately no `open` here: opening lives in egress-proxy/src/keys alone.
import sodium from "libsodium-wrappers";

export { deriveSealingKeyId } from "./sealing-key-id.ts";

/** A secret as the database holds it: a libsodium sealed box plus the id of the key that opens it. */
export interface SealedValue {
  keyId: string;
  sealed: Uint8Array;
}

/** The proxy's public sealing key (X25519, 32 bytes) and its id. */
export interface SealingPublicKey {
  keyId: string;
  publicKey: Uint8Array;
}

/** Loads libsodium's WebAssembly once; every sealing call awaits it. */
export async function readySodium(): Promise<typeof sodium> {
  await sodium.ready;
  return sodium;
}

/**
 * Seals `plaintext` to the proxy's key (crypto_box_seal: ephemeral X25519 + XSalsa20-Poly1305).
 * Anyone can seal; only the holder of the private key can open.
 */
export async function sealValue(key: SealingPublicKey, plaintext: string): Promise<SealedValue> {
  if (key.publicKey.length !== 32) throw new Error("sealing public key must be 32 bytes");
  const na = await readySodium();
  return { keyId: key.keyId, sealed: na.crypto_box_seal(new TextEncoder().encode(plaintext), key.publicKey) };
}

/** Below this length a value's last four characters would give away too much of it. */
const MIN_LENGTH_FOR_LAST4 = 12;

/**
 * The last four characters of a value: the only part of a secret ever kept or shown in clear.
 * Short values (under 12 characters) show nothing, since four characters would be a third or
 * more of the secret.
 */
export function lastFour(value: string): string {
  const chars = Array.from(value);
  return chars.length < MIN_LENGTH_FOR_LAST4 ? "" : chars.slice(-4).join("");
}
