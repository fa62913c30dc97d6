// The bytes a call ticket's Ed25519 signature covers, and the key ids both tiers derive.
import { createHash, createPublicKey, type KeyObject } from "node:crypto";

/**
 * Domain separation: a signature over a ticket can never be replayed as a signature over any
 * other kind of message the same key might one day sign.
 */
export const TICKET_SIGNATURE_CONTEXT = "latch.egress.v1.ticket\0";

/** The exact input to Ed25519 for a serialized Ticket. */
export function ticketSigningInput(payload: Uint8Array): Buffer {
  return Buffer.concat([Buffer.from(TICKET_SIGNATURE_CONTEXT, "utf8"), payload]);
}

/** The proxy's default audience: a ticket minted for another deployment is refused. */
export const DEFAULT_TICKET_AUDIENCE = "latch-egress";

/** Upper bound on how long any ticket may live; the control plane mints them for seconds. */
export const MAX_TICKET_LIFETIME_MS = 10 * 60 * 1000;

/**
 * Clock skew tolerated between the tiers: a proxy accepts a ticket until its expiry plus this, and
 * so remembers a spent id that long; a fence is conclusive only within the same horizon.
 */
export const TICKET_CLOCK_SKEW_MS = 5_000;

/** Raw 32-byte Ed25519 public key of a KeyObject (from its JWK form). */
export function rawEd25519PublicKey(key: KeyObject): Buffer {
  const jwk = key.export({ format: "jwk" });
  if (jwk.kty !== "OKP" || jwk.crv !== "Ed25519" || typeof jwk.x !== "string") {
    throw new Error("not an Ed25519 key");
  }
  return Buffer.from(jwk.x, "base64url");
}

/** A public KeyObject from raw 32 bytes. */
export function ed25519PublicKeyFromRaw(raw: Uint8Array): KeyObject {
  if (raw.length !== 32) throw new Error("an Ed25519 public key is 32 bytes");
  return createPublicKey({
    key: { kty: "OKP", crv: "Ed25519", x: Buffer.from(raw).toString("base64url") },
    format: "jwk",
  });
}

/** "tk_" + 16 base64url characters of SHA-256 over the raw public key. */
export function deriveTicketKeyId(rawPublicKey: Uint8Array): string {
  return `tk_${createHash("sha256").update(rawPublicKey).digest("base64url").slice(0, 16)}`;
}

/**
 * The public ticket keys a proxy trusts, as written to disk or passed in EGRESS_TICKET_PUBLIC_KEYS:
 * `keyId=base64url(raw)` entries, comma-separated.
 */
export function formatTrustedTicketKeys(keys: readonly { keyId: string; publicKey: Uint8Array }[]): string {
  return keys.map((k) => `${k.keyId}=${Buffer.from(k.publicKey).toString("base64url")}`).join(",");
}

export function parseTrustedTicketKeys(text: string): Map<string, KeyObject> {
  const keys = new Map<string, KeyObject>();
  for (const entry of text
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    const eq = entry.indexOf("=");
    if (eq <= 0) throw new Error(`ticket key entry "${entry.slice(0, 40)}" is not keyId=base64url`);
    const keyId = entry.slice(0, eq);
    const raw = Buffer.from(entry.slice(eq + 1), "base64url");
    if (deriveTicketKeyId(raw) !== keyId)
      throw new Error(`ticket key ${keyId} does not match its public key`);
    keys.set(keyId, ed25519PublicKeyFromRaw(raw));
  }
  if (keys.size === 0) throw new Error("no ticket public keys given");
  return keys;
}
