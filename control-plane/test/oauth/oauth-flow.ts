// Test helpers for the OAuth authorization server: PKCE pairs, a registered public client, and
// the browser half of an authorization (the operator's consent) driven through the real routes.
import { createHash, randomBytes } from "node:crypto";
import type { FastifyInstance, InjectOptions } from "fastify";
import { CIMD_FETCHES_PER_HOST, OAUTH_REGISTER_PER_IP } from "../../src/limits/rate-limit.ts";
import { CIMD_FAILED_FETCHES_PER_HOST } from "../../src/oauth/cimd-fetch.ts";
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

/**
 * POST /oauth/register. From `fromAddress(app, ip)` it comes from that address; from a plain app, from
 * a fresh random one, so that the 20-per-hour limit of 127.0.0.1 is never spent by tests that do
 * not test it (on PostgreSQL every test file, and every earlier run, shares the counts).
 */
export async function register(
  app: FastifyInstance,
  metadata: Record<string, unknown>,
  headers: Record<string, string> = {},
) {
  return app.inject({
    ...(PINNED.has(app) ? {} : { remoteAddress: testAddress() }),
    method: "POST",
    url: "/oauth/register",
    headers: { "content-type": "application/json", ...headers },
    payload: JSON.stringify(metadata),
  });
}

/** One JSON-RPC call to /mcp with an OAuth access token (tools/list unless said). */
export function mcpWith(app: FastifyInstance, accessToken: string, method = "tools/list") {
  return app.inject({
    method: "POST",
    url: "/mcp",
    headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json" },
    payload: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: {} }),
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
/** Opens an authorization (code flow, PKCE S256) in the operator's browser; answers its response. */
export async function openAuthorize(op: Browser, clientId: string, redirectUri: string) {
  const query = new URLSearchParams({
    client_id: clientId,
    redirect_uri: redirectUri,
    response_type: "code",
    code_challenge: pkcePair().challenge,
    code_challenge_method: "S256",
    state: "s",
    resource: RESOURCE,
    scope: "mcp",
  });
  return op.request("GET", `/oauth/authorize?${query}`);
}

/** The consent page's uid an opened authorization redirected to (it must have: 303). */
export function consentUid(opened: Awaited<ReturnType<typeof openAuthorize>>): string {
  if (opened.statusCode !== 303) throw new Error(`authorize answered ${opened.statusCode}: ${opened.body}`);
  return new URL(pathOf(String(opened.headers.location)), BASE).searchParams.get("uid")!;
}

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
/** Apps whose requests come from one pinned address (fromAddress). */
const PINNED = new WeakSet<FastifyInstance>();

export function fromAddress(app: FastifyInstance, remoteAddress: string): FastifyInstance {
  const pinned = new Proxy(app, {
    get(target, property, receiver) {
      if (property === "inject") {
        return (options: InjectOptions) => target.inject({ remoteAddress, ...options });
      }
      const value = Reflect.get(target, property, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  PINNED.add(pinned);
  return pinned;
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
    .where("bucket", "in", [
      `${CIMD_FETCHES_PER_HOST.name}:${host}`,
      `${CIMD_FAILED_FETCHES_PER_HOST.name}:${host}`,
    ])
    .execute();
}

/**
 * Forgets the registrations counted for `address` (20 per hour per IP): a test whose client really
 * connects from 127.0.0.1 starts from zero on a PostgreSQL database that earlier runs used too.
 */
export async function forgetRegistrations(address: string): Promise<void> {
  const { db } = await testDatabase();
  await db
    .deleteFrom("rate_limit_hits")
    .where("bucket", "=", `${OAUTH_REGISTER_PER_IP.name}:${address}`)
    .execute();
}

export interface IssuedTokens {
  access_token: string;
  refresh_token: string;
  expires_in: number;
  token_type: string;
}

/**
 * The whole code flow for a registered client: PKCE, /oauth/authorize and /consent in the
 * operator's browser (approve), then the code for tokens at `tokenApp` (another replica, or the
 * same app). Checks the redirect's `iss` and the 200; answers the tokens and what was used.
 */
export async function approveAndExchange(
  op: Browser,
  tokenApp: FastifyInstance,
  options: { clientId: string; redirectUri: string; organisationId?: string },
): Promise<{ tokens: IssuedTokens; code: string; verifier: string }> {
  const pkce = pkcePair();
  const { code, redirect } = await authorizeAndConsent(op, {
    clientId: options.clientId,
    redirectUri: options.redirectUri,
    challenge: pkce.challenge,
    ...(options.organisationId ? { organisationId: options.organisationId } : {}),
  });
  if (redirect.searchParams.get("iss") !== BASE)
    throw new Error(`the redirect's iss is not ${BASE}: ${redirect}`);
  const issued = await token(tokenApp, {
    grant_type: "authorization_code",
    code: code!,
    redirect_uri: options.redirectUri,
    client_id: options.clientId,
    code_verifier: pkce.verifier,
    resource: RESOURCE,
  });
  if (issued.statusCode !== 200)
    throw new Error(`the token endpoint answered ${issued.statusCode}: ${issued.body}`);
  return { tokens: issued.json() as IssuedTokens, code: code!, verifier: pkce.verifier };
}
