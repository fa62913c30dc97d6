// Issue 11 "Done when": the official MCP SDK client, given nothing but the MCP URL of a listening
// plane, goes 401 -> discovery -> dynamic registration -> consent in headless Chromium (the real
// pages and a real sign-in: email code and authenticator) -> token -> tools/list and an approved
// http_request with the JWT; then a refresh, and the replayed refresh token (reuse) ends the grant
// and every access token of it (spec 5 rule 1). Revocation and client revoke: oauth-server.int.test.ts.
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type OAuthClientProvider, UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from "@modelcontextprotocol/sdk/shared/auth.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type BrowserRig, saveScreenshot, skipBrowserTests, startBrowserRig } from "../chromium.ts";
import { lastCodeFor, signUpOperator, toolAnswer } from "../hosted.ts";
import { forgetRegistrations } from "./oauth-flow.ts";

const SECRET = "sk_live_oauth_e2e_canary_51c8";

/** A desktop client: a loopback redirect it listens on, tokens kept in memory. */
class LoopbackClient implements OAuthClientProvider {
  client?: OAuthClientInformationMixed;
  saved?: OAuthTokens;
  verifier = "";
  authorizationUrl?: URL;
  readonly redirectUrl: string;
  constructor(redirectUrl: string) {
    this.redirectUrl = redirectUrl;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: "E2E desktop agent",
      redirect_uris: [this.redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.client = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

describe.skipIf(skipBrowserTests)(
  "an MCP SDK client connects with OAuth from nothing but the MCP URL",
  () => {
    let rig: BrowserRig;
    let callback: Server;
    let codes: URL[];
    beforeAll(async () => {
      rig = await startBrowserRig();
      codes = [];
      // The client's loopback redirect listener (what Claude Code or VS Code run).
      callback = createServer((req, res) => {
        // Only the redirect counts (a browser may also ask this origin for /favicon.ico).
        const url = new URL(req.url ?? "/", "http://127.0.0.1");
        if (url.pathname === "/callback") codes.push(url);
        res.writeHead(200, { "content-type": "text/plain" }).end("You can close this window.");
      });
      callback.listen(0, "127.0.0.1");
      await once(callback, "listening");
      rig.h.egress.setHandler((_req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ ok: true }));
      });
    }, 120_000);
    afterAll(async () => {
      callback?.close();
      await rig?.close();
    });

    it("registers, consents in Chromium, calls tools, refreshes, and a replayed refresh token ends its access", async () => {
      const { h, base } = rig;
      // The operator: an account with an authenticator and a stored credential.
      const { browser: op, email, totp } = await signUpOperator(h, { label: "oauth-e2e", origin: base });
      const stored = await op.request("POST", "/api/items", {
        name: "API_KEY",
        value: SECRET,
        environment: "staging",
        allowed_hosts: ["api.latch.test"],
      });
      expect(stored.statusCode, stored.body).toBe(201);

      // 1. The SDK client: 401, discovery, registration, then it hands us the authorization URL.
      // It really connects from 127.0.0.1, whose registrations an earlier run may have counted.
      await forgetRegistrations("127.0.0.1");
      const port = (callback.address() as AddressInfo).port;
      const provider = new LoopbackClient(`http://127.0.0.1:${port}/callback`);
      const mcpUrl = new URL(`${base}/mcp`);
      const first = new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider });
      await expect(new Client({ name: "e2e", version: "1.0.0" }).connect(first)).rejects.toBeInstanceOf(
        UnauthorizedError,
      );
      expect(provider.client?.client_id).toMatch(/^oac_/);
      const authorizationUrl = provider.authorizationUrl!;
      expect(authorizationUrl.origin).toBe(base);
      expect(authorizationUrl.searchParams.get("code_challenge_method")).toBe("S256");

      // 2. Chromium: the authorization sends a signed-out browser to sign in, then back to consent.
      const context = await rig.browser.newContext();
      const page = await context.newPage();
      const problems: string[] = [];
      page.on("pageerror", (error) => problems.push(error.message));
      await page.goto(authorizationUrl.toString());
      await page.waitForURL(/\/sign-in\?return_to=/);
      const before = h.inbox.mails.filter((m) => m.to === email).length;
      await page.getByLabel("Email address").fill(email);
      await page.getByRole("button", { name: "Email me a code" }).click();
      await page.getByLabel("8-digit code from the email").waitFor({ state: "visible" });
      await expect.poll(() => h.inbox.mails.filter((m) => m.to === email).length).toBeGreaterThan(before);
      await page.getByLabel("8-digit code from the email").fill(lastCodeFor(h.inbox, email));
      await page.getByRole("button", { name: "Sign in", exact: true }).click();
      await page.waitForURL(/\/verify-totp/);
      // A code once used is refused again: the next one, 30 s later on the plane's clock.
      h.clock.advance(30_000);
      await page.locator("#code").fill(totp.generate({ timestamp: h.clock.now.getTime() }));
      await page.locator("#code").press("Enter");
      await page.waitForURL(/\/consent\?uid=/).catch(async (error) => {
        throw new Error(
          `consent not reached; at ${page.url()}: ${await page.locator("#status").textContent()}`,
          { cause: error },
        );
      });
      await expect.poll(() => page.locator("#client-name").textContent()).toBe("E2E desktop agent");
      // Not https: shown whole, scheme and port included (issue 21 item 1).
      expect(await page.locator("#redirect-host").textContent()).toBe(`http://127.0.0.1:${port}/callback`);
      expect(await page.locator("#organisation option").count()).toBe(1);
      // The operator picks the environment the agent acts in (issue 21 item 5); staging here.
      expect(await page.locator("#environment option").allTextContents()).toEqual(["staging", "production"]);
      await page.getByLabel("Environment it acts in").selectOption("staging");
      await saveScreenshot(page, `oauth-consent.png`);
      // As an operator reads it: a click in the first second the form shows approves nothing
      // (consent.js, double-clickjacking).
      await page.waitForTimeout(1_000);
      await page.getByRole("button", { name: "Approve" }).click();
      await expect.poll(() => codes.length).toBe(1);
      expect(problems).toEqual([]);
      const redirect = codes[0]!;
      expect(redirect.searchParams.get("iss")).toBe(base);
      await context.close();

      // 3. Back in the client: the code for tokens, then MCP with the JWT.
      await first.finishAuth(redirect.searchParams.get("code")!);
      expect(provider.saved?.token_type.toLowerCase()).toBe("bearer");
      expect(provider.saved?.refresh_token).toBeTruthy();
      const agent = new Client({ name: "e2e", version: "1.0.0" });
      await agent.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider }));
      expect((await agent.listTools()).tools.map((t) => t.name)).toContain("http_request");

      // 4. An http_request: pending until the operator approves it, then it goes out once.
      const ask = { item_name: "API_KEY", method: "GET", path: "/v1/me" };
      const pending = toolAnswer(await agent.callTool({ name: "http_request", arguments: ask }));
      expect(pending.status).toBe("pending");
      const inbox = (await op.request("GET", "/api/inbox")).json();
      const request = inbox.approvals.find((g: { grant_id?: string }) => g.grant_id === pending.grant_id);
      // The OAuth client is the agent, by the name it registered with.
      expect(JSON.stringify(request)).toContain("E2E desktop agent");
      const approved = await op.request("POST", `/api/grants/${pending.grant_id}/approve`, {
        policy: "prompt",
      });
      expect(approved.statusCode, approved.body).toBe(200);
      const answered = toolAnswer(await agent.callTool({ name: "http_request", arguments: ask }));
      expect(answered.origin_status).toBe(200);
      expect(JSON.stringify(answered)).not.toContain(SECRET);
      // The audit and Access name the agent as it registered.
      const events = (await op.request("GET", "/api/audit")).json().events as {
        action: string;
        actor_name: string | null;
      }[];
      expect(events.find((e) => e.action === "http_request")?.actor_name).toBe("E2E desktop agent");
      const access = (await op.request("GET", "/api/access")).json();
      expect(access.clients.map((c: { name: string }) => c.name)).toContain("E2E desktop agent");
      expect(access.clients.find((c: { name: string }) => c.name === "E2E desktop agent").environment).toBe(
        "staging",
      );

      // 5. Refresh: a new pair; the old refresh token replayed ends the grant and its access tokens.
      const firstTokens = provider.saved!;
      const refreshed = await fetch(`${base}/oauth/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          grant_type: "refresh_token",
          refresh_token: firstTokens.refresh_token!,
          client_id: provider.client!.client_id,
          resource: `${base}/mcp`,
        }),
      });
      expect(refreshed.status).toBe(200);
      const second = (await refreshed.json()) as OAuthTokens;
      const listWith = async (accessToken: string) =>
        (
          await fetch(`${base}/mcp`, {
            method: "POST",
            headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json" },
            body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
          })
        ).status;
      expect(await listWith(second.access_token)).toBe(200);
      const replayed = await fetch(`${base}/oauth/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          grant_type: "refresh_token",
          refresh_token: firstTokens.refresh_token!,
          client_id: provider.client!.client_id,
        }),
      });
      expect(replayed.status).toBe(400);
      expect(((await replayed.json()) as { error: string }).error).toBe("invalid_grant");
      expect(await listWith(second.access_token)).toBe(401);
      expect(await listWith(firstTokens.access_token)).toBe(401);
    }, 120_000);
  },
);
