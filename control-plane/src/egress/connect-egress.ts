// Reaching the egress proxy: the one at EGRESS_URL, or a child process on loopback.
import { accessSync, constants } from "node:fs";
import { join } from "node:path";
import type { SealingPublicKey } from "@latch/shared/crypto/seal";
import { deriveSealingKeyId } from "@latch/shared/crypto/seal";
import type { Logger } from "pino";
import { createEgressClient, type EgressClient } from "./egress-client.ts";
import { spawnEgressProxy } from "./spawn-proxy.ts";

export interface EgressConnection {
  address: string;
  client: EgressClient;
  /** The proxy's current sealing key; checked against its id so a swapped key is noticed. */
  sealingKey(): Promise<SealingPublicKey>;
  close(): Promise<void>;
}

export interface EgressSettings {
  EGRESS_URL?: string | undefined;
  EGRESS_PORT?: number | undefined;
  EGRESS_CLIENT_TLS_CA?: string | undefined;
  EGRESS_CLIENT_TLS_CERT?: string | undefined;
  EGRESS_CLIENT_TLS_KEY?: string | undefined;
  EGRESS_CLIENT_TLS_REFRESH_MS?: number | undefined;
}

const DEFAULT_EGRESS_PORT = 50051;
/** How long the proxies' sealing key is used before GetInfo is asked again. */
const SEALING_KEY_REFRESH_MS = 60_000;

/**
 * Where a proxy started on this DATA_DIR keeps its sealing keyring (egress-proxy/src/keys/
 * sealing-keys.ts `sealingKeyPath`): a development proxy shares the directory with its parent.
 */
export const SHARED_KEYRING_PATH = join("egress", "sealing-keys.json");

/**
 * In production the control plane holds no key that opens a stored secret (DECISIONS "The two
 * tiers"): a sealing keyring this process can read in its DATA_DIR (left by a development proxy,
 * or a volume shared with the proxies) is refused. Answers the sentence that refuses, or nothing.
 */
export function findReadableSealingKeyring(dataDir: string): string | undefined {
  try {
    accessSync(join(dataDir, SHARED_KEYRING_PATH), constants.R_OK);
  } catch {
    return undefined;
  }
  return `DATA_DIR holds the egress proxy's sealing keyring (${SHARED_KEYRING_PATH}) and this process can read it, but the control plane never holds a key that opens a stored secret; keep the keyring on the proxies' own volume only`;
}

export async function connectEgress(
  settings: EgressSettings,
  dataDir: string,
  logger: Logger,
): Promise<EgressConnection> {
  const spawned = settings.EGRESS_URL
    ? undefined
    : await spawnEgressProxy({ dataDir, port: settings.EGRESS_PORT ?? DEFAULT_EGRESS_PORT });
  const address = settings.EGRESS_URL ?? spawned!.address;
  const tls =
    settings.EGRESS_CLIENT_TLS_CA && settings.EGRESS_CLIENT_TLS_CERT && settings.EGRESS_CLIENT_TLS_KEY
      ? {
          caPath: settings.EGRESS_CLIENT_TLS_CA,
          certPath: settings.EGRESS_CLIENT_TLS_CERT,
          keyPath: settings.EGRESS_CLIENT_TLS_KEY,
          refreshMs: settings.EGRESS_CLIENT_TLS_REFRESH_MS,
        }
      : undefined;
  const client = createEgressClient({ address, tls, logger });
  if (spawned) logger.info({ address }, "egress proxy started alongside");

  // The key is asked again once a minute: after a rotation (a new key first in the proxies' key
  // file) new values are sealed to the new key; meanwhile the old key still opens them.
  let cached: { key: SealingPublicKey; at: number } | undefined;
  return {
    address,
    client,
    async sealingKey() {
      if (cached && Date.now() - cached.at < SEALING_KEY_REFRESH_MS) return cached.key;
      let info: Awaited<ReturnType<typeof client.getInfo>>;
      try {
        info = await client.getInfo();
      } catch (error) {
        // A key learned before still seals values the proxies open: no write fails for this.
        if (cached) return cached.key;
        throw error;
      }
      const publicKey = new Uint8Array(info.sealingPublicKey);
      if (publicKey.length !== 32 || deriveSealingKeyId(publicKey) !== info.sealingKeyId) {
        throw new Error("the egress proxy announced a sealing key that does not match its id");
      }
      cached = { key: { keyId: info.sealingKeyId, publicKey }, at: Date.now() };
      return cached.key;
    },
    async close() {
      client.close();
      await spawned?.stop();
    },
  };
}
