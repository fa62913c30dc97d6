// The control plane's Ed25519 ticket-signing key: created on first run in DATA_DIR, owner-only.
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createPrivateFileExclusive, writePrivateFileAtomic } from "@latch/shared/files";
import {
  deriveTicketKeyId,
  formatTrustedTicketKeys,
  rawEd25519PublicKey,
} from "@latch/shared/tickets/ticket-signature";

export interface TicketSigningKey {
  keyId: string;
  privateKey: KeyObject;
  publicKeyRaw: Buffer;
}

/** Where the key lives, and where its public half is published for the proxy to trust. */
export function ticketKeyPaths(dataDir: string): { privatePath: string; publicPath: string } {
  const dir = join(dataDir, "control-plane");
  return {
    privatePath: join(dir, "ticket-signing-key.pem"),
    publicPath: join(dir, "ticket-public-keys.txt"),
  };
}

/**
 * Loads the signing key, generating it (and its public file) on first run. `keyFile` is a key
 * mounted from a secret store (TICKET_SIGNING_KEY_FILE); the public file still goes to DATA_DIR.
 */
export function loadOrCreateTicketKey(dataDir: string, keyFile?: string): TicketSigningKey {
  const paths = ticketKeyPaths(dataDir);
  const privatePath = keyFile ?? paths.privatePath;
  const publicPath = paths.publicPath;
  if (!existsSync(privatePath)) {
    const { privateKey } = generateKeyPairSync("ed25519");
    createPrivateFileExclusive(privatePath, privateKey.export({ format: "pem", type: "pkcs8" }).toString());
  }
  const privateKey = createPrivateKey(readFileSync(privatePath));
  const publicKeyRaw = rawEd25519PublicKey(createPublicKey(privateKey));
  const keyId = deriveTicketKeyId(publicKeyRaw);
  // The public half is not secret; it is written beside the key so that a proxy sharing DATA_DIR
  // (npm start, vault serve) can trust it without configuration.
  writePrivateFileAtomic(publicPath, `${formatTrustedTicketKeys([{ keyId, publicKey: publicKeyRaw }])}\n`);
  return { keyId, privateKey, publicKeyRaw };
}
