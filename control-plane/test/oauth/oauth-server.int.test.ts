// The authorization server end to end through the real routes (spec 4.3 "OAuth endpoints", 5 rules
// 1 and 2, DECISIONS "OAuth authorization server"): registration rules, the code flow with PKCE
// and consent bound to an organisation, the JWT on /mcp, refresh rotation and reuse detection,
// revocation, and client revoke (spec 3.4).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jtiHash } from "../../src/oauth/access-tokens.ts";
import { type HostedHarness, readyOperator, startHosted } from "../hosted.ts";
import { approveAndExchange, BASE, mcpWith, pkcePair, RESOURCE, register, token } from "./oauth-flow.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
});
afterAll(async () => {
  await h?.close();
});

const mcp = (accessToken: string, method?: string) => mcpWith(h.app, accessToken, method);

/** A refresh at /oauth/token with `refreshToken`, as client `clientId`. */
const refresh = (clientId: string, refreshToken: string) =>
  token(h.app, { grant_type: "refresh_token", refresh_token: refreshToken, client_id: clientId });

async function connectedClient(redirectUri = "http://127.0.0.1:33418/callback") {
  const op = await readyOperator(h);
  const registered = await register(h.app, { client_name: "Test agent", redirect_uris: [redirectUri] });
  expect(registered.statusCode).toBe(201);
  const clientId = registered.json().client_id as string;
  const { tokens } = await approveAndExchange(op, h.app, { clientId, redirectUri });
  return {
    op,
    clientId,
    tokens,
  };
}

describe("discovery", () => {
  it("serves RFC 8414 metadata with issuer exactly BASE_URL, reflecting Origin", async () => {
    for (const url of ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"]) {
      const answer = await h.app.inject({ method: "GET", url, headers: { origin: "https://claude.ai" } });
      expect(answer.statusCode).toBe(200);
      expect(answer.headers["access-control-allow-origin"]).toBe("https://claude.ai");
      const doc = answer.json();
      expect(doc.issuer).toBe(BASE);
      expect(doc.response_types_supported).toEqual(["code"]);
      expect(doc.code_challenge_methods_supported).toEqual(["S256"]);
      expect(doc.token_endpoint_auth_methods_supported).toEqual(["none"]);
      expect(doc.scopes_supported).toEqual(["mcp"]);
      expect(doc.client_id_metadata_document_supported).toBe(true);
      expect(doc.authorization_response_iss_parameter_supported).toBe(true);
    }
  });
});

describe("the code flow", () => {
  it("issues a 600 s RS256 JWT for BASE_URL/mcp that /mcp accepts", async () => {
    const { tokens } = await connectedClient();
    expect(tokens.expires_in).toBe(600);
    const [header, payload] = tokens.access_token
      .split(".")
      .slice(0, 2)
      .map((p) => JSON.parse(Buffer.from(p, "base64url").toString()));
    expect(header.alg).toBe("RS256");
    expect(payload.aud).toBe(RESOURCE);
    expect(payload.iss).toBe(BASE);
    expect(typeof payload.org_id).toBe("string");
    expect(payload.scope).toBe("mcp");
    expect(payload.exp - payload.iat).toBe(600);
    const answer = await mcp(tokens.access_token);
    expect(answer.statusCode, answer.body).toBe(200);
    expect(answer.json().result.tools.length).toBe(6);
  });

  it("rotates refresh tokens, and a replayed one ends the grant and its access tokens", async () => {
    const { clientId, tokens } = await connectedClient();
    const first = await refresh(clientId, tokens.refresh_token);
    expect(first.statusCode, first.body).toBe(200);
    const rotated = first.json();
    expect(rotated.refresh_token).not.toBe(tokens.refresh_token);
    expect((await mcp(rotated.access_token)).statusCode).toBe(200);
    const replay = await refresh(clientId, tokens.refresh_token);
    expect(replay.statusCode).toBe(400);
    expect(replay.json().error).toBe("invalid_grant");
    expect((await mcp(rotated.access_token)).statusCode).toBe(401);
    const after = await refresh(clientId, rotated.refresh_token);
    expect(after.json().error).toBe("invalid_grant");
  });

  it("records every token it issues in the Access ledger, by a hash of its jti (spec 6)", async () => {
    const { op, clientId, tokens } = await connectedClient();
    const jtiOf = (jwt: string) =>
      (JSON.parse(Buffer.from(jwt.split(".")[1]!, "base64url").toString()) as { jti: string }).jti;
    const issued = async () =>
      (
        (await op.request("GET", "/api/access/events")).json().events as {
          action: string;
          jti_hash?: string;
        }[]
      )
        .filter((e) => e.action === "oauth_token_issued")
        .map((e) => e.jti_hash);
    await expect.poll(issued).toEqual([jtiHash(jtiOf(tokens.access_token)).slice(0, 24)]);
    const fresh = (await refresh(clientId, tokens.refresh_token)).json();
    await expect.poll(async () => (await issued()).length).toBe(2);
    expect(await issued()).toContain(jtiHash(jtiOf(fresh.access_token)).slice(0, 24));
    // Only the hash: the jti itself never appears.
    expect(JSON.stringify((await op.request("GET", "/api/access/events")).json())).not.toContain(
      jtiOf(fresh.access_token),
    );
  });

  it("refuses a refresh for another resource without spending the refresh token", async () => {
    const { clientId, tokens } = await connectedClient();
    const wrong = await token(h.app, {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token,
      client_id: clientId,
      resource: "https://evil.example/mcp",
    });
    expect(wrong.statusCode).toBe(400);
    expect(wrong.json().error).toBe("invalid_target");
    const right = await token(h.app, {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token,
      client_id: clientId,
      resource: RESOURCE,
    });
    expect(right.statusCode, right.body).toBe(200);
  });

  it("revokes a JWT access token by its jti, and a refresh token with every access token of it", async () => {
    const { op, clientId, tokens } = await connectedClient();
    const revokeForm = (value: string) =>
      h.app.inject({
        method: "POST",
        url: "/oauth/revoke",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        payload: new URLSearchParams({ token: value, client_id: clientId }).toString(),
      });
    expect((await revokeForm(tokens.access_token)).statusCode).toBe(200);
    expect((await mcp(tokens.access_token)).statusCode).toBe(401);
    // Recorded in the Access ledger, by a hash of the jti, marked as a revocation.
    const ledger = (await op.request("GET", "/api/access/events")).json();
    const revoked = JSON.stringify(ledger);
    expect(revoked).toContain("oauth_token_revoked");
    const fresh = (await refresh(clientId, tokens.refresh_token)).json();
    expect((await mcp(fresh.access_token)).statusCode).toBe(200);
    expect((await revokeForm(fresh.refresh_token)).statusCode).toBe(200);
    expect((await mcp(fresh.access_token)).statusCode).toBe(401);
    const dead = await refresh(clientId, fresh.refresh_token);
    expect(dead.json().error).toBe("invalid_grant");
  });

  it("client revoke in the console ends the agent's tokens and refresh (invalid_grant)", async () => {
    const { op, clientId, tokens } = await connectedClient();
    const clients = (await op.request("GET", "/api/access")).json().clients as {
      client_id: string;
      name: string;
    }[];
    const row = clients.find((c) => c.name === "Test agent") as
      | { client_id: string; oauth?: boolean }
      | undefined;
    expect(row?.oauth).toBe(true);
    // No bearer of ours to rotate: refused, and nothing changes.
    const rotated = await op.request("POST", `/api/clients/${row!.client_id}/rotate`, {});
    expect(rotated.statusCode).toBe(400);
    expect((await mcp(tokens.access_token)).statusCode).toBe(200);
    expect((await op.request("POST", `/api/clients/${row!.client_id}/revoke`, {})).statusCode).toBe(200);
    expect((await mcp(tokens.access_token)).statusCode).toBe(401);
    const refreshed = await refresh(clientId, tokens.refresh_token);
    expect(refreshed.json().error).toBe("invalid_grant");
  });
});

describe("registration", () => {
  it("refuses a client secret and bad redirect URIs, naming the URI", async () => {
    const secret = await register(h.app, {
      redirect_uris: ["https://a.example/cb"],
      token_endpoint_auth_method: "client_secret_basic",
    });
    expect(secret.statusCode).toBe(400);
    expect(secret.json().error).toBe("invalid_client_metadata");
    for (const uri of [
      "javascript:alert(1)",
      "data:text/html,x",
      "file:///etc/passwd",
      "http://evil.example/cb",
    ]) {
      const refused = await register(h.app, { redirect_uris: ["https://ok.example/cb", uri] });
      expect(refused.statusCode).toBe(400);
      expect(refused.json().error).toBe("invalid_redirect_uri");
      expect(refused.json().error_description).toContain("redirect_uris[1]");
    }
  });
});

describe("consent", () => {
  it("answers the script 200 {location}, a CSRF header without JSON 303, a form without the header 403", async () => {
    const op = await readyOperator(h);
    const redirectUri = "http://127.0.0.1:9/cb";
    const clientId = (await register(h.app, { client_name: "Contract", redirect_uris: [redirectUri] })).json()
      .client_id;
    const start = async () => {
      const query = new URLSearchParams({
        client_id: clientId,
        redirect_uri: redirectUri,
        response_type: "code",
        code_challenge: pkcePair().challenge,
        code_challenge_method: "S256",
        scope: "mcp",
      });
      const started = await op.request("GET", `/oauth/authorize?${query}`);
      return new URL(String(started.headers.location), BASE).searchParams.get("uid")!;
    };
    // A plain form post: no X-CSRF-Token, so 403 before its body is even read.
    const uid = await start();
    const cookie = [...op.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
    const form = await h.app.inject({
      method: "POST",
      url: "/consent",
      headers: { cookie, origin: BASE, "content-type": "application/x-www-form-urlencoded" },
      payload: new URLSearchParams({ uid, decision: "approve" }).toString(),
    });
    expect(form.statusCode).toBe(403);
    // The header without Accept: application/json: a 303 to where the authorization resumes.
    const redirected = await op.request(
      "POST",
      "/consent",
      { uid, decision: "approve" },
      { accept: "text/html" },
    );
    expect(redirected.statusCode).toBe(303);
    expect(String(redirected.headers.location)).toBe(`${BASE}/oauth/authorize/${uid}`);
    // The script's way: 200 {location}; a denial resumes too and the client gets access_denied.
    const second = await start();
    const denied = await op.request(
      "POST",
      "/consent",
      { uid: second, decision: "deny" },
      { accept: "application/json" },
    );
    expect(denied.statusCode).toBe(200);
    const back = await op.request("GET", new URL(denied.json().location).pathname);
    const redirect = new URL(String(back.headers.location));
    expect(redirect.searchParams.get("error")).toBe("access_denied");
    expect(redirect.searchParams.get("iss")).toBe(BASE);
  });

  it("binds the consent to the organisation chosen: revoking the client in one leaves the other", async () => {
    const op = await readyOperator(h);
    const redirectUri = "http://127.0.0.1:9/cb2";
    const clientId = (await register(h.app, { client_name: "Two orgs", redirect_uris: [redirectUri] })).json()
      .client_id;
    const connect = async (organisationId?: string) =>
      (
        await approveAndExchange(op, h.app, {
          clientId,
          redirectUri,
          ...(organisationId ? { organisationId } : {}),
        })
      ).tokens;
    const inFirst = await connect();
    const claimsOf = (jwt: string) => JSON.parse(Buffer.from(jwt.split(".")[1]!, "base64url").toString());
    const firstOrgId = claimsOf(inFirst.access_token).org_id as string;
    // A second organisation: the session now acts in it, and the consent there is its own.
    const created = await op.request("POST", "/api/orgs", { name: "Second org" });
    expect(created.statusCode).toBe(201);
    const secondOrgId = created.json().organisation.id as string;
    const inSecond = await connect(secondOrgId);
    expect(claimsOf(inSecond.access_token).org_id).toBe(secondOrgId);
    expect(firstOrgId).not.toBe(secondOrgId);
    const rows = (await op.request("GET", "/api/access")).json().clients as {
      client_id: string;
      name: string;
    }[];
    const row = rows.find((c) => c.name === "Two orgs")!;
    expect((await op.request("POST", `/api/clients/${row.client_id}/revoke`, {})).statusCode).toBe(200);
    expect((await mcp(inSecond.access_token)).statusCode).toBe(401);
    expect((await mcp(inFirst.access_token)).statusCode).toBe(200);
    const refreshFirst = await refresh(clientId, inFirst.refresh_token);
    expect(refreshFirst.statusCode).toBe(200);
    const refreshSecond = await refresh(clientId, inSecond.refresh_token);
    expect(refreshSecond.json().error).toBe("invalid_grant");
    // The ledger of the second organisation marks the revocation.
    const ledger = (await op.request("GET", "/api/access/events")).json();
    expect(JSON.stringify(ledger)).toContain("client_revoked");
  });
});

describe("response modes (issue 21 item 4)", () => {
  it("accepts only query, the one advertised; fragment and form_post are refused without a redirect", async () => {
    const op = await readyOperator(h);
    const redirectUri = "http://127.0.0.1:9/modes";
    const clientId = (await register(h.app, { client_name: "Modes", redirect_uris: [redirectUri] })).json()
      .client_id as string;
    const open = (extra: Record<string, string>) =>
      op.request(
        "GET",
        `/oauth/authorize?${new URLSearchParams({
          client_id: clientId,
          redirect_uri: redirectUri,
          response_type: "code",
          code_challenge: pkcePair().challenge,
          code_challenge_method: "S256",
          scope: "mcp",
          ...extra,
        })}`,
      );
    for (const mode of ["fragment", "form_post", "web_message", "query.jwt", "jwt", ""]) {
      const refused = await open({ response_mode: mode });
      expect(refused.statusCode, `${mode}: ${refused.body.slice(0, 200)}`).toBe(400);
      expect(refused.headers.location).toBeUndefined();
      expect(refused.body).toContain("(unsupported_response_mode)");
    }
    for (const extra of [{ response_mode: "query" }, {}] as Record<string, string>[]) {
      const accepted = await open(extra);
      expect(accepted.statusCode, accepted.body.slice(0, 200)).toBe(303);
      expect(String(accepted.headers.location)).toMatch(/\/consent\?uid=/);
    }
  });
});

describe("registration answers (issue 21 item 4)", () => {
  it("hand out no RFC 7592 registration_access_token or management URI (the endpoint is not served)", async () => {
    const registered = await register(h.app, {
      client_name: "No management",
      redirect_uris: ["https://agent.example/cb"],
    });
    expect(registered.statusCode).toBe(201);
    expect(registered.json().client_id).toMatch(/^oac_/);
    expect(registered.json()).not.toHaveProperty("registration_access_token");
    expect(registered.json()).not.toHaveProperty("registration_client_uri");
  });
});
