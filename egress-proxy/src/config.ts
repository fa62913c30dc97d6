// The proxy's configuration: one zod schema over the environment, every bad key reported at once.
import { accessSync, constants, existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { SPAWNED_BY_CONTROL_PLANE } from "@latch/shared/process";
import { DEFAULT_TICKET_AUDIENCE } from "@latch/shared/tickets/ticket-signature";
import { z } from "zod";
import { parseCidrList } from "./destination/classify.ts";

const hostPort = z.string().regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, "must be host:port");
const optionalText = z
  .string()
  .optional()
  .transform((v) => (v?.trim() ? v.trim() : undefined));

const schema = z.object({
  NODE_ENV: z.enum(["development", "production", "test"]).default("development"),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  DATA_DIR: z.string().min(1).default("./.latch"),
  EGRESS_LISTEN: hostPort.default("127.0.0.1:50051"),
  EGRESS_METRICS_LISTEN: hostPort.optional(),
  EGRESS_AUDIENCE: z.string().min(1).default(DEFAULT_TICKET_AUDIENCE),
  /** How long SIGTERM waits for calls in flight (the longest call is 30 s of origin time). */
  EGRESS_DRAIN_TIMEOUT_MS: z.coerce.number().int().min(0).max(600_000).default(40_000),
  EGRESS_TICKET_PUBLIC_KEYS: optionalText,
  EGRESS_SEALING_KEY_FILE: optionalText,
  /** How often the sealing key file is read again: a rotation takes effect and wipes the data keys. */
  EGRESS_SEALING_KEY_REFRESH_MS: z.coerce.number().int().min(100).max(3_600_000).default(30_000),
  /** Opened data keys kept (each at most 10 minutes; DECISIONS "The two tiers"); 0 keeps none. */
  EGRESS_DATA_KEY_CACHE_ENTRIES: z.coerce.number().int().min(0).max(1_000_000).default(4096),
  EGRESS_REPLAY_DATABASE_URL: optionalText.pipe(
    z
      .string()
      .regex(/^postgres(ql)?:\/\//, "must be a postgres:// URL")
      .optional(),
  ),
  EGRESS_TLS_CERT: optionalText,
  EGRESS_TLS_KEY: optionalText,
  EGRESS_TLS_CLIENT_CA: optionalText,
  /**
   * The identity the control plane's client certificate must name: a DNS SAN, or a URI SAN (a
   * SPIFFE id); `dns:` / `uri:` may say which. deploy/scripts/make-certs.sh issues this one.
   */
  EGRESS_CLIENT_IDENTITY: z
    .string()
    .trim()
    .min(1)
    .max(2048)
    .regex(/^[\x21-\x7e]+$/, "must be one DNS name or URI, printable ASCII without spaces")
    .default("latch-control-plane"),
  /** How often the mTLS files are read again (cert-manager renews them in place). */
  EGRESS_TLS_REFRESH_MS: z.coerce.number().int().min(100).max(3_600_000).default(30_000),
  EGRESS_DNS_SERVERS: optionalText,
  EGRESS_CONNECT_TO: optionalText,
  EGRESS_ALLOW_CIDRS: optionalText,
  EGRESS_EXTRA_CA: optionalText,
  /** OpenTelemetry over OTLP/HTTP (base URL; /v1/traces is added); unset: off, nothing loaded. */
  OTEL_EXPORTER_OTLP_ENDPOINT: optionalText.pipe(z.url({ protocol: /^https?$/ }).optional()),
});

export type EgressConfig = Readonly<z.infer<typeof schema>> & {
  readonly listenHost: string;
  readonly listenPort: number;
  readonly devKnobs: readonly string[];
  /**
   * Started by a control plane as its child (npm start, vault serve, vault mcp): the only proxy
   * that control plane ever sends tickets to, which it may start on its first call, after minting
   * that call's ticket.
   */
  readonly isSpawned: boolean;
};

/** The listener's mTLS files: all three, or none (plaintext, on loopback outside production). */
const TLS_FILES = ["EGRESS_TLS_CERT", "EGRESS_TLS_KEY", "EGRESS_TLS_CLIENT_CA"] as const;

/** The three development/test knobs that bend the destination policy. */
const DEV_KNOBS = ["EGRESS_CONNECT_TO", "EGRESS_ALLOW_CIDRS", "EGRESS_EXTRA_CA"] as const;

/**
 * Node's own ways to change whom an origin's certificate must chain to, or to weaken the TLS an
 * injected credential travels over: each would undo the production ban on EGRESS_EXTRA_CA (a
 * self-signed origin receiving `authorization: Bearer ...`). The NODE_OPTIONS flags refused:
 * - `--use-openssl-ca`, `--use-system-ca`: trust the host's store (and SSL_CERT_FILE/SSL_CERT_DIR)
 *   instead of, or besides, Node's bundled roots. `--use-bundled-ca` is the default and is fine.
 * - `--openssl-config`, `--openssl-shared-config`, `--openssl-legacy-provider`: an OpenSSL
 *   configuration (or its legacy algorithms) the proxy's TLS did not choose; OPENSSL_CONF too.
 * - `--tls-*` (`--tls-min-v1.0`, `--tls-max-v1.2`, `--tls-cipher-list`, `--tls-keylog`, ...):
 *   older protocols or weaker ciphers, or every session's keys written to a file.
 * NODE_TLS_REJECT_UNAUTHORIZED other than "1" turns certificate checks off wherever a caller did
 * not ask for them (the upstream connector asks, upstream/pool.ts); NODE_EXTRA_CA_CERTS adds CAs.
 */
const REFUSED_NODE_OPTIONS =
  /^--(use-openssl-ca|use-system-ca|openssl-config|openssl-shared-config|openssl-legacy-provider|tls-[a-z0-9.-]+)$/;

/**
 * The Node settings in `env` (and the flags node was started with) that bend TLS toward origins,
 * named, never with their values.
 */
function findTlsOverrides(env: NodeJS.ProcessEnv, execArgv: readonly string[] = []): string[] {
  const found: string[] = [];
  const reject = env.NODE_TLS_REJECT_UNAUTHORIZED;
  if (reject !== undefined && reject !== "1") found.push("NODE_TLS_REJECT_UNAUTHORIZED (other than 1)");
  if (env.NODE_EXTRA_CA_CERTS !== undefined) found.push("NODE_EXTRA_CA_CERTS");
  if (env.OPENSSL_CONF !== undefined) found.push("OPENSSL_CONF");
  // --use-system-ca by another name; the upstream trust store ignores it anyway (upstream/pool.ts).
  if (env.NODE_USE_SYSTEM_CA !== undefined && env.NODE_USE_SYSTEM_CA !== "0")
    found.push("NODE_USE_SYSTEM_CA");
  // Node reads `--a_b` as `--a-b`, and a value may follow an `=` or the next word.
  const refusedIn = (words: readonly string[]) => [
    ...new Set(
      words
        .map((word) => word.replace(/^"|"$/g, ""))
        .filter((word) => word.startsWith("--"))
        .map((word) => word.split("=")[0]!.replaceAll("_", "-"))
        .filter((flag) => REFUSED_NODE_OPTIONS.test(flag)),
    ),
  ];
  const inOptions = refusedIn((env.NODE_OPTIONS ?? "").split(/\s+/));
  if (inOptions.length > 0) found.push(`NODE_OPTIONS ${inOptions.join(" ")}`);
  const onCommandLine = refusedIn(execArgv);
  if (onCommandLine.length > 0) found.push(`the node flag ${onCommandLine.join(" ")}`);
  return found;
}

function splitHostPort(value: string): { host: string; port: number } {
  const at = value.lastIndexOf(":");
  return { host: value.slice(0, at).replace(/^\[|\]$/g, ""), port: Number(value.slice(at + 1)) };
}

function isLoopbackHost(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * A setting the proxy cannot start with: one sentence for whoever set the environment (main.ts
 * prints it as is), naming each variable and never its value.
 */
export class EgressConfigError extends Error {
  override readonly name = "EgressConfigError";
  constructor(problems: readonly string[]) {
    super(`Latch's egress proxy cannot start: ${problems.join("; ")}.`);
  }
}

/** `execArgv`: the flags node was started with, checked as NODE_OPTIONS is (tests pass their own). */
export function loadEgressConfig(
  env: NodeJS.ProcessEnv,
  execArgv: readonly string[] = process.execArgv,
): EgressConfig {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    throw new EgressConfigError(parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`));
  }
  const c = parsed.data;
  const problems: string[] = [];
  const devKnobs = DEV_KNOBS.filter((k) => c[k] !== undefined);
  if (c.NODE_ENV === "production" && devKnobs.length > 0) {
    problems.push(`${devKnobs.join(", ")}: development/test knobs are refused when NODE_ENV=production`);
  }
  const isSpawned = env[SPAWNED_BY_CONTROL_PLANE] === "1";
  if (c.NODE_ENV === "production" && isSpawned) {
    // The mark exempts a proxy from refusing tickets issued before it started (its parent mints the
    // first ticket before starting it). A production control plane never spawns one (it needs
    // EGRESS_URL), so the mark there could only switch that replay check off.
    problems.push(
      `${SPAWNED_BY_CONTROL_PLANE}: only a control plane that starts its own proxy sets it, and none does when NODE_ENV=production`,
    );
  }
  const tlsOverrides = findTlsOverrides(env, execArgv);
  if (c.NODE_ENV === "production" && tlsOverrides.length > 0) {
    problems.push(
      `${tlsOverrides.join(", ")}: Node settings that change which origins' certificates are trusted are refused when NODE_ENV=production, as EGRESS_EXTRA_CA is`,
    );
  }
  if (c.EGRESS_ALLOW_CIDRS) {
    try {
      parseCidrList(c.EGRESS_ALLOW_CIDRS);
    } catch (error) {
      problems.push(`EGRESS_ALLOW_CIDRS: ${(error as Error).message}`);
    }
  }
  const listen = splitHostPort(c.EGRESS_LISTEN);
  const tlsFiles = TLS_FILES.filter((name) => c[name] !== undefined);
  const hasTls = tlsFiles.length === TLS_FILES.length;
  if (!hasTls && c.NODE_ENV === "production") {
    // DECISIONS: plaintext only on loopback in development and tests, never in a deployment.
    problems.push(
      "EGRESS_TLS_CERT, EGRESS_TLS_KEY and EGRESS_TLS_CLIENT_CA must be set when NODE_ENV=production: the gRPC listener takes calls over mTLS only, on loopback too",
    );
  } else if (tlsFiles.length > 0 && !hasTls) {
    // Some of the files and not the others: neither mTLS nor a deliberate plaintext listener, so
    // the start is refused rather than every call failing its client identity check unexplained.
    const missing = TLS_FILES.filter((name) => c[name] === undefined);
    problems.push(
      `${missing.join(", ")}: mTLS needs EGRESS_TLS_CERT, EGRESS_TLS_KEY and EGRESS_TLS_CLIENT_CA together, and only ${tlsFiles.join(", ")} ${tlsFiles.length === 1 ? "is" : "are"} set; set the others, or unset ${tlsFiles.length === 1 ? "it" : "them"} for plaintext on loopback`,
    );
  } else if (!hasTls && !isLoopbackHost(listen.host)) {
    problems.push(
      "EGRESS_LISTEN: a non-loopback listener needs mTLS (EGRESS_TLS_CERT, EGRESS_TLS_KEY, EGRESS_TLS_CLIENT_CA)",
    );
  }
  if (problems.length > 0) throw new EgressConfigError(problems);
  return Object.freeze({
    ...c,
    listenHost: listen.host,
    listenPort: listen.port,
    devKnobs,
    isSpawned,
  });
}

/**
 * The control plane's private keys in a DATA_DIR (control-plane/src: egress/ticket-key.ts,
 * auth/kek.ts, oauth/oauth-keys.ts, audit/audit-keys.ts, push/vapid-keys.ts), relative to it.
 */
const CONTROL_PLANE_PRIVATE_KEYS = [
  join("control-plane", "ticket-signing-key.pem"),
  join("control-plane", "kek.json"),
  join("oauth", "jwks.json"),
  join("audit", "signing-keys.json"),
  join("push", "vapid.json"),
] as const;

/**
 * Each tier holds only its own keys (DECISIONS "Faults and isolation in deployments"): a proxy
 * that can read the control plane's ticket-signing key mints its own tickets, and with the KEK,
 * the OAuth or audit keys it would hold the control plane's secrets beside the key that opens
 * stored ones. The mirror of the control plane's refusal of a readable sealing keyring
 * (control-plane/src/egress/connect-egress.ts). Answers the sentence that refuses, or nothing.
 */
export function findReadableControlPlaneKeys(dataDir: string): string | undefined {
  const readable = CONTROL_PLANE_PRIVATE_KEYS.filter((path) => {
    try {
      accessSync(join(dataDir, path), constants.R_OK);
      return true;
    } catch {
      return false;
    }
  });
  if (readable.length === 0) return undefined;
  return `DATA_DIR holds the control plane's private keys (${readable.join(", ")}) and this process can read them, but the egress proxy never holds the control plane's keys; give the proxy a DATA_DIR of its own and the ticket keys through EGRESS_TICKET_PUBLIC_KEYS`;
}

/**
 * The ticket keys to trust: EGRESS_TICKET_PUBLIC_KEYS, else the public file the control plane
 * writes into a shared DATA_DIR (npm start, vault serve). In production a DATA_DIR from which the
 * control plane's private keys can be read refuses the start, whichever way the keys come.
 */
export function readTrustedTicketKeysText(config: EgressConfig): string {
  const sharedKeys =
    config.NODE_ENV === "production" ? findReadableControlPlaneKeys(config.DATA_DIR) : undefined;
  if (sharedKeys) throw new EgressConfigError([sharedKeys]);
  if (config.EGRESS_TICKET_PUBLIC_KEYS) return config.EGRESS_TICKET_PUBLIC_KEYS;
  const path = join(config.DATA_DIR, "control-plane", "ticket-public-keys.txt");
  if (!existsSync(path)) {
    throw new EgressConfigError([
      `no ticket key is trusted yet: set EGRESS_TICKET_PUBLIC_KEYS, or start the control plane once on this DATA_DIR so it writes ${path}`,
    ]);
  }
  return readFileSync(path, "utf8");
}
