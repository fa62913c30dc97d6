// The part of sodium-native (native libsodium bindings, no types of its own) the proxy uses:
// sealed boxes and XChaCha20-Poly1305 for credentials, Ed25519 for call tickets, locked memory.
// Buffers are filled in place.
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
    /** Guarded, locked memory (guard pages, mlock, never swapped); give it back with sodium_free. */
    sodium_malloc(size: number): Buffer;
    sodium_free(buffer: Buffer): void;
    /** Seals `message` to `publicKey` into `ciphertext` (message.length + SEALBYTES bytes). */
    crypto_box_seal(ciphertext: Uint8Array, message: Uint8Array, publicKey: Uint8Array): void;
    /** Fills `buffer` with random bytes. */
    randombytes_buf(buffer: Uint8Array): void;
    /** Encrypts `message` into `ciphertext` (message.length + 16 bytes). `nsec` must be null. */
    crypto_aead_xchacha20poly1305_ietf_encrypt(
      ciphertext: Uint8Array,
      message: Uint8Array,
      additionalData: Uint8Array | null,
      nsec: null,
      nonce: Uint8Array,
      key: Uint8Array,
    ): number;
    /**
     * Decrypts and authenticates `ciphertext` into `message` (ciphertext.length - 16 bytes);
     * throws when it does not authenticate. `nsec` must be null.
     */
    crypto_aead_xchacha20poly1305_ietf_decrypt(
      message: Uint8Array,
      nsec: null,
      ciphertext: Uint8Array,
      additionalData: Uint8Array | null,
      nonce: Uint8Array,
      key: Uint8Array,
    ): number;
  };
  export default sodium;
}
