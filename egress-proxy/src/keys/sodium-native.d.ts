// The part of sodium-native (native libsodium bindings, no types of its own) the proxy uses:
// sealed boxes for credentials and Ed25519 for call tickets. Buffers are filled in place.
declare module "sodium-native" {
  const sodium: {
    crypto_box_PUBLICKEYBYTES: number;
    crypto_box_SECRETKEYBYTES: number;
    crypto_box_SEALBYTES: number;
    crypto_sign_BYTES: number;
    crypto_sign_PUBLICKEYBYTES: number;
    /** Fills `publicKey` and `secretKey` with a new X25519 key pair. */
    crypto_box_keypair(publicKey: Uint8Array, secretKey: Uint8Array): void;
    /** Opens a sealed box into `message` (sealed.length - SEALBYTES bytes); false when it does not open. */
    crypto_box_seal_open(
      message: Uint8Array,
      sealed: Uint8Array,
      publicKey: Uint8Array,
      secretKey: Uint8Array,
    ): boolean;
    /** Whether `signature` (its first 64 bytes) is a valid Ed25519 signature of `message`. */
    crypto_sign_verify_detached(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean;
    /** Overwrites `buffer` with zeros (not optimised away). */
    sodium_memzero(buffer: Uint8Array): void;
  };
  export default sodium;
}
