// A real OpenID provider for the single sign-on tests: a second oidc-provider, on a loopback TLS
// origin with the test PKI's *.latch.test certificate, named https://idp.latch.test (the egress
// proxy reaches it through EGRESS_CONNECT_TO; egress-harness.ts `connectTo`). It records every
// request it gets (the token request must come from the proxy, carrying the client secret), signs
// in whoever the test names next, and can spoil the ID token its token endpoint answers (another
// nonce, audience or issuer, expired, unsigned, signed with a key it never published, or with HMAC
// keyed by the client secret) so that the relying party's checks are tried for real, or hang at its
// token endpoint (the egress proxy's time limit ends the wait). Like oidc-provider, it names itself
// in its answers at the redirect URI (`iss`, RFC 9207) and says so in its discovery document; a test
// may have it do neither, as many providers still do. Another host of the test PKI's names gives a
// second provider (the mix-up attack needs two). `IdpBrowser` walks the browser's part (the
// redirects through the provider) with its own cookies.
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer, request as httpsRequest } from "node:https";
import type { AddressInfo } from "node:net";
import { decodeJwt, decodeProtectedHeader, exportJWK, generateKeyPair, type JWK, SignJWT } from "jose";
import Provider from "oidc-provider";

const PKI = new URL("../../egress-proxy/test/pki/", import.meta.url);
const pki = (file: string) => readFileSync(new URL(file, PKI), "utf8");

export const IDP_HOST = "idp.latch.test";
export const IDP_ISSUER = `https://${IDP_HOST}`;

export interface IdpAccount {
  sub: string;
  email: string;
  email_verified?: boolean | string;
}

/** How the token endpoint's ID token is spoiled, for one exchange. */
export type IdTokenTamper =
  | "nonce"
  | "aud"
  | "iss"
  | "expired"
  | "unsigned"
  | "foreign_key"
  /** HS256 keyed by the client secret: the algorithm-confusion forgery of anyone who holds it. */
  | "client_secret_hmac"
  /** Signed rightly, without saying when the person was checked (a step-up asked for max_age). */
  | "no_auth_time";

export interface RecordedIdpRequest {
  method: string;
  path: string;
  headers: IncomingMessage["headers"];
  body: string;
}

export interface TestIdp {
  /** Its host (IDP_HOST unless started with another) and its issuer, https://host. */
  host: string;
  issuer: string;
  port: number;
  /** `host:443:127.0.0.1:port`, for EGRESS_CONNECT_TO. */
  connectTo: string;
  clientId: string;
  clientSecret: string;
  requests: RecordedIdpRequest[];
  /** Who the next sign-in at the provider is. */
  signInAs(account: IdpAccount): void;
  /** Spoils the next token answer's ID token (once). */
  tamperNext(how: IdTokenTamper): void;
  /** The next token request is read and never answered (a provider that hangs). */
  hangNextTokenRequest(): void;
  /** Whether its answers at the redirect URI carry `iss` (RFC 9207; oidc-provider's own do). */
  sendIssInAnswers(isSent: boolean): void;
  close(): Promise<void>;
}

export async function startTestIdp(options: {
  redirectUri: string;
  /** Another name than IDP_HOST under the test PKI's *.latch.test: a second provider. */
  host?: string;
  /**
   * false: its discovery document leaves out `authorization_response_iss_parameter_supported`
   * (a control plane keeps the document 10 minutes, so this is chosen once, at the start).
   */
  advertisesIss?: boolean;
}): Promise<TestIdp> {
  const host = options.host ?? IDP_HOST;
  const issuer = `https://${host}`;
  const { privateKey } = await generateKeyPair("RS256", { extractable: true });
  const signingJwk: JWK = { ...(await exportJWK(privateKey)), kid: "idp-key-1", alg: "RS256", use: "sig" };
  const clientId = "latch-test-client";
  const clientSecret = `idp-secret-${randomBytes(16).toString("hex")}`;
  let account: IdpAccount = { sub: "sub-0", email: "nobody@corp.latch.test", email_verified: true };
  let tamper: IdTokenTamper | undefined;
  let isHanging = false;
  let isSendingIss = true;
  const isAdvertisingIss = options.advertisesIss ?? true;
  const requests: RecordedIdpRequest[] = [];

  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: [options.redirectUri],
        grant_types: ["authorization_code"],
        response_types: ["code"],
        token_endpoint_auth_method: "client_secret_basic",
      },
    ],
    jwks: { keys: [signingJwk] },
    cookies: { keys: ["test-idp-cookie-key"] },
    claims: { openid: ["sub"], email: ["email", "email_verified"] },
    // The address goes into the ID token of a code flow too (Latch reads no userinfo).
    conformIdTokenClaims: false,
    features: { devInteractions: { enabled: false } },
    pkce: { required: () => true },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    findAccount: async (_ctx, sub) => ({
      accountId: sub,
      claims: async () => ({ sub, email: account.email, email_verified: account.email_verified }),
    }),
  });

  const spoil = async (idToken: string): Promise<string> => {
    const how = tamper;
    tamper = undefined;
    if (!how) return idToken;
    const claims = decodeJwt(idToken);
    const header = decodeProtectedHeader(idToken);
    const now = Math.floor(Date.now() / 1000);
    if (how === "nonce") claims.nonce = "a-nonce-of-another-sign-in";
    if (how === "aud") claims.aud = "another-client";
    if (how === "iss") claims.iss = "https://evil.latch.test";
    if (how === "expired") Object.assign(claims, { iat: now - 7200, exp: now - 3600 });
    if (how === "no_auth_time") delete claims.auth_time;
    if (how === "unsigned") {
      const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
      return `${part({ alg: "none", typ: "JWT" })}.${part(claims)}.`;
    }
    if (how === "client_secret_hmac") {
      return new SignJWT(claims)
        .setProtectedHeader({ alg: "HS256", kid: String(header.kid) })
        .sign(new TextEncoder().encode(clientSecret));
    }
    const key =
      how === "foreign_key" ? (await generateKeyPair("RS256", { extractable: true })).privateKey : privateKey;
    return new SignJWT(claims).setProtectedHeader({ alg: "RS256", kid: String(header.kid) }).sign(key);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse, body: Buffer) => {
    const path = (req.url ?? "/").split("?")[0]!;
    requests.push({ method: req.method ?? "", path, headers: req.headers, body: body.toString("utf8") });
    if (path.startsWith("/interaction/")) {
      const details = await provider.interactionDetails(req, res);
      const grant = new provider.Grant({
        accountId: account.sub,
        clientId: String(details.params.client_id),
      });
      grant.addOIDCScope(String(details.params.scope));
      const grantId = await grant.save();
      await provider.interactionFinished(
        req,
        res,
        { login: { accountId: account.sub }, consent: { grantId } },
        { mergeWithLastSubmission: false },
      );
      return;
    }
    if (req.method === "POST" && path === "/token" && isHanging) {
      isHanging = false;
      return; // Read, never answered: the connection stays open until the caller gives up.
    }
    if (!isAdvertisingIss && path === "/.well-known/openid-configuration") {
      rewriteJson(res, (document) => {
        delete document.authorization_response_iss_parameter_supported;
        return document;
      });
    }
    if (!isSendingIss) {
      // The redirect back to the redirect URI, without the provider's name in it.
      const setHeader = res.setHeader.bind(res);
      res.setHeader = ((name: string, value: number | string | readonly string[]) => {
        if (name.toLowerCase() !== "location" || !String(value).startsWith(options.redirectUri)) {
          return setHeader(name, value);
        }
        const location = new URL(String(value));
        location.searchParams.delete("iss");
        return setHeader(name, location.href);
      }) as typeof res.setHeader;
    }
    if (req.method === "POST" && path === "/token" && tamper) {
      // The provider's own answer, its ID token spoiled on the way out.
      const setHeader = res.setHeader.bind(res);
      const end = res.end.bind(res) as (chunk?: unknown) => ServerResponse;
      res.setHeader = ((name: string, value: number | string | readonly string[]) =>
        name.toLowerCase() === "content-length" ? res : setHeader(name, value)) as typeof res.setHeader;
      res.end = ((chunk?: unknown) => {
        const answer = JSON.parse(String(chunk)) as { id_token?: string };
        if (!answer.id_token) return end(chunk);
        void spoil(answer.id_token).then((spoiled) => end(JSON.stringify({ ...answer, id_token: spoiled })));
        return res;
      }) as typeof res.end;
    }
    // The body was read for the record: oidc-provider takes it parsed, as behind a framework.
    provider.callback()(req.method === "POST" ? withBody(req, body) : req, res);
  };

  const server = createServer(
    { cert: pki("trusted-leaf.pem"), key: pki("trusted-leaf-key.pem") },
    (req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", () => {
        handle(req, res, Buffer.concat(chunks)).catch((error: unknown) => {
          res.statusCode = 500;
          res.end(String(error));
        });
      });
    },
  );
  server.on("tlsClientError", () => {});
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    host,
    issuer,
    port,
    connectTo: `${host}:443:127.0.0.1:${port}`,
    clientId,
    clientSecret,
    requests,
    signInAs(next) {
      account = next;
    },
    tamperNext(how) {
      tamper = how;
    },
    hangNextTokenRequest() {
      isHanging = true;
    },
    sendIssInAnswers(isSent) {
      isSendingIss = isSent;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The JSON answer oidc-provider writes to `res`, changed by `change` on the way out. */
function rewriteJson(res: ServerResponse, change: (json: Record<string, unknown>) => unknown): void {
  const setHeader = res.setHeader.bind(res);
  const end = res.end.bind(res) as (chunk?: unknown) => ServerResponse;
  res.setHeader = ((name: string, value: number | string | readonly string[]) =>
    name.toLowerCase() === "content-length" ? res : setHeader(name, value)) as typeof res.setHeader;
  res.end = ((chunk?: unknown) => {
    if (chunk === undefined) return end(chunk);
    return end(JSON.stringify(change(JSON.parse(String(chunk)) as Record<string, unknown>)));
  }) as typeof res.end;
}

/** oidc-provider reads a form body itself: one already read is handed over parsed, as a framework would. */
function withBody(req: IncomingMessage, body: Buffer): IncomingMessage {
  const type = req.headers["content-type"] ?? "";
  const text = body.toString("utf8");
  (req as IncomingMessage & { body?: unknown }).body = type.includes("json")
    ? JSON.parse(text || "{}")
    : Object.fromEntries(new URLSearchParams(text));
  return req;
}

/**
 * The browser's walk through the provider: follows its redirects (with the provider's cookies)
 * until one leads back to Latch, and answers that address (the redirect URI with code and state).
 */
export class IdpBrowser {
  private readonly cookies = new Map<string, string>();
  private readonly idp: TestIdp;
  constructor(idp: TestIdp) {
    this.idp = idp;
  }

  async walk(authorizationUrl: string): Promise<URL> {
    let next = new URL(authorizationUrl);
    for (let hop = 0; hop < 10; hop++) {
      if (next.hostname !== this.idp.host) return next;
      const answer = await this.get(next);
      if (!answer.location)
        throw new Error(`the provider answered ${answer.status} at ${next.pathname}: ${answer.body}`);
      next = new URL(answer.location, next);
    }
    throw new Error("too many redirects at the provider");
  }

  private get(url: URL): Promise<{ status: number; location?: string; body: string }> {
    return new Promise((resolve, reject) => {
      const req = httpsRequest(
        {
          host: "127.0.0.1",
          port: this.idp.port,
          servername: this.idp.host,
          ca: pki("trusted-ca.pem"),
          method: "GET",
          path: `${url.pathname}${url.search}`,
          headers: {
            host: this.idp.host,
            ...(this.cookies.size
              ? { cookie: [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ") }
              : {}),
          },
        },
        (res) => {
          for (const line of res.headers["set-cookie"] ?? []) {
            const [pair] = line.split(";");
            const at = pair!.indexOf("=");
            this.cookies.set(pair!.slice(0, at).trim(), pair!.slice(at + 1));
          }
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () =>
            resolve({
              status: res.statusCode ?? 0,
              ...(res.headers.location ? { location: res.headers.location } : {}),
              body: Buffer.concat(chunks).toString("utf8").slice(0, 500),
            }),
          );
        },
      );
      req.on("error", reject);
      req.end();
    });
  }
}
