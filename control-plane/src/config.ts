// The control plane's configuration: one zod schema over the environment, every bad key reported
// at once, a frozen result passed into factories (no global getters).
import { isIP } from "node:net";
import { z } from "zod";
import { isLoopbackAddress } from "./egress/egress-client.ts";

const optionalText = z
  .string()
  .optional()
  .transform((v) => (v?.trim() ? v.trim() : undefined));

export const ENVIRONMENTS = ["staging", "production"] as const;
export type Environment = (typeof ENVIRONMENTS)[number];

const schema = z.object({
  NODE_ENV: z.enum(["development", "production", "test"]).default("development"),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  BASE_URL: z
    .url({ protocol: /^https?$/, error: "must be an http(s) URL" })
    .default("http://localhost:8787")
    .transform((v) => v.replace(/\/+$/, "")),
  HOST: z.string().min(1).default("127.0.0.1"),
  PORT: z.coerce.number().int().min(0).max(65535).default(8787),
  DATA_DIR: z.string().min(1).default("./.latch"),
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
    .pipe(z.array(z.enum(ENVIRONMENTS)).min(1)),
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
  /** Key files mounted from a secret store (read-only); unset: DATA_DIR/control-plane/. */
  TICKET_SIGNING_KEY_FILE: optionalText,
  KEK_KEYRING_FILE: optionalText,
  OAUTH_JWKS_FILE: optionalText,
  /** How long SIGTERM waits for requests in flight before the process exits anyway. */
  SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().min(0).max(600_000).default(40_000),
  EGRESS_PORT: z.coerce.number().int().min(0).max(65535).default(50051),
  EGRESS_AUDIENCE: z.string().min(1).default("latch-egress"),
  EGRESS_CLIENT_TLS_CA: optionalText,
  EGRESS_CLIENT_TLS_CERT: optionalText,
  EGRESS_CLIENT_TLS_KEY: optionalText,
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

export function loadConfig(env: NodeJS.ProcessEnv): ControlPlaneConfig {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
    throw new Error(`invalid control plane configuration:\n  ${problems.join("\n  ")}`);
  }
  const c = parsed.data;
  const problems: string[] = [];
  const tlsKnobs = [c.EGRESS_CLIENT_TLS_CA, c.EGRESS_CLIENT_TLS_CERT, c.EGRESS_CLIENT_TLS_KEY];
  if (tlsKnobs.some(Boolean) && !tlsKnobs.every(Boolean)) {
    problems.push("EGRESS_CLIENT_TLS_CA, EGRESS_CLIENT_TLS_CERT and EGRESS_CLIENT_TLS_KEY go together");
  }
  if (
    c.EGRESS_URL &&
    !tlsKnobs.every(Boolean) &&
    !isLoopbackAddress(c.EGRESS_URL.replace(/^[a-z]+:\/\//, ""))
  ) {
    problems.push("EGRESS_URL: a proxy off loopback is reached over mTLS (set EGRESS_CLIENT_TLS_*)");
  }
  if (c.NODE_ENV === "production" && !c.SMTP_URL) {
    // Without SMTP, sign-in codes are files in DATA_DIR/outbox: fine on a laptop, no mail in production.
    problems.push("SMTP_URL is required when NODE_ENV=production");
  }
  if (problems.length > 0) {
    throw new Error(`invalid control plane configuration:\n  ${problems.join("\n  ")}`);
  }
  return Object.freeze({ ...c, LATCH_ENVIRONMENTS: Object.freeze([...new Set(c.LATCH_ENVIRONMENTS)]) });
}
