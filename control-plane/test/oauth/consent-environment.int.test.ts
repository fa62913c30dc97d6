// Consent picks the environment (issue 21 item 5; spec 1.4, DECISIONS "OAuth authorization server"):
// GET /consent/details lists each organisation's environments, POST /consent takes the one the
// operator chose, the agent then acts in that environment only, and Clients shows it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Browser, type HostedHarness, readyOperator, startHosted } from "../hosted.ts";
import { BASE, pathOf, pkcePair, RESOURCE, register, token } from "./oauth-flow.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
});
afterAll(async () => {
  await h?.close();
});

const REDIRECT = "http://127.0.0.1:33418/callback";

async function storeItem(op: Browser, name: string, environment: string) {
  const stored = await op.request("POST", "/api/items", {
    name,
    value: `sk_${environment}_value_1234`,
    environment,
    allowed_hosts: ["api.latch.test"],
  });
  expect(stored.statusCode, stored.body).toBe(201);
}

/** Opens /oauth/authorize in the operator's browser; answers the consent uid and the PKCE verifier. */
async function openConsent(op: Browser, clientId: string) {
  const pkce = pkcePair();
  const query = new URLSearchParams({
    client_id: clientId,
    redirect_uri: REDIRECT,
    response_type: "code",
    code_challenge: pkce.challenge,
    code_challenge_method: "S256",
    state: "st",
    resource: RESOURCE,
    scope: "mcp",
  });
  const started = await op.request("GET", `/oauth/authorize?${query}`);
  expect(started.statusCode, started.body).toBe(303);
  const uid = new URL(pathOf(String(started.headers.location)), BASE).searchParams.get("uid")!;
  return { uid, verifier: pkce.verifier };
}

/** Consents with `decision` and exchanges the code; answers the access token. */
async function consentAndExchange(op: Browser, clientId: string, decision: Record<string, string>) {
  const { uid, verifier } = await openConsent(op, clientId);
  const decided = await op.request(
    "POST",
    "/consent",
    { uid, decision: "approve", ...decision },
    { accept: "application/json" },
  );
  expect(decided.statusCode, decided.body).toBe(200);
  const resumed = await op.request("GET", pathOf(decided.json().location));
  const code = new URL(String(resumed.headers.location)).searchParams.get("code")!;
  const issued = await token(h.app, {
    grant_type: "authorization_code",
    code,
    redirect_uri: REDIRECT,
    client_id: clientId,
    code_verifier: verifier,
    resource: RESOURCE,
  });
  expect(issued.statusCode, issued.body).toBe(200);
  return issued.json().access_token as string;
}

async function listItems(accessToken: string): Promise<{ name: string; environment: string }[]> {
  const answer = await h.app.inject({
    method: "POST",
    url: "/mcp",
    headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json" },
    payload: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: { name: "list_items", arguments: {} },
    }),
  });
  expect(answer.statusCode, answer.body).toBe(200);
  return JSON.parse(answer.json().result.content[0].text).items;
}

async function registerClient(name: string): Promise<string> {
  const registered = await register(h.app, { client_name: name, redirect_uris: [REDIRECT] });
  expect(registered.statusCode, registered.body).toBe(201);
  return registered.json().client_id as string;
}

describe("consent picks the environment", () => {
  it("lists each organisation's environments on the consent page", async () => {
    const op = await readyOperator(h);
    const second = await op.request("POST", "/api/orgs", { name: "Second org" });
    expect(second.statusCode).toBe(201);
    const { uid } = await openConsent(op, await registerClient("Lister"));
    const details = (await op.request("GET", `/consent/details?uid=${uid}`)).json();
    expect(details.organisations).toHaveLength(2);
    for (const organisation of details.organisations) {
      expect(organisation.environments).toEqual(["staging", "production"]);
    }
  });

  it("the agent acts in the environment chosen, and Clients shows it", async () => {
    const op = await readyOperator(h);
    await storeItem(op, "STAGING_ONLY", "staging");
    await storeItem(op, "PRODUCTION_ONLY", "production");
    const clientId = await registerClient("Environment agent");

    const inProduction = await consentAndExchange(op, clientId, { environment: "production" });
    expect(await listItems(inProduction)).toEqual([
      expect.objectContaining({ name: "PRODUCTION_ONLY", environment: "production" }),
    ]);
    // Consenting again for staging gives the same client a second row, in staging; the first
    // token still acts in production.
    const inStaging = await consentAndExchange(op, clientId, { environment: "staging" });
    expect(await listItems(inStaging)).toEqual([
      expect.objectContaining({ name: "STAGING_ONLY", environment: "staging" }),
    ]);
    expect((await listItems(inProduction)).map((i) => i.name)).toEqual(["PRODUCTION_ONLY"]);

    const clients = (await op.request("GET", "/api/access")).json().clients as {
      name: string;
      environment: string;
      oauth: boolean;
    }[];
    const rows = clients.filter((c) => c.name === "Environment agent");
    expect(rows.map((c) => c.environment).sort()).toEqual(["production", "staging"]);
    expect(rows.every((c) => c.oauth)).toBe(true);
  });

  it("without an environment the plane's first one is used, as before (the spec's {uid, decision})", async () => {
    const op = await readyOperator(h);
    await storeItem(op, "DEFAULT_STAGING", "staging");
    const accessToken = await consentAndExchange(op, await registerClient("Default agent"), {});
    expect((await listItems(accessToken)).map((i) => i.environment)).toEqual(["staging"]);
  });

  it("refuses an environment that is not one, naming the field, and consents nothing", async () => {
    const op = await readyOperator(h);
    const { uid } = await openConsent(op, await registerClient("Bad environment"));
    for (const environment of ["qa", "Production", ""]) {
      const refused = await op.request(
        "POST",
        "/consent",
        { uid, decision: "approve", environment },
        { accept: "application/json" },
      );
      expect(refused.statusCode, environment).toBe(400);
      expect(refused.json().error.message).toContain("environment");
    }
    const clients = (await op.request("GET", "/api/access")).json().clients as { name: string }[];
    expect(clients.filter((c) => c.name === "Bad environment")).toEqual([]);
  });
});
