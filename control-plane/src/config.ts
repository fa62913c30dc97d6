// The control plane's configuration: one zod schema over the environment, every bad key reported
// at once, a frozen result passed into factories (no global getters).
import { isIP } from "node:net";
import { checkHostPattern } from "@latch/shared/requests/host-pattern";
import { z } from "zod";
import { isLoopbackAddress } from "./egress/egress-client.ts";

const optionalText = z
  .string()
  .optional()
  .transform((v) => (v?.trim() ? v.trim() : undefined));

export const ENVIRONMENTS = ["staging", "production"] as const;
export type Environment = (typeof ENVIRONMENTS)[number];

/** A TCP port, with the sentence a person reads when it is not one. */
const port = (fallback: number) => {
  const error = "must be a port number from 0 to 65535";
  return z.coerce.number({ error }).int({ error }).min(0, { error }).max(65535, { error }).default(fallback);
};

const notEmpty = { error: "must not be empty" };
/** The push services of Chrome, Firefox, Safari and Edge. */
export const DEFAULT_PUSH_SERVICE_HOSTS =
  "fcm.googleapis.com,updates.push.services.mozilla.com,web.push.apple.com,*.notify.windows.com";
const milliseconds = "must be a number of milliseconds from 0 to 600000";
const refreshMilliseconds = "must be a number of milliseconds from 100 to 3600000";

const schema = z.object({
  NODE_ENV: z
    .enum(["development", "production", "test"], { error: "must be development, production or test" })
    .default("development"),
  LOG_LEVEL: z
    .enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"], {
      error: "must be one of fatal, error, warn, info, debug, trace, silent",
    })
    .default("info"),
  BASE_URL: z
    .url({ protocol: /^https?$/, error: "must be an http(s) URL" })
    .default("http://localhost:8787")
    // Scheme and host as the URL standard writes them ("HTTPS://Latch.Example" is
    // "https://latch.example"): every check of BASE_URL (https cookies, Origin, RP id) reads alike.
    .transform((v) => {
      const url = new URL(v);
      return `${url.origin}${url.pathname}`.replace(/\/+$/, "");
    }),
  HOST: z.string().min(1, notEmpty).default("127.0.0.1"),
  PORT: port(8787),
  DATA_DIR: z.string().min(1, notEmpty).default("./.latch"),
  DATABASE_URL: optionalText.pipe(
    z
      .string()
      .regex(/^postgres(ql)?:\/\//, "must be a postgres:// URL")
      .optional(),
  ),
  /** The environments this plane serves, comma-separated (spec 4.3: staging refuses production). */
  LATCH_ENVIRONMENTS: z
    .string()
    .default(ENVIRONMENTS.join(","))
    .transform((v) => v.split(",").map((e) => e.trim()))
    .pipe(
      z.array(z.enum(ENVIRONMENTS, { error: "must be staging, production or both, comma-separated" })).min(1),
    ),
  SMTP_URL: optionalText.pipe(
    z
      .string()
      .regex(/^smtps?:\/\//, "must be an smtp:// or smtps:// URL")
      .optional(),
  ),
  EGRESS_URL: optionalText,
  /**
   * The load balancers in front of the plane (addresses or CIDR ranges, comma-separated): a request
   * from one of them is counted against the address its X-Forwarded-For names (spec 8's per-IP
   * limits). Unset: every X-Forwarded-For is ignored and the socket's address is the caller's.
   */
  TRUST_PROXY: optionalText
    .transform((v) => (v ? v.split(",").map((entry) => entry.trim()) : []))
    .pipe(
      z.array(z.string().refine(isAddressOrRange, "must be IP addresses or CIDR ranges, comma-separated")),
    ),
  /** host:port for Prometheus /metrics (its own listener, never the public port); unset: none. */
  METRICS_LISTEN: optionalText.pipe(
    z
      .string()
      .regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, "must be host:port")
      .optional(),
  ),
  /**
   * Where single sign-on's domain check reads DNS TXT records: a DNS-over-HTTPS JSON API (the
   * `?name=&type=TXT` form Google's and Cloudflare's answer), reached through the egress proxy.
   */
  SSO_DNS_URL: z
    .url({ protocol: /^https$/, error: "must be an https URL" })
    .default("https://dns.google/resolve"),
  /**
   * The push services a Web Push subscription may name (DECISIONS "Approvals that reach the
   * operator"): exact hosts or *.suffix, comma-separated. By default Chrome's, Firefox's, Safari's
   * and Edge's.
   */
  PUSH_SERVICE_HOSTS: z
    .string()
    .default(DEFAULT_PUSH_SERVICE_HOSTS)
    .transform((v, ctx) => {
      const hosts: string[] = [];
      for (const entry of v
        .split(",")
        .map((e) => e.trim())
        .filter(Boolean)) {
        const checked = checkHostPattern(entry);
        if (checked.ok) hosts.push(checked.value);
        else
          ctx.addIssue({
            code: "custom",
            message: `must be host names or *.suffix patterns: ${checked.message}`,
          });
      }
      return hosts;
    }),
  /** Key files mounted from a secret store (read-only); unset: DATA_DIR/control-plane/. */
  TICKET_SIGNING_KEY_FILE: optionalText,
  KEK_KEYRING_FILE: optionalText,
  OAUTH_JWKS_FILE: optionalText,
  AUDIT_SIGNING_KEYS_FILE: optionalText,
  /** The Web Push VAPID key pair every replica signs with; unset: DATA_DIR/push/vapid.json. */
  PUSH_VAPID_KEYS_FILE: optionalText,
  /** OpenTelemetry over OTLP/HTTP (base URL; /v1/traces and /v1/logs are added); unset: off. */
  OTEL_EXPORTER_OTLP_ENDPOINT: optionalText.pipe(
    z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }).optional(),
  ),
  /** How long SIGTERM waits for requests in flight before the process exits anyway. */
  SHUTDOWN_TIMEOUT_MS: z.coerce
    .number({ error: milliseconds })
    .int({ error: milliseconds })
    .min(0, { error: milliseconds })
    .max(600_000, { error: milliseconds })
    .default(40_000),
  EGRESS_PORT: port(50051),
  EGRESS_AUDIENCE: z.string().min(1, notEmpty).default("latch-egress"),
  EGRESS_CLIENT_TLS_CA: optionalText,
  EGRESS_CLIENT_TLS_CERT: optionalText,
  EGRESS_CLIENT_TLS_KEY: optionalText,
  /** How often the mTLS files are read again (cert-manager renews them in place). */
  EGRESS_CLIENT_TLS_REFRESH_MS: z.coerce
    .number({ error: refreshMilliseconds })
    .int({ error: refreshMilliseconds })
    .min(100, { error: refreshMilliseconds })
    .max(3_600_000, { error: refreshMilliseconds })
    .default(30_000),
});

/** An IPv4 or IPv6 address, or one with a /prefix that fits it. */
function isAddressOrRange(entry: string): boolean {
  const [address = "", prefix, ...rest] = entry.split("/");
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
}

export type ControlPlaneConfig = Readonly<
  Omit<z.infer<typeof schema>, "LATCH_ENVIRONMENTS"> & { LATCH_ENVIRONMENTS: readonly Environment[] }
>;

/**
 * A configuration the process cannot start with. Its message is one sentence for the person who
 * set the environment, naming every bad variable and never echoing a value (DATABASE_URL and
 * SMTP_URL can hold passwords).
 */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
  constructor(problems: readonly string[]) {
    super(`Latch cannot start: ${problems.join("; ")}.`);
  }
}

export function loadConfig(env: NodeJS.ProcessEnv): ControlPlaneConfig {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    // One problem per variable, named by the variable alone (not LATCH_ENVIRONMENTS.1).
    const problems = new Map<string, string>();
    for (const issue of parsed.error.issues) {
      const key = String(issue.path[0] ?? "the environment");
      if (!problems.has(key)) problems.set(key, `${key} ${issue.message}`);
    }
    throw new ConfigError([...problems.values()]);
  }
  const c = parsed.data;
  const problems: string[] = [];
  const tlsKnobs = [c.EGRESS_CLIENT_TLS_CA, c.EGRESS_CLIENT_TLS_CERT, c.EGRESS_CLIENT_TLS_KEY];
  const hasTls = tlsKnobs.every(Boolean);
  if (!hasTls && c.NODE_ENV === "production") {
    // DECISIONS: plaintext only on loopback in development and tests, never in a deployment.
    problems.push(
      "EGRESS_CLIENT_TLS_CA, EGRESS_CLIENT_TLS_CERT and EGRESS_CLIENT_TLS_KEY must be set when NODE_ENV=production: the control plane reaches the egress proxy over mTLS only, on loopback too",
    );
  } else if (tlsKnobs.some(Boolean) && !hasTls) {
    problems.push(
      "EGRESS_CLIENT_TLS_CA, EGRESS_CLIENT_TLS_CERT and EGRESS_CLIENT_TLS_KEY must be set together",
    );
  } else if (c.EGRESS_URL && !hasTls && !isLoopbackAddress(c.EGRESS_URL.replace(/^[a-z]+:\/\//, ""))) {
    problems.push(
      "EGRESS_URL off loopback is reached over mTLS only, so EGRESS_CLIENT_TLS_CA, EGRESS_CLIENT_TLS_CERT and EGRESS_CLIENT_TLS_KEY must be set",
    );
  }
  if (c.NODE_ENV === "production" && !c.SMTP_URL) {
    // Without SMTP, sign-in codes are files in DATA_DIR/outbox: fine on a laptop, no mail in production.
    problems.push("SMTP_URL is required when NODE_ENV=production");
  }
  if (c.NODE_ENV === "production" && !c.EGRESS_URL) {
    // Unset, this process would start a proxy of its own, sharing its user and DATA_DIR with the
    // sealing keyring: the control plane never holds a key that opens a stored secret.
    problems.push("the egress proxy runs as its own process in production; set EGRESS_URL");
  }
  const rejectUnauthorized = env.NODE_TLS_REJECT_UNAUTHORIZED;
  if (c.NODE_ENV === "production" && rejectUnauthorized !== undefined && rejectUnauthorized !== "1") {
    // Any value but "1" lets a TLS peer that skipped the question (SMTP's STARTTLS, the telemetry
    // exporter) go unchecked: a relay in the middle reads every sign-in code.
    problems.push(
      "NODE_TLS_REJECT_UNAUTHORIZED other than 1 turns certificate checks off and is refused when NODE_ENV=production",
    );
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze({ ...c, LATCH_ENVIRONMENTS: Object.freeze([...new Set(c.LATCH_ENVIRONMENTS)]) });
}
