// Test helpers for the OAuth authorization server: PKCE pairs, a registered public client, and
// the browser half of an authorization (the operator's consent) driven through the real routes.
import { createHash, randomBytes } from "node:crypto";
import type { FastifyInstance, InjectOptions } from "fastify";
import { CIMD_FETCHES_PER_HOST } from "../../src/limits/rate-limit.ts";
import { testDatabase } from "../database.ts";
import type { Browser } from "../hosted.ts";

export const BASE = "http://localhost:8787";
export const RESOURCE = `${BASE}/mcp`;

export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString("base64url");
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") };
}

export function form(fields: Record<string, string>): string {
  return new URLSearchParams(fields).toString();
}

export async function register(
  app: FastifyInstance,
  metadata: Record<string, unknown>,
  headers: Record<string, string> = {},
) {
  return app.inject({
    method: "POST",
    url: "/oauth/register",
    headers: { "content-type": "application/json", ...headers },
    payload: JSON.stringify(metadata),
  });
}

export async function token(app: FastifyInstance, fields: Record<string, string>) {
  return app.inject({
    method: "POST",
    url: "/oauth/token",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    payload: form(fields),
  });
}

/** A path of our own origin from an absolute or relative URL. */
export function pathOf(location: string): string {
  const url = new URL(location, BASE);
  return `${url.pathname}${url.search}`;
}

/**
 * Runs /oauth/authorize in the operator's browser and approves on /consent; answers the code the
 * client's redirect carries (and the whole redirect URL).
 */
export async function authorizeAndConsent(
  op: Browser,
  options: {
    clientId: string;
    redirectUri: string;
    challenge: string;
    decision?: "approve" | "deny";
    organisationId?: string;
    extra?: Record<string, string>;
  },
): Promise<{ code: string | null; redirect: URL; uid: string }> {
  const query = new URLSearchParams({
    client_id: options.clientId,
    redirect_uri: options.redirectUri,
    response_type: "code",
    code_challenge: options.challenge,
    code_challenge_method: "S256",
    state: "st-1",
    resource: RESOURCE,
    scope: "mcp",
    ...options.extra,
  });
  const started = await op.request("GET", `/oauth/authorize?${query}`);
  if (started.statusCode !== 303 && started.statusCode !== 302) {
    throw new Error(`authorize answered ${started.statusCode}: ${started.body}`);
  }
  const consentPath = pathOf(String(started.headers.location));
  const uid = new URL(consentPath, BASE).searchParams.get("uid") ?? "";
  const body: Record<string, string> = { uid, decision: options.decision ?? "approve" };
  if (options.organisationId) body.organisation_id = options.organisationId;
  const decided = await op.request("POST", "/consent", body, { accept: "application/json" });
  if (decided.statusCode !== 200) throw new Error(`consent answered ${decided.statusCode}: ${decided.body}`);
  const resumed = await op.request("GET", pathOf(decided.json().location));
  if (resumed.statusCode !== 303 && resumed.statusCode !== 302) {
    throw new Error(`resume answered ${resumed.statusCode}: ${resumed.body}`);
  }
  if (!/^[a-z][a-z0-9+.-]*:/i.test(String(resumed.headers.location))) {
    throw new Error(`the authorization resumed to ${resumed.headers.location}, not to the client`);
  }
  const redirect = new URL(String(resumed.headers.location));
  return { code: redirect.searchParams.get("code"), redirect, uid };
}

/**
 * The same app, every injected request coming from `remoteAddress` (a client's own address): the
 * per-IP limits of spec 8 count per test, not for every test file sharing 127.0.0.1.
 */
export function fromAddress(app: FastifyInstance, remoteAddress: string): FastifyInstance {
  return new Proxy(app, {
    get(target, property, receiver) {
      if (property === "inject") {
        return (options: InjectOptions) => target.inject({ remoteAddress, ...options });
      }
      const value = Reflect.get(target, property, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** A random address in 10.0.0.0/8, so each test's per-IP counts are its own. */
export function testAddress(): string {
  const [a, b, c] = randomBytes(3);
  return `10.${a}.${b}.${1 + (c! % 254)}`;
}

/**
 * Forgets the counted client metadata document fetches of `host` (spec 8: 30 per hour per host).
 * Only the test origin's hosts can be fetched, so on a PostgreSQL database kept between runs an
 * earlier run's fetches (or the limit tests' fetches at a clock moved forward) would still count.
 */
export async function forgetDocumentFetches(host: string): Promise<void> {
  const { db } = await testDatabase();
  await db
    .deleteFrom("rate_limit_hits")
    .where("bucket", "=", `${CIMD_FETCHES_PER_HOST.name}:${host}`)
    .execute();
}
