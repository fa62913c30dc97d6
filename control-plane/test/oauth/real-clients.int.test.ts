// The authorization server as the real MCP clients use it (issue 11 "Real clients"; spec 4.1, 4.3
// "OAuth endpoints", 5 rules 1, 2 and 6, 8; DECISIONS "OAuth authorization server"): each client
// registers the way it is known to (dynamic registration with its own metadata shape, or a client
// ID metadata document served from the test origin through the egress proxy), then runs the whole
// code flow: authorize with PKCE S256 and `resource` -> consent -> the redirect carries code, state
// and RFC 9207 iss -> token -> the JWT on POST /mcp -> refresh. Then what every client relies on:
// client ID metadata documents held to the registration rules and spec 8's size, URLs handed out
// on BASE_URL whatever the Host header, one client across two replicas, and the MCP protocol
// tolerance DECISIONS promises (protocol version header, newer-generation methods).
//
// Each test acts from its own address (fromAddress): spec 8's per-IP limits are counted per test,
// so this file never eats the 127.0.0.1 budget other files share. The limits themselves are in
// oauth-limits.int.test.ts.
import { randomBytes } from "node:crypto";
import { request as httpRequest } from "node:http";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Browser, type HostedHarness, readyOperator, startHosted } from "../hosted.ts";
import {
  approveAndExchange,
  authorizeAndConsent,
  BASE,
  forgetDocumentFetches,
  fromAddress,
  pathOf,
  pkcePair,
  RESOURCE,
  register,
  testAddress,
  token,
} from "./oauth-flow.ts";

let h: HostedHarness;

/** Client ID metadata documents the test origin serves, by their full URL. */
const documents = new Map<string, string | Buffer>();
/** Every document URL the origin was asked for (only the egress proxy can reach it). */
const fetched: { url: string; accept: string | undefined }[] = [];

beforeAll(async () => {
  h = await startHosted();
  await forgetDocumentFetches("docs.latch.test");
  h.egress.setHandler((req, res) => {
    const url = `https://${req.headers.host}${req.url}`;
    fetched.push({ url, accept: req.headers.accept });
    const body = documents.get(url);
    if (body === undefined) {
      res.statusCode = 404;
      res.end("not found");
      return;
    }
    res.setHeader("content-type", "application/json");
    res.end(body);
  });
});
afterAll(async () => {
  await h?.close();
});

/**
 * Serves `document` at `https://docs.latch.test<path>` with client_id = that URL; answers the URL.
 * Every fetch counts against spec 8's 30 per hour for docs.latch.test: this file makes about 22.
 */
function serveDocument(path: string, document: Record<string, unknown>): string {
  const url = `https://docs.latch.test${path}`;
  documents.set(url, JSON.stringify({ client_id: url, ...document }));
  return url;
}

/** A unique path per test run: oidc-provider caches a fetched document for at least 300 s. */
const unique = (name: string) => `/${randomBytes(4).toString("hex")}/${name}`;

interface Agent {
  /** The app as seen from this client's own address. */
  app: FastifyInstance;
  /** The operator's browser (signed in, past the authenticator step). */
  op: Browser;
}

async function newAgent(): Promise<Agent> {
  const app = fromAddress(h.app, testAddress());
  return { app, op: await readyOperator({ app, inbox: h.inbox, clock: h.clock }) };
}

function claimsOf(jwt: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt.split(".")[1] ?? "", "base64url").toString("utf8"));
}

async function mcp(
  app: FastifyInstance,
  accessToken: string,
  method: string,
  params: Record<string, unknown> = {},
  headers: Record<string, string> = {},
) {
  return app.inject({
    method: "POST",
    url: "/mcp",
    headers: {
      authorization: `Bearer ${accessToken}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...headers,
    },
    payload: JSON.stringify({ jsonrpc: "2.0", id: 7, method, params }),
  });
}

async function expectToolsList(app: FastifyInstance, accessToken: string) {
  const answer = await mcp(app, accessToken, "tools/list");
  expect(answer.statusCode, answer.body).toBe(200);
  const tools = (answer.json().result.tools as { name: string }[]).map((t) => t.name);
  expect(tools).toContain("http_request");
  expect(tools).toHaveLength(6);
}

/** What a client learns before it registers: the server's metadata from its well-known URL. */
async function discover(app: FastifyInstance) {
  const answer = await app.inject({ method: "GET", url: "/.well-known/oauth-authorization-server" });
  expect(answer.statusCode).toBe(200);
  return answer.json() as {
    issuer: string;
    registration_endpoint: string;
    client_id_metadata_document_supported?: boolean;
    authorization_response_iss_parameter_supported?: boolean;
    token_endpoint_auth_methods_supported?: string[];
  };
}

interface FlowOptions {
  clientId: string;
  /** The redirect URI sent on authorize and token (may differ from the registered one by port). */
  redirectUri: string;
  /** Whether the client sends `resource` on the token and refresh requests (Claude Code does). */
  resourceOnToken?: boolean;
  /** Extra authorize parameters. */
  extra?: Record<string, string>;
}

/**
 * The whole code flow as a client runs it: authorize with PKCE S256 and resource, consent, the
 * redirect back (code, state, iss), the token, tools/list with the JWT, then one refresh.
 */
async function codeFlow(agent: Agent, options: FlowOptions) {
  const pkce = pkcePair();
  const state = randomBytes(12).toString("base64url");
  const { code, redirect } = await authorizeAndConsent(agent.op, {
    clientId: options.clientId,
    redirectUri: options.redirectUri,
    challenge: pkce.challenge,
    extra: { state, ...options.extra },
  });
  // The browser goes back to exactly the redirect URI the client sent, with code, state and iss.
  expect(redirect.href.slice(0, redirect.href.indexOf("?"))).toBe(options.redirectUri);
  expect(code).toMatch(/\S{20,}/);
  expect(redirect.searchParams.get("state")).toBe(state);
  expect(redirect.searchParams.get("iss")).toBe(BASE);
  expect(redirect.searchParams.get("error")).toBeNull();

  const withResource: Record<string, string> =
    options.resourceOnToken === false ? {} : { resource: RESOURCE };
  const issued = await token(agent.app, {
    grant_type: "authorization_code",
    code: code!,
    redirect_uri: options.redirectUri,
    client_id: options.clientId,
    code_verifier: pkce.verifier,
    ...withResource,
  });
  expect(issued.statusCode, issued.body).toBe(200);
  const tokens = issued.json() as {
    access_token: string;
    refresh_token: string;
    token_type: string;
    expires_in: number;
    scope?: string;
  };
  expect(tokens.token_type.toLowerCase()).toBe("bearer");
  expect(tokens.expires_in).toBe(600);
  expect(typeof tokens.refresh_token).toBe("string");
  const claims = claimsOf(tokens.access_token);
  expect(claims.iss).toBe(BASE);
  expect(claims.aud).toBe(RESOURCE);
  expect(claims.client_id).toBe(options.clientId);
  expect(claims.scope).toBe("mcp");
  expect(typeof claims.org_id).toBe("string");
  await expectToolsList(agent.app, tokens.access_token);

  const refreshed = await token(agent.app, {
    grant_type: "refresh_token",
    refresh_token: tokens.refresh_token,
    client_id: options.clientId,
    ...withResource,
  });
  expect(refreshed.statusCode, refreshed.body).toBe(200);
  const next = refreshed.json() as { access_token: string; refresh_token: string };
  expect(next.refresh_token).not.toBe(tokens.refresh_token);
  expect(claimsOf(next.access_token).client_id).toBe(options.clientId);
  await expectToolsList(agent.app, next.access_token);
  return { tokens, refreshed: next, claims };
}

/** A dynamic registration as a client sends it; answers the new client's id. */
async function registerClient(
  agent: Agent,
  metadata: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<string> {
  const registered = await register(agent.app, metadata, headers);
  expect(registered.statusCode, registered.body).toBe(201);
  const client = registered.json();
  expect(client.client_id).toMatch(/^oac_/);
  expect(client.client_secret).toBeUndefined();
  expect(client.token_endpoint_auth_method).toBe("none");
  expect(client.redirect_uris).toEqual(metadata.redirect_uris);
  return client.client_id as string;
}

/** Opens /oauth/authorize for a client as the browser would; answers the raw response. */
async function openAuthorize(
  agent: Agent,
  clientId: string,
  redirectUri: string,
  headers: Record<string, string> = {},
) {
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
  return agent.op.request("GET", `/oauth/authorize?${query}`, undefined, headers);
}

const randomPort = () => 20_000 + (randomBytes(2).readUInt16BE() % 40_000);

describe("Claude Code", () => {
  const CC_GRANTS = { grant_types: ["authorization_code", "refresh_token"], response_types: ["code"] };

  it("uses its client ID metadata document when advertised; any loopback port; resource on authorize, token and refresh", async () => {
    const agent = await newAgent();
    expect((await discover(agent.app)).client_id_metadata_document_supported).toBe(true);
    const clientId = serveDocument(unique("oauth/claude-code-client-metadata"), {
      client_name: "Claude Code",
      client_uri: "https://claude.ai",
      redirect_uris: ["http://localhost/callback", "http://127.0.0.1/callback"],
      ...CC_GRANTS,
      token_endpoint_auth_method: "none",
    });
    const port = randomPort();
    await codeFlow(agent, { clientId, redirectUri: `http://localhost:${port}/callback` });
    // Fetched once, by the egress proxy, as JSON; the code, token and refresh used the cached copy.
    const fetches = fetched.filter((f) => f.url === clientId);
    expect(fetches).toHaveLength(1);
    expect(fetches[0]!.accept).toContain("application/json");
    // Consent is shown by the document's name; the Access view names the agent the same way.
    const clients = (await agent.op.request("GET", "/api/access")).json().clients as { name: string }[];
    expect(clients.map((c) => c.name)).toContain("Claude Code");
  });

  it("falls back to dynamic registration, authorizing on another port than it registered", async () => {
    const agent = await newAgent();
    const registeredPort = randomPort();
    const clientId = await registerClient(agent, {
      client_name: "Claude Code (latch)",
      redirect_uris: [`http://localhost:${registeredPort}/callback`],
      ...CC_GRANTS,
      token_endpoint_auth_method: "none",
    });
    await codeFlow(agent, {
      clientId,
      redirectUri: `http://localhost:${registeredPort + 1}/callback`,
    });
  });
});

describe("claude.ai and the Claude apps", () => {
  const REDIRECTS = ["https://claude.ai/api/mcp/auth_callback", "https://claude.com/api/mcp/auth_callback"];

  it("registers a new client per connection, and each one runs the flow on either callback", async () => {
    const agent = await newAgent();
    const metadata = {
      client_name: "Claude",
      redirect_uris: REDIRECTS,
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
      scope: "mcp",
    };
    const first = await registerClient(agent, metadata);
    const second = await registerClient(agent, metadata);
    expect(second).not.toBe(first);
    await codeFlow(agent, { clientId: first, redirectUri: REDIRECTS[0]! });
    await codeFlow(agent, { clientId: second, redirectUri: REDIRECTS[1]! });
  });

  it("connects with a client ID metadata document (a web client: https callbacks only)", async () => {
    const agent = await newAgent();
    // Claude uses a document only where the server advertises it and public clients (auth "none").
    const metadata = await discover(agent.app);
    expect(metadata.client_id_metadata_document_supported).toBe(true);
    expect(metadata.token_endpoint_auth_methods_supported).toContain("none");
    const clientId = serveDocument(unique("oauth/claude-ai-client-metadata"), {
      client_name: "Claude",
      client_uri: "https://claude.ai",
      redirect_uris: REDIRECTS,
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    });
    await codeFlow(agent, { clientId, redirectUri: REDIRECTS[1]! });
  });

  it("a web client's https callback must match exactly (no port or path games)", async () => {
    const agent = await newAgent();
    const clientId = await registerClient(agent, { client_name: "Claude", redirect_uris: REDIRECTS });
    for (const wrong of [
      "https://claude.ai:8443/api/mcp/auth_callback",
      "https://claude.ai/api/mcp/auth_callback/extra",
      "https://evil.example/api/mcp/auth_callback",
    ]) {
      const answer = await openAuthorize(agent, clientId, wrong);
      expect(answer.statusCode, wrong).toBe(400);
      expect(answer.headers.location).toBeUndefined();
    }
  });
});

describe("ChatGPT", () => {
  const REDIRECT = "https://chatgpt.com/connector_platform_oauth_redirect";

  it("prefers a client ID metadata document; the redirect carries RFC 9207 iss", async () => {
    const agent = await newAgent();
    const metadata = await discover(agent.app);
    expect(metadata.client_id_metadata_document_supported).toBe(true);
    expect(metadata.authorization_response_iss_parameter_supported).toBe(true);
    const clientId = serveDocument(unique("oauth/chatgpt-client-metadata.json"), {
      client_name: "ChatGPT",
      client_uri: "https://chatgpt.com",
      redirect_uris: [REDIRECT],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    });
    // The consent page names the client and both hosts the operator should recognise.
    const opened = await openAuthorize(agent, clientId, REDIRECT);
    expect(opened.statusCode, opened.body).toBe(303);
    const uid = new URL(pathOf(String(opened.headers.location)), BASE).searchParams.get("uid")!;
    const details = await agent.op.request("GET", `/consent/details?uid=${encodeURIComponent(uid)}`);
    expect(details.statusCode, details.body).toBe(200);
    expect(details.json().client).toEqual({
      name: "ChatGPT",
      metadata_host: "docs.latch.test",
      redirect_host: "chatgpt.com",
      redirect_target: "chatgpt.com",
    });
    const { tokens } = await codeFlow(agent, { clientId, redirectUri: REDIRECT });
    expect(tokens.access_token.split(".")).toHaveLength(3);

    // A denial goes back with iss too (RFC 9207 covers error responses), and no code.
    const denied = await authorizeAndConsent(agent.op, {
      clientId,
      redirectUri: REDIRECT,
      challenge: pkcePair().challenge,
      decision: "deny",
      extra: { state: "denied-state" },
    });
    expect(denied.code).toBeNull();
    expect(denied.redirect.searchParams.get("error")).toBe("access_denied");
    expect(denied.redirect.searchParams.get("state")).toBe("denied-state");
    expect(denied.redirect.searchParams.get("iss")).toBe(BASE);
  });

  it("falls back to dynamic registration", async () => {
    const agent = await newAgent();
    const clientId = await registerClient(agent, {
      client_name: "ChatGPT",
      redirect_uris: [REDIRECT],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    });
    // No scope on authorize (it asks for the one there is), no resource on the token calls (the
    // token is for the one resource there is).
    await codeFlow(agent, { clientId, redirectUri: REDIRECT, extra: { scope: "" }, resourceOnToken: false });
  });
});

describe("Cursor", () => {
  const REDIRECTS = [
    "cursor://anysphere.cursor-mcp/oauth/callback",
    "https://www.cursor.com/agents/mcp/oauth/callback",
    "http://localhost:8787/callback",
  ];

  it("registers its three callbacks in one registration and runs the flow on each", async () => {
    const agent = await newAgent();
    const clientId = await registerClient(
      agent,
      {
        client_name: "Cursor",
        redirect_uris: REDIRECTS,
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
        token_endpoint_auth_method: "none",
      },
      { "content-type": "application/json; charset=utf-8" },
    );
    const results = [];
    for (const redirectUri of REDIRECTS) results.push(await codeFlow(agent, { clientId, redirectUri }));

    // Cursor checks the initialize answer: serverInfo.version must be a string.
    const init = await mcp(agent.app, results[0]!.refreshed.access_token, "initialize", {
      protocolVersion: "2025-06-18",
      capabilities: { tools: {} },
      clientInfo: { name: "cursor-vscode", version: "1.0.0" },
    });
    expect(init.statusCode, init.body).toBe(200);
    const result = init.json().result;
    expect(typeof result.serverInfo.name).toBe("string");
    expect(typeof result.serverInfo.version).toBe("string");
    expect(result.serverInfo.version.length).toBeGreaterThan(0);
    expect(result.capabilities.tools).toBeDefined();
    // ... then says it is initialized (a notification: 202, no body) and lists the tools.
    const initialized = await agent.app.inject({
      method: "POST",
      url: "/mcp",
      headers: {
        authorization: `Bearer ${results[0]!.refreshed.access_token}`,
        "content-type": "application/json",
      },
      payload: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
    });
    expect(initialized.statusCode, initialized.body).toBe(202);
    expect(initialized.body).toBe("");
    await expectToolsList(agent.app, results[2]!.refreshed.access_token);
  });
});

describe("VS Code", () => {
  const DOC_SHAPE = {
    client_name: "Visual Studio Code",
    client_uri: "https://code.visualstudio.com",
    redirect_uris: ["https://vscode.dev/redirect", "http://127.0.0.1:33418/"],
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: "none",
  };

  it("connects with its client ID metadata document, on vscode.dev, 127.0.0.1:33418 and a random port", async () => {
    const agent = await newAgent();
    const clientId = serveDocument(unique("oauth/client-metadata.json"), DOC_SHAPE);
    await codeFlow(agent, { clientId, redirectUri: "https://vscode.dev/redirect" });
    await codeFlow(agent, { clientId, redirectUri: "http://127.0.0.1:33418/" });
    await codeFlow(agent, { clientId, redirectUri: `http://127.0.0.1:${randomPort()}/` });
    expect(fetched.filter((f) => f.url === clientId)).toHaveLength(1);
  });

  it("falls back to dynamic registration with the same callbacks", async () => {
    const agent = await newAgent();
    // VS Code's registration: both web hosts, portless loopback, and its default port for servers
    // that match exactly; it may also use the device flow.
    const clientId = await registerClient(agent, {
      client_name: "Visual Studio Code",
      client_uri: "https://code.visualstudio.com",
      redirect_uris: [
        "https://insiders.vscode.dev/redirect",
        "https://vscode.dev/redirect",
        "http://localhost/",
        "http://127.0.0.1/",
        "http://localhost:33418/",
        "http://127.0.0.1:33418/",
      ],
      grant_types: ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    });
    await codeFlow(agent, { clientId, redirectUri: `http://127.0.0.1:${randomPort()}/` });
    await codeFlow(agent, { clientId, redirectUri: "https://vscode.dev/redirect" });
    await codeFlow(agent, { clientId, redirectUri: `http://localhost:${randomPort()}/` });
  });
});

describe("URLs the server hands out are BASE_URL's, whatever Host a request came with", () => {
  // Behind a load balancer the Host header may be an internal name, or whatever a caller sent.
  const HOSTS = [undefined, "control-plane.internal:8080", "evil.example"];

  it("the device flow (VS Code's fallback) answers verification_uri BASE_URL/device", async () => {
    const app = fromAddress(h.app, testAddress());
    const registered = await register(app, {
      client_name: "Visual Studio Code",
      redirect_uris: ["https://vscode.dev/redirect"],
      grant_types: ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"],
    });
    expect(registered.statusCode, registered.body).toBe(201);
    for (const host of HOSTS) {
      const asked = await app.inject({
        method: "POST",
        url: "/oauth/device/auth",
        headers: { "content-type": "application/x-www-form-urlencoded", ...(host ? { host } : {}) },
        payload: new URLSearchParams({ client_id: registered.json().client_id }).toString(),
      });
      expect(asked.statusCode, asked.body).toBe(200);
      const body = asked.json();
      expect(body.verification_uri, `Host ${host}`).toBe(`${BASE}/device`);
      expect(body.verification_uri_complete, `Host ${host}`).toBe(
        `${BASE}/device?user_code=${body.user_code}`,
      );
    }
  });

  it("consent sends the browser back to BASE_URL's authorization endpoint", async () => {
    const agent = await newAgent();
    const redirectUri = "https://claude.ai/api/mcp/auth_callback";
    const clientId = await registerClient(agent, { client_name: "Claude", redirect_uris: [redirectUri] });
    for (const host of HOSTS) {
      const opened = await openAuthorize(agent, clientId, redirectUri, host ? { host } : {});
      expect(opened.statusCode, opened.body).toBe(303);
      const uid = new URL(pathOf(String(opened.headers.location)), BASE).searchParams.get("uid")!;
      const decided = await agent.op.request(
        "POST",
        "/consent",
        { uid, decision: "approve" },
        { accept: "application/json" },
      );
      expect(decided.statusCode, decided.body).toBe(200);
      const location = decided.json().location as string;
      expect(new URL(location, BASE).origin, `Host ${host}: ${location}`).toBe(BASE);
    }
  });

  it("a registration answers no management URI off BASE_URL", async () => {
    const app = fromAddress(h.app, testAddress());
    for (const host of HOSTS) {
      const registered = await register(
        app,
        { client_name: "Claude", redirect_uris: ["https://claude.ai/api/mcp/auth_callback"] },
        host ? { host } : {},
      );
      expect(registered.statusCode, registered.body).toBe(201);
      const uri = registered.json().registration_client_uri as string | undefined;
      if (uri !== undefined) expect(uri.startsWith(`${BASE}/`), `Host ${host}: ${uri}`).toBe(true);
    }
  });
});

describe("MCP Inspector", () => {
  const ORIGIN = "http://localhost:6274";
  const REDIRECTS = ["http://localhost:6274/oauth/callback", "http://127.0.0.1:6276/oauth/callback"];

  it("discovers from the 401 with CORS everywhere it calls from the browser, registers, and runs the flow", async () => {
    const agent = await newAgent();
    const cors = { origin: ORIGIN, "mcp-protocol-version": "2025-06-18" };

    // 1. The unauthenticated call: 401, Origin reflected, one quoted resource_metadata plus scope.
    const unauthorized = await agent.app.inject({
      method: "POST",
      url: "/mcp",
      headers: { ...cors, "content-type": "application/json" },
      payload: JSON.stringify({ jsonrpc: "2.0", id: 0, method: "initialize", params: {} }),
    });
    expect(unauthorized.statusCode).toBe(401);
    expect(unauthorized.headers["access-control-allow-origin"]).toBe(ORIGIN);
    const challenge = String(unauthorized.headers["www-authenticate"]);
    expect(challenge).toMatch(/^Bearer /);
    const metadataParams = [...challenge.matchAll(/resource_metadata=("?)([^",\s]*)\1/g)];
    expect(metadataParams).toHaveLength(1);
    expect(metadataParams[0]![1]).toBe('"');
    const resourceMetadataUrl = metadataParams[0]![2]!;
    expect(resourceMetadataUrl).toBe(`${BASE}/.well-known/oauth-protected-resource/mcp`);
    expect(challenge).toMatch(/(^|[\s,])scope="mcp"(,|$)/);
    // The SSE stream and the tool list answer the same challenge.
    for (const url of ["/mcp", "/mcp/tools"]) {
      const get = await agent.app.inject({ method: "GET", url, headers: cors });
      expect(get.statusCode, url).toBe(401);
      expect(get.headers["access-control-allow-origin"], url).toBe(ORIGIN);
      expect(get.headers["www-authenticate"], url).toBe(challenge);
    }

    // 2. The preflights and GETs of the well-known documents.
    const wellKnowns = [
      pathOf(resourceMetadataUrl),
      "/.well-known/oauth-protected-resource",
      "/.well-known/oauth-authorization-server",
      "/.well-known/openid-configuration",
    ];
    for (const url of wellKnowns) {
      const preflight = await agent.app.inject({
        method: "OPTIONS",
        url,
        headers: {
          origin: ORIGIN,
          "access-control-request-method": "GET",
          "access-control-request-headers": "mcp-protocol-version",
        },
      });
      expect(preflight.statusCode, url).toBeLessThan(300);
      expect(preflight.headers["access-control-allow-origin"], url).toBe(ORIGIN);
      expect(String(preflight.headers["access-control-allow-methods"]), url).toContain("GET");
      expect(String(preflight.headers["access-control-allow-headers"]).toLowerCase(), url).toContain(
        "mcp-protocol-version",
      );
      const got = await agent.app.inject({ method: "GET", url, headers: cors });
      expect(got.statusCode, url).toBe(200);
      expect(got.headers["access-control-allow-origin"], url).toBe(ORIGIN);
    }
    const resourceDoc = (
      await agent.app.inject({ method: "GET", url: pathOf(resourceMetadataUrl), headers: cors })
    ).json();
    expect(resourceDoc.resource).toBe(RESOURCE);
    expect(resourceDoc.authorization_servers).toEqual([BASE]);
    const asDoc = (
      await agent.app.inject({
        method: "GET",
        url: "/.well-known/oauth-authorization-server",
        headers: cors,
      })
    ).json();
    expect(asDoc.issuer).toBe(BASE);

    // 3. Registration from the browser: preflight, then the POST, Origin reflected on both.
    const preflightPost = async (url: string) => {
      const answer = await agent.app.inject({
        method: "OPTIONS",
        url,
        headers: {
          origin: ORIGIN,
          "access-control-request-method": "POST",
          "access-control-request-headers": "content-type",
        },
      });
      expect(answer.statusCode, url).toBeLessThan(300);
      expect(answer.headers["access-control-allow-origin"], url).toBe(ORIGIN);
      expect(String(answer.headers["access-control-allow-methods"]), url).toContain("POST");
      expect(String(answer.headers["access-control-allow-headers"]).toLowerCase(), url).toContain(
        "content-type",
      );
    };
    await preflightPost(pathOf(asDoc.registration_endpoint));
    const registered = await register(
      agent.app,
      {
        client_name: "MCP Inspector",
        client_uri: "https://github.com/modelcontextprotocol/inspector",
        scope: "mcp",
        redirect_uris: REDIRECTS,
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
        token_endpoint_auth_method: "none",
      },
      { origin: ORIGIN },
    );
    expect(registered.statusCode, registered.body).toBe(201);
    expect(registered.headers["access-control-allow-origin"]).toBe(ORIGIN);
    const clientId = registered.json().client_id as string;

    // 4. The flow on both callbacks; the token calls come from the browser page too.
    for (const redirectUri of REDIRECTS) await codeFlow(agent, { clientId, redirectUri });
    await preflightPost(pathOf(asDoc.token_endpoint));
    const pkce = pkcePair();
    const { code } = await authorizeAndConsent(agent.op, {
      clientId,
      redirectUri: REDIRECTS[0]!,
      challenge: pkce.challenge,
    });
    const issued = await agent.app.inject({
      method: "POST",
      url: "/oauth/token",
      headers: { origin: ORIGIN, "content-type": "application/x-www-form-urlencoded" },
      payload: new URLSearchParams({
        grant_type: "authorization_code",
        code: code!,
        redirect_uri: REDIRECTS[0]!,
        client_id: clientId,
        code_verifier: pkce.verifier,
        resource: RESOURCE,
      }).toString(),
    });
    expect(issued.statusCode, issued.body).toBe(200);
    expect(issued.headers["access-control-allow-origin"]).toBe(ORIGIN);

    // 5. /mcp from the page: the preflight and the call with the JWT.
    const mcpPreflight = await agent.app.inject({
      method: "OPTIONS",
      url: "/mcp",
      headers: {
        origin: ORIGIN,
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type, mcp-protocol-version",
      },
    });
    expect(mcpPreflight.statusCode).toBeLessThan(300);
    expect(mcpPreflight.headers["access-control-allow-origin"]).toBe(ORIGIN);
    const allowed = String(mcpPreflight.headers["access-control-allow-headers"]).toLowerCase();
    for (const header of ["authorization", "content-type", "mcp-protocol-version"]) {
      expect(allowed).toContain(header);
    }
    const listed = await mcp(agent.app, issued.json().access_token, "tools/list", {}, cors);
    expect(listed.statusCode, listed.body).toBe(200);
    expect(listed.headers["access-control-allow-origin"]).toBe(ORIGIN);

    // A refused exchange is readable by the page too: the code is spent, and its replay ends the
    // tokens it gave (RFC 6749 4.1.2).
    const replayed = await agent.app.inject({
      method: "POST",
      url: "/oauth/token",
      headers: { origin: ORIGIN, "content-type": "application/x-www-form-urlencoded" },
      payload: new URLSearchParams({
        grant_type: "authorization_code",
        code: code!,
        redirect_uri: REDIRECTS[0]!,
        client_id: clientId,
        code_verifier: pkce.verifier,
      }).toString(),
    });
    expect(replayed.statusCode).toBe(400);
    expect(replayed.json().error).toBe("invalid_grant");
    expect(replayed.headers["access-control-allow-origin"]).toBe(ORIGIN);

    const afterReplay = await mcp(agent.app, issued.json().access_token, "tools/list", {}, cors);
    expect(afterReplay.statusCode).toBe(401);
    expect(afterReplay.headers["access-control-allow-origin"]).toBe(ORIGIN);
  });
});

describe("client ID metadata documents", () => {
  it("a document naming only loopback redirects is a native client: the port is ignored", async () => {
    const agent = await newAgent();
    const clientId = serveDocument(unique("native-client.json"), {
      client_name: "A native agent",
      redirect_uris: ["http://127.0.0.1:3000/callback", "http://[::1]:3000/callback"],
      token_endpoint_auth_method: "none",
    });
    await codeFlow(agent, { clientId, redirectUri: `http://127.0.0.1:${randomPort()}/callback` });
    await codeFlow(agent, { clientId, redirectUri: `http://[::1]:${randomPort()}/callback` });
    // Only the port is free: another path or another host is not this client's redirect.
    for (const wrong of [`http://127.0.0.1:${randomPort()}/other`, "http://evil.example:3000/callback"]) {
      const answer = await openAuthorize(agent, clientId, wrong);
      expect(answer.statusCode, wrong).toBe(400);
      expect(answer.headers.location).toBeUndefined();
    }
  });

  /** Authorize with a document that must be refused: no consent, no redirect to the client. */
  async function expectRefusedDocument(agent: Agent, clientId: string, redirectUri: string) {
    const answer = await openAuthorize(agent, clientId, redirectUri);
    expect(answer.statusCode, answer.body).toBe(400);
    expect(answer.headers.location).toBeUndefined();
    expect(answer.body).toMatch(/invalid_client/);
    return answer;
  }

  it("refuses a document that carries a client secret or a secret-based auth method", async () => {
    const agent = await newAgent();
    const redirect = "https://agent.example/callback";
    const withSecret = serveDocument(unique("with-secret.json"), {
      client_name: "Secretive",
      redirect_uris: [redirect],
      client_secret: "a-shared-secret-the-client-chose",
    });
    await expectRefusedDocument(agent, withSecret, redirect);
    // One authorize is one fetch (spec 8 counts fetches): the refusal does not fetch it again.
    expect(fetched.filter((f) => f.url === withSecret)).toHaveLength(1);
    for (const method of ["client_secret_basic", "client_secret_post"]) {
      const clientId = serveDocument(unique(`${method}.json`), {
        client_name: "Secretive",
        redirect_uris: [redirect],
        token_endpoint_auth_method: method,
      });
      await expectRefusedDocument(agent, clientId, redirect);
    }
    // The same document without the secret connects, so the refusals were about the secret.
    const clean = serveDocument(unique("clean.json"), {
      client_name: "Secretive",
      redirect_uris: [redirect],
      token_endpoint_auth_method: "none",
    });
    await codeFlow(agent, { clientId: clean, redirectUri: redirect });
  });

  it("holds a document's redirect URIs to the registration rules (spec 5 rule 2)", async () => {
    const agent = await newAgent();
    for (const bad of [
      "javascript:alert(document.cookie)",
      "data:text/html,<script>alert(1)</script>",
      "file:///etc/passwd",
      "http://evil.example/callback",
      "https://agent.example/callback#fragment",
      // Refused at registration, so a document gets no more (oidc-provider alone lets these through).
      "ws://evil.example/callback",
      "mailto:someone@agent.example",
    ]) {
      const clientId = serveDocument(unique("bad-redirect.json"), {
        client_name: "Bad redirect",
        redirect_uris: ["https://agent.example/callback", bad],
        token_endpoint_auth_method: "none",
      });
      // Neither the bad URI nor the good one of the same document may be used.
      for (const redirectUri of [bad, "https://agent.example/callback"]) {
        const answer = await openAuthorize(agent, clientId, redirectUri);
        expect(answer.statusCode, `${bad} / ${redirectUri}: ${answer.body.slice(0, 200)}`).toBe(400);
        expect(answer.headers.location).toBeUndefined();
        expect(answer.body).toMatch(/\(invalid_(client|redirect_uri)\)/);
      }
    }
  });

  it("refuses a document whose client_id is not its own URL", async () => {
    const agent = await newAgent();
    const url = `https://docs.latch.test${unique("impostor.json")}`;
    documents.set(
      url,
      JSON.stringify({
        client_id: "https://claude.ai/oauth/claude-code-client-metadata",
        client_name: "Claude Code",
        redirect_uris: ["http://localhost/callback"],
      }),
    );
    await expectRefusedDocument(agent, url, "http://localhost:4000/callback");
  });

  it("refuses a client_id URL the proxy may not fetch as a bad client (400), never a server error", async () => {
    const agent = await newAgent();
    for (const clientId of [
      "https://docs.latch.test:8443/oauth/client.json",
      "https://127.0.0.1/oauth/client.json",
      "https://localhost/oauth/client.json",
    ]) {
      const answer = await openAuthorize(agent, clientId, "http://localhost:4000/callback");
      expect(answer.statusCode, `${clientId}: ${answer.body.slice(0, 200)}`).toBe(400);
      expect(answer.headers.location).toBeUndefined();
      expect(answer.body).toMatch(/invalid_client/);
      expect(fetched.some((f) => f.url.startsWith(clientId.slice(0, 24)))).toBe(false);
    }
  });

  it("refuses a document over 1 MiB, and accepts one of exactly 1 MiB", async () => {
    const agent = await newAgent();
    const redirect = "https://agent.example/callback";
    const sized = (path: string, bytes: number) => {
      const url = `https://docs.latch.test${path}`;
      const base = { client_id: url, client_name: "Large", redirect_uris: [redirect], x_padding: "" };
      const padding = bytes - JSON.stringify(base).length;
      const body = JSON.stringify({ ...base, x_padding: "a".repeat(padding) });
      expect(Buffer.byteLength(body)).toBe(bytes);
      documents.set(url, body);
      return url;
    };
    const tooLarge = sized(unique("large.json"), 1024 * 1024 + 1);
    await expectRefusedDocument(agent, tooLarge, redirect);
    expect(fetched.some((f) => f.url === tooLarge)).toBe(true);
    const atLimit = sized(unique("at-limit.json"), 1024 * 1024);
    const opened = await openAuthorize(agent, atLimit, redirect);
    expect(opened.statusCode, opened.body.slice(0, 300)).toBe(303);
    expect(pathOf(String(opened.headers.location))).toMatch(/^\/consent\?uid=/);
  });
});

describe("behind a load balancer (two replicas)", () => {
  let replica: HostedHarness;
  beforeAll(async () => {
    replica = await startHosted({ replicaOf: h });
  });
  afterAll(async () => {
    await replica?.close();
  });

  it("a client ID metadata document client authorizes on one replica and exchanges and refreshes on the other", async () => {
    const ip = testAddress();
    const onA: Agent = {
      app: fromAddress(h.app, ip),
      op: await readyOperator({ app: fromAddress(h.app, ip), inbox: h.inbox, clock: h.clock }),
    };
    const onB = fromAddress(replica.app, ip);
    const redirectUri = `http://localhost:${randomPort()}/callback`;
    const clientId = serveDocument(unique("oauth/claude-code-client-metadata"), {
      client_name: "Claude Code",
      redirect_uris: ["http://localhost/callback"],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    });
    const { tokens: issued } = await approveAndExchange(onA.op, onB, { clientId, redirectUri });
    // Replica B had its own copy of the document fetched (through the proxy, like A's).
    expect(fetched.filter((f) => f.url === clientId)).toHaveLength(2);
    await expectToolsList(onA.app, issued.access_token);
    const refreshed = await token(onA.app, {
      grant_type: "refresh_token",
      refresh_token: issued.refresh_token,
      client_id: clientId,
      resource: RESOURCE,
    });
    expect(refreshed.statusCode, refreshed.body).toBe(200);
    await expectToolsList(onB, refreshed.json().access_token);
    // The rotated refresh token is spent on both replicas.
    const replayed = await token(onB, {
      grant_type: "refresh_token",
      refresh_token: issued.refresh_token,
      client_id: clientId,
      resource: RESOURCE,
    });
    expect(replayed.json().error).toBe("invalid_grant");
  });
});

describe("MCP protocol tolerance (DECISIONS) with an OAuth access token", () => {
  let agent: Agent;
  let accessToken: string;
  beforeAll(async () => {
    agent = await newAgent();
    const redirectUri = "http://127.0.0.1:33418/callback";
    const clientId = await registerClient(agent, { client_name: "Tolerance", redirect_uris: [redirectUri] });
    accessToken = (await codeFlow(agent, { clientId, redirectUri })).refreshed.access_token;
  });

  it("initialize answers protocolVersion 2024-11-05 whatever the client asked for", async () => {
    for (const asked of ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]) {
      const answer = await mcp(
        agent.app,
        accessToken,
        "initialize",
        { protocolVersion: asked, capabilities: {}, clientInfo: { name: "tolerance", version: "1" } },
        { "mcp-protocol-version": asked },
      );
      expect(answer.statusCode, answer.body).toBe(200);
      expect(answer.json().result.protocolVersion).toBe("2024-11-05");
    }
  });

  it("an MCP-Protocol-Version header of another value is never a reason to refuse", async () => {
    for (const header of ["2025-06-18", "2025-11-25", "1999-01-01", "garbage", ""]) {
      const answer = await mcp(agent.app, accessToken, "tools/list", {}, { "mcp-protocol-version": header });
      expect(answer.statusCode, `${header}: ${answer.body}`).toBe(200);
      expect(answer.json().result.tools).toHaveLength(6);
    }
  });

  it("a duplicated MCP-Protocol-Version header (two header lines on the wire) is never refused", async () => {
    const url = new URL(await h.app.listen({ host: "127.0.0.1", port: 0 }));
    const frame = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} });
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(
        {
          host: url.hostname,
          port: url.port,
          path: "/mcp",
          method: "POST",
          headers: {
            authorization: `Bearer ${accessToken}`,
            "content-type": "application/json",
            "content-length": Buffer.byteLength(frame),
            // An array is sent as two header lines.
            "mcp-protocol-version": ["2025-06-18", "2024-11-05"],
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () =>
            resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }),
          );
        },
      );
      req.on("error", reject);
      req.end(frame);
    });
    expect(answer.status, answer.body).toBe(200);
    expect(JSON.parse(answer.body).result.tools).toHaveLength(6);
  });

  it("a newer-generation method such as server/discover answers JSON-RPC -32601 (so the client falls back)", async () => {
    const answer = await mcp(
      agent.app,
      accessToken,
      "server/discover",
      {},
      { "mcp-protocol-version": "2025-11-25" },
    );
    expect(answer.statusCode, answer.body).toBe(200);
    const body = answer.json();
    expect(body.jsonrpc).toBe("2.0");
    expect(body.id).toBe(7);
    expect(body.error.code).toBe(-32601);
    expect(body.result).toBeUndefined();
    // ... and the same token still initializes right after.
    const init = await mcp(agent.app, accessToken, "initialize", {
      protocolVersion: "2024-11-05",
      capabilities: {},
      clientInfo: { name: "fallback", version: "1" },
    });
    expect(init.json().result.protocolVersion).toBe("2024-11-05");
  });
});
