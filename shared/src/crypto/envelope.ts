// The layout of a stored secret (ARCHITECTURE.md "Keys", DECISIONS "The two tiers"): envelope
// sealing. Each value is encrypted with its own random data key (XChaCha20-Poly1305) and only that
// data key is sealed to the egress proxy's public key (libsodium sealed box). The proxy opens the
// small sealed data key once and may keep the opened data key (never the value) for a few minutes,
// so a hot credential costs a symmetric decryption per call instead of an X25519 open.
//
//   envelope = "lenv" 0x01 || sealed data key (80) || nonce (24) || ciphertext (value + 16)
//
// The five header bytes are the AEAD's additional data. Pure layout, no crypto: the control plane
// seals with libsodium's WebAssembly build (seal.ts), the proxy opens with native libsodium.
// Values stored before envelopes are a bare sealed box of the value (its first 32 bytes are a
// random X25519 public key, so nothing marks them): whatever does not parse and open as an
// envelope is opened as one of those.

/** "lenv" and format version 1. */
export const ENVELOPE_HEADER: Uint8Array = Uint8Array.of(0x6c, 0x65, 0x6e, 0x76, 0x01);
/** crypto_aead_xchacha20poly1305_ietf_KEYBYTES. */
export const DATA_KEY_BYTES = 32;
/** crypto_box_SEALBYTES: an ephemeral X25519 public key and a Poly1305 tag. */
export const SEAL_OVERHEAD_BYTES = 48;
export const SEALED_DATA_KEY_BYTES = SEAL_OVERHEAD_BYTES + DATA_KEY_BYTES;
/** crypto_aead_xchacha20poly1305_ietf_NPUBBYTES. */
export const NONCE_BYTES = 24;
/** crypto_aead_xchacha20poly1305_ietf_ABYTES. */
export const TAG_BYTES = 16;
const HEADER_BYTES = ENVELOPE_HEADER.length;
/** The shortest envelope: an empty value. */
export const MIN_ENVELOPE_BYTES = HEADER_BYTES + SEALED_DATA_KEY_BYTES + NONCE_BYTES + TAG_BYTES;

/** An envelope's three parts, as views into the stored bytes (nothing copied). */
export interface EnvelopeParts {
  /** The data key sealed to the proxy's key (crypto_box_seal). */
  sealedDataKey: Uint8Array;
  nonce: Uint8Array;
  /** The value under the data key, with its tag; additional data is ENVELOPE_HEADER. */
  ciphertext: Uint8Array;
}

/** The parts of `bytes` when it has an envelope's header and room for one, else undefined. */
export function splitEnvelope(bytes: Uint8Array): EnvelopeParts | undefined {
  if (bytes.length < MIN_ENVELOPE_BYTES) return undefined;
  for (let i = 0; i < HEADER_BYTES; i++) if (bytes[i] !== ENVELOPE_HEADER[i]) return undefined;
  const keyEnd = HEADER_BYTES + SEALED_DATA_KEY_BYTES;
  return {
    sealedDataKey: bytes.subarray(HEADER_BYTES, keyEnd),
    nonce: bytes.subarray(keyEnd, keyEnd + NONCE_BYTES),
    ciphertext: bytes.subarray(keyEnd + NONCE_BYTES),
  };
}

/** The stored bytes of an envelope from its parts. */
export function joinEnvelope(parts: EnvelopeParts): Uint8Array {
  if (parts.sealedDataKey.length !== SEALED_DATA_KEY_BYTES || parts.nonce.length !== NONCE_BYTES) {
    throw new Error("an envelope needs an 80-byte sealed data key and a 24-byte nonce");
  }
  const out = new Uint8Array(HEADER_BYTES + SEALED_DATA_KEY_BYTES + NONCE_BYTES + parts.ciphertext.length);
  out.set(ENVELOPE_HEADER, 0);
  out.set(parts.sealedDataKey, HEADER_BYTES);
  out.set(parts.nonce, HEADER_BYTES + SEALED_DATA_KEY_BYTES);
  out.set(parts.ciphertext, HEADER_BYTES + SEALED_DATA_KEY_BYTES + NONCE_BYTES);
  return out;
}
