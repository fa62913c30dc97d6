// Redirect URIs (issue 21 item 1; spec 5 rule 2, DECISIONS "OAuth authorization server"; RFC 8252
// 7.1): a private-use scheme is an application's only when it is reverse-domain (it holds a period)
// or one of the real clients' own (cursor, vscode, vscode-insiders). Anything else, such as
// `x-evil://claude.ai/cb`, would let the consent page name a host the code never goes to: it is
// refused at dynamic registration and in a client metadata document, naming the URI, and one
// refused URI refuses the whole registration. The consent and device pages show a non-https
// redirect target whole, scheme included, and the device page says a self-chosen name is unverified.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Browser, type HostedHarness, readyOperator, startHosted } from "../hosted.ts";
import {
  consentUid,
  forgetDocumentFetches,
  fromAddress,
  openAuthorize,
  RESOURCE,
  register,
  testAddress,
} from "./oauth-flow.ts";

/** This file's own document host (spec 8 counts fetches per host). */
const DOCS = "redirects.latch.test";
let h: HostedHarness;
const documents = new Map<string, string>();

beforeAll(async () => {
  h = await startHosted({ providerHosts: [DOCS] });
  await forgetDocumentFetches(DOCS);
  h.egress.setHandler((req, res) => {
    const body = documents.get(`https://${req.headers.host}${req.url}`);
    res.statusCode = body === undefined ? 404 : 200;
    res.setHeader("content-type", "application/json");
    res.end(body ?? "{}");
  });
});
afterAll(async () => {
  await h?.close();
});

function serveDocument(document: Record<string, unknown>): string {
  const url = `https://${DOCS}/${randomBytes(5).toString("hex")}/client.json`;
  documents.set(url, JSON.stringify({ client_id: url, token_endpoint_auth_method: "none", ...document }));
  return url;
}

/** The consent details of an authorization opened in the operator's browser. */
async function consentDetails(op: Browser, clientId: string, redirectUri: string) {
  const uid = consentUid(await openAuthorize(op, clientId, redirectUri));
  const details = await op.request("GET", `/consent/details?uid=${uid}`);
  expect(details.statusCode, details.body).toBe(200);
  return details.json();
}

describe("dynamic registration", () => {
  it("refuses a private-use scheme that is not reverse-domain, naming the URI", async () => {
    for (const uri of ["x-evil://claude.ai/cb", "claude://claude.ai/cb", "myapp:/cb", "cursor2://cb"]) {
      const refused = await register(h.app, { client_name: "Claude", redirect_uris: [uri] });
      expect(refused.statusCode, uri).toBe(400);
      expect(refused.json().error).toBe("invalid_redirect_uri");
      expect(refused.json().error_description).toContain(JSON.stringify(uri));
      expect(refused.json().client_id).toBeUndefined();
    }
  });

  it("refuses a registration whole when one of its URIs is refused", async () => {
    const refused = await register(h.app, {
      client_name: "Mixed",
      redirect_uris: [
        "https://claude.ai/api/mcp/auth_callback",
        "x-evil://claude.ai/cb",
        "com.example.app:/cb",
      ],
    });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error_description).toContain('redirect_uris[1] "x-evil://claude.ai/cb"');
    expect(refused.json().error_description).toMatch(/refused whole/);
  });

  it("refuses a sector_identifier_uri or jwks_uri, fetching nothing (spec 8 counts every fetch)", async () => {
    const before = h.egress.origin.requests.length;
    for (const extra of [
      { sector_identifier_uri: `https://${DOCS}/sector.json` },
      { jwks_uri: `https://${DOCS}/jwks.json` },
    ]) {
      const refused = await register(h.app, {
        client_name: "Fetcher",
        redirect_uris: ["https://claude.ai/api/mcp/auth_callback"],
        ...extra,
      });
      expect(refused.statusCode, refused.body).toBe(400);
      expect(refused.json().error).toBe("invalid_client_metadata");
      expect(refused.json().error_description).toContain(Object.keys(extra)[0]);
    }
    expect(h.egress.origin.requests.length).toBe(before);
  });

  it("accepts reverse-domain schemes and the real clients' own", async () => {
    for (const uri of [
      "com.example.app:/oauth/callback",
      "com.example.app://callback",
      "cursor://anysphere.cursor-mcp/oauth/callback",
      "vscode://vscode.github-authentication/did-authenticate",
      "vscode-insiders://vscode.github-authentication/did-authenticate",
    ]) {
      const accepted = await register(h.app, { client_name: "Native", redirect_uris: [uri] });
      expect(accepted.statusCode, `${uri}: ${accepted.body}`).toBe(201);
    }
  });
});

describe("client ID metadata documents", () => {
  it("refuse a private-use scheme that is not reverse-domain, naming the URI", async () => {
    const op = await readyOperator({
      app: fromAddress(h.app, testAddress()),
      inbox: h.inbox,
      clock: h.clock,
    });
    const clientId = serveDocument({
      client_name: "Claude",
      redirect_uris: ["https://claude.ai/api/mcp/auth_callback", "x-evil://claude.ai/cb"],
    });
    for (const redirectUri of ["x-evil://claude.ai/cb", "https://claude.ai/api/mcp/auth_callback"]) {
      const answer = await openAuthorize(op, clientId, redirectUri);
      expect(answer.statusCode, answer.body.slice(0, 300)).toBe(400);
      expect(answer.headers.location).toBeUndefined();
      expect(answer.body).toContain("x-evil://claude.ai/cb");
    }
  });

  it("refuse a sector_identifier_uri, and the server fetches only the document itself", async () => {
    const op = await readyOperator({
      app: fromAddress(h.app, testAddress()),
      inbox: h.inbox,
      clock: h.clock,
    });
    const sector = `https://${DOCS}/${randomBytes(5).toString("hex")}/sector.json`;
    documents.set(sector, JSON.stringify(["https://claude.ai/api/mcp/auth_callback"]));
    const clientId = serveDocument({
      client_name: "Sector",
      redirect_uris: ["https://claude.ai/api/mcp/auth_callback"],
      sector_identifier_uri: sector,
    });
    const answer = await openAuthorize(op, clientId, "https://claude.ai/api/mcp/auth_callback");
    expect(answer.statusCode, answer.body.slice(0, 300)).toBe(400);
    expect(answer.body).toContain("sector_identifier_uri");
    expect(h.egress.origin.requests.map((r) => r.url)).not.toContain(new URL(sector).pathname);
  });

  it("accept a reverse-domain scheme, and the consent page shows it whole", async () => {
    const op = await readyOperator({
      app: fromAddress(h.app, testAddress()),
      inbox: h.inbox,
      clock: h.clock,
    });
    const redirectUri = "com.example.agent:/oauth/callback";
    const clientId = serveDocument({ client_name: "Example agent", redirect_uris: [redirectUri] });
    const details = await consentDetails(op, clientId, redirectUri);
    expect(details.client.redirect_target).toBe(redirectUri);
    expect(details.client.metadata_host).toBe(DOCS);
  });
});

describe("the consent page shows where the browser returns to", () => {
  it("an https redirect by its host; anything else whole, scheme included", async () => {
    const op = await readyOperator(h);
    for (const [redirectUri, shown] of [
      ["https://claude.ai/api/mcp/auth_callback", "claude.ai"],
      ["cursor://anysphere.cursor-mcp/oauth/callback", "cursor://anysphere.cursor-mcp/oauth/callback"],
      ["com.example.app:/cb", "com.example.app:/cb"],
      ["http://127.0.0.1:33418/callback", "http://127.0.0.1:33418/callback"],
    ] as const) {
      const clientId = (await register(h.app, { client_name: "Shown", redirect_uris: [redirectUri] })).json()
        .client_id as string;
      const details = await consentDetails(op, clientId, redirectUri);
      expect(details.client.redirect_target, redirectUri).toBe(shown);
    }
  });
});

describe("the device page", () => {
  /** The hidden xsrf field of the form oidc-provider renders on /device. */
  const xsrfOf = (html: string) => /name="xsrf" value="([^"]+)"/.exec(html)?.[1] ?? "";

  async function confirmationPage(registration: Record<string, unknown>) {
    const registered = await register(h.app, {
      grant_types: ["urn:ietf:params:oauth:grant-type:device_code", "refresh_token"],
      ...registration,
    });
    expect(registered.statusCode, registered.body).toBe(201);
    const clientId = registered.json().client_id as string;
    const asked = await h.app.inject({
      method: "POST",
      url: "/oauth/device/auth",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      payload: new URLSearchParams({ client_id: clientId, scope: "mcp", resource: RESOURCE }).toString(),
    });
    expect(asked.statusCode, asked.body).toBe(200);
    const op = await readyOperator(h);
    const page = await op.request("GET", "/device");
    const entered = await h.app.inject({
      method: "POST",
      url: "/device",
      remoteAddress: testAddress(),
      headers: {
        cookie: [...op.cookies].map(([k, v]) => `${k}=${v}`).join("; "),
        "content-type": "application/x-www-form-urlencoded",
      },
      payload: new URLSearchParams({ xsrf: xsrfOf(page.body), user_code: asked.json().user_code }).toString(),
    });
    expect(entered.statusCode, entered.body.slice(0, 300)).toBe(200);
    return entered.body;
  }

  it("says a name the client chose for itself is unverified, as the consent page does", async () => {
    const body = await confirmationPage({ client_name: "Claude" });
    expect(body).toContain("Claude");
    expect(body).toContain("registered itself with this name (unverified)");
  });

  it("shows a registered redirect that is not https whole, scheme included", async () => {
    const body = await confirmationPage({
      client_name: "Cursor",
      redirect_uris: ["cursor://anysphere.cursor-mcp/oauth/callback", "https://cursor.com/callback"],
    });
    expect(body).toContain("cursor://anysphere.cursor-mcp/oauth/callback");
    expect(body).toContain("cursor.com");
  });
});
