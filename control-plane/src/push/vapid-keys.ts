// The Web Push VAPID key pair (RFC 8292): P-256, in DATA_DIR/push/vapid.json (or
// PUSH_VAPID_KEYS_FILE, mounted from a secret store), created on first start and shared by every
// replica like the other key files: a browser's subscription is bound to the public key it was
// made with (the applicationServerKey), so every replica must sign with the same one.
import { createECDH } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { createPrivateFileExclusive, readPrivateJson } from "@latch/shared/files";
import webpush from "web-push";

export interface VapidKeys {
  /** base64url of the 65-byte uncompressed point: the console's applicationServerKey. */
  publicKey: string;
  /** base64url of the 32-byte private scalar. */
  privateKey: string;
}

/** DATA_DIR/push/vapid.json, or `keyFile`. */
export function vapidKeysPath(dataDir: string, keyFile?: string): string {
  return keyFile ?? join(dataDir, "push", "vapid.json");
}

/** The key pair, after checking that the public half is the private half's. */
function readVapidKeys(path: string): VapidKeys {
  const parsed = readPrivateJson(path) as Partial<VapidKeys>;
  if (typeof parsed.publicKey !== "string" || typeof parsed.privateKey !== "string") {
    throw new Error(`${path} holds no VAPID key pair`);
  }
  const ecdh = createECDH("prime256v1");
  ecdh.setPrivateKey(Buffer.from(parsed.privateKey, "base64url"));
  if (ecdh.getPublicKey().toString("base64url") !== parsed.publicKey) {
    throw new Error(`${path}: the VAPID public key is not the private key's`);
  }
  return { publicKey: parsed.publicKey, privateKey: parsed.privateKey };
}

/** The keys, created on first start (two replicas starting at once keep one pair). */
export function loadOrCreateVapidKeys(dataDir: string, keyFile?: string): VapidKeys {
  const path = vapidKeysPath(dataDir, keyFile);
  if (!existsSync(path)) {
    const keys = webpush.generateVAPIDKeys();
    createPrivateFileExclusive(path, `${JSON.stringify(keys, null, 2)}\n`);
  }
  return readVapidKeys(path);
}
