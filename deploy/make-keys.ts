// The shared key files of a deployment, made once by the same code the services use, for a
// secret store (Kubernetes Secrets, compose volumes); never baked into an image.
//   node deploy/make-keys.ts OUT_DIR [--new-sealing-key]
// OUT_DIR/control-plane/: ticket-signing-key.pem (Ed25519), ticket-public-keys.txt (what the
//   proxies trust: EGRESS_TICKET_PUBLIC_KEYS), kek.json (key-encryption keyring and pepper).
// OUT_DIR/oauth/jwks.json: the OAuth server's signing keys (OAUTH_JWKS_FILE).
// OUT_DIR/audit/signing-keys.json: the audit ledger's checkpoint keys (AUDIT_SIGNING_KEYS_FILE).
// OUT_DIR/push/vapid.json: the Web Push VAPID key pair every replica signs with (PUSH_VAPID_KEYS_FILE).
// OUT_DIR/egress/: sealing-keys.json (X25519 keyring; only the proxies get it).
// An existing file is kept (rerunning is safe); every file is 0600 in 0700 folders.
// --new-sealing-key: a rotation of the proxies' key: a new key first in egress/sealing-keys.json,
//   the others kept; roll it out to the proxies, then run `vault seal-rewrap` (README "Keys").
import { join, resolve } from "node:path";
import { loadOrCreateAuditKeys } from "../control-plane/src/audit/audit-keys.ts";
import { keyringPath, loadOrCreateKeyring } from "../control-plane/src/auth/kek.ts";
import { loadOrCreateTicketKey } from "../control-plane/src/egress/ticket-key.ts";
import { loadOrCreateOAuthKeys } from "../control-plane/src/oauth/oauth-keys.ts";
import { loadOrCreateVapidKeys } from "../control-plane/src/push/vapid-keys.ts";
import {
  addSealingKey,
  loadOrCreateSealingKeyring,
  sealingKeyPath,
} from "../egress-proxy/src/keys/sealing-keys.ts";
import { KeyFileBusyError } from "../shared/src/key-file-lock.ts";

const out = process.argv[2];
const isRotation = process.argv[3] === "--new-sealing-key";
if (!out || (process.argv[3] !== undefined && !isRotation)) {
  process.stderr.write("usage: node deploy/make-keys.ts OUT_DIR [--new-sealing-key]\n");
  process.exit(2);
}
process.umask(0o077);
const dir = resolve(out);
const ticket = loadOrCreateTicketKey(dir);
loadOrCreateKeyring(keyringPath(dir));
await loadOrCreateOAuthKeys(dir);
await loadOrCreateAuditKeys(dir);
loadOrCreateVapidKeys(dir);
const sealing = await loadOrCreateSealingKeyring(dir);
let sealingKeyId = sealing.current.keyId;
sealing.close();
if (isRotation) {
  try {
    sealingKeyId = addSealingKey(sealingKeyPath(dir));
  } catch (error) {
    // Another rotation holds the keyring: say so in its one sentence, nothing was changed.
    if (!(error instanceof KeyFileBusyError)) throw error;
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
  process.stdout.write(`new sealing key ${sealingKeyId} first; the keys before it kept after it\n`);
}
process.stdout.write(
  `key files in ${dir}:\n` +
    `  ${join("control-plane", "ticket-signing-key.pem")} (ticket key ${ticket.keyId})\n` +
    `  ${join("control-plane", "ticket-public-keys.txt")}\n` +
    `  ${join("control-plane", "kek.json")}\n` +
    `  ${join("oauth", "jwks.json")} (OAuth signing keys)\n` +
    `  ${join("audit", "signing-keys.json")} (audit checkpoint keys)\n` +
    `  ${join("push", "vapid.json")} (Web Push VAPID key pair)\n` +
    `  ${sealingKeyPath("").replace(/^\//, "")} (sealing key ${sealingKeyId})\n`,
);
