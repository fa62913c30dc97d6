// The authorization server end to end through the real routes (spec 4.3 "OAuth endpoints", 5 rules
// 1 and 2, DECISIONS "OAuth authorization server"): registration rules, the code flow with PKCE
// and consent bound to an organisation, the JWT on /mcp, refresh rotation and reuse detection,
// revocation, and client revoke (spec 3.4).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HostedHarness, readyOperator, startHosted } from "../hosted.ts";
import { authorizeAndConsent, BASE, pkcePair, RESOURCE, register, token } from "./oauth-flow.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
});
afterAll(async () => {
  await h?.close();
});

async function mcp(accessToken: string, method = "tools/list") {
  return h.app.inject({
    method: "POST",
    url: "/mcp",
    headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json" },
    payload: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: {} }),
  });
}

async function connectedClient(redirectUri = "http://127.0.0.1:33418/callback") {
  const op = await readyOperator(h);
  const registered = await register(h.app, { client_name: "Test agent", redirect_uris: [redirectUri] });
  expect(registered.statusCode).toBe(201);
  const clientId = registered.json().client_id as string;
  const pkce = pkcePair();
  const { code, redirect } = await authorizeAndConsent(op, {
    clientId,
    redirectUri,
    challenge: pkce.challenge,
  });
  expect(redirect.searchParams.get("iss")).toBe(BASE);
  const issued = await token(h.app, {
    grant_type: "authorization_code",
    code: code!,
    redirect_uri: redirectUri,
    client_id: clientId,
    code_verifier: pkce.verifier,
    resource: RESOURCE,
  });
  expect(issued.statusCode, issued.body).toBe(200);
  return {
    op,
    clientId,
    tokens: issued.json() as { access_token: string; refresh_token: string; expires_in: number },
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
    const first = await token(h.app, {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token,
      client_id: clientId,
    });
    expect(first.statusCode, first.body).toBe(200);
    const rotated = first.json();
    expect(rotated.refresh_token).not.toBe(tokens.refresh_token);
    expect((await mcp(rotated.access_token)).statusCode).toBe(200);
    const replay = await token(h.app, {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token,
      client_id: clientId,
    });
    expect(replay.statusCode).toBe(400);
    expect(replay.json().error).toBe("invalid_grant");
    expect((await mcp(rotated.access_token)).statusCode).toBe(401);
    const after = await token(h.app, {
      grant_type: "refresh_token",
      refresh_token: rotated.refresh_token,
      client_id: clientId,
    });
    expect(after.json().error).toBe("invalid_grant");
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
    const { clientId, tokens } = await connectedClient();
    const revokeForm = (value: string) =>
      h.app.inject({
        method: "POST",
        url: "/oauth/revoke",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        payload: new URLSearchParams({ token: value, client_id: clientId }).toString(),
      });
    expect((await revokeForm(tokens.access_token)).statusCode).toBe(200);
    expect((await mcp(tokens.access_token)).statusCode).toBe(401);
    const fresh = (
      await token(h.app, {
        grant_type: "refresh_token",
        refresh_token: tokens.refresh_token,
        client_id: clientId,
      })
    ).json();
    expect((await mcp(fresh.access_token)).statusCode).toBe(200);
    expect((await revokeForm(fresh.refresh_token)).statusCode).toBe(200);
    expect((await mcp(fresh.access_token)).statusCode).toBe(401);
    const dead = await token(h.app, {
      grant_type: "refresh_token",
      refresh_token: fresh.refresh_token,
      client_id: clientId,
    });
    expect(dead.json().error).toBe("invalid_grant");
  });

  it("client revoke in the console ends the agent's tokens and refresh (invalid_grant)", async () => {
    const { op, clientId, tokens } = await connectedClient();
    const clients = (await op.request("GET", "/api/access")).json().clients as {
      client_id: string;
      name: string;
    }[];
    const row = clients.find((c) => c.name === "Test agent");
    expect(row).toBeDefined();
    expect((await op.request("POST", `/api/clients/${row!.client_id}/revoke`, {})).statusCode).toBe(200);
    expect((await mcp(tokens.access_token)).statusCode).toBe(401);
    const refreshed = await token(h.app, {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token,
      client_id: clientId,
    });
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
