// Sealing a secret to the egress proxy's public key: the only crypto the control plane does on a
// secret. There is deliberately no `open` here: opening lives in egress-proxy/src/keys alone.
import sodium from "libsodium-wrappers";
import { ENVELOPE_HEADER, joinEnvelope } from "./envelope.ts";

export { deriveSealingKeyId } from "./sealing-key-id.ts";

/**
 * A secret as the database holds it: an envelope (envelope.ts; before envelopes, a bare sealed box)
 * plus the id of the proxy key that opens its data key.
 */
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
 * Seals `plaintext` to the proxy's key as an envelope: a fresh random data key encrypts the value
 * (XChaCha20-Poly1305, random 192-bit nonce, the envelope header as additional data) and only the
 * data key is sealed (crypto_box_seal: ephemeral X25519 + XSalsa20-Poly1305). Anyone can seal;
 * only the holder of the private key can open. The data key and the value's bytes are wiped here.
 */
export async function sealValue(key: SealingPublicKey, plaintext: string): Promise<SealedValue> {
  if (key.publicKey.length !== 32) throw new Error("sealing public key must be 32 bytes");
  const na = await readySodium();
  const dataKey = na.crypto_aead_xchacha20poly1305_ietf_keygen();
  const value = new TextEncoder().encode(plaintext);
  try {
    const nonce = na.randombytes_buf(na.crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
    const ciphertext = na.crypto_aead_xchacha20poly1305_ietf_encrypt(
      value,
      ENVELOPE_HEADER,
      null,
      nonce,
      dataKey,
    );
    const sealedDataKey = na.crypto_box_seal(dataKey, key.publicKey);
    return { keyId: key.keyId, sealed: joinEnvelope({ sealedDataKey, nonce, ciphertext }) };
  } finally {
    na.memzero(dataKey);
    na.memzero(value);
  }
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
