// A name an OAuth client chose for itself reaches the operator on the consent page, the device pages
// and the Clients list: there it is one safe line, with no invisible character that changes how the
// sentence around it reads (bidi overrides, embeddings, isolates and marks, zero-width characters,
// all Unicode category Cf): each is shown as U+FFFD, so "Probe\u202Eevil" cannot reverse the
// sentence "... asks to act as an agent in Latch".
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Browser, type HostedHarness, readyOperator, startHosted } from "../hosted.ts";
import { authorizeAndConsent, BASE, form, pathOf, pkcePair, RESOURCE, register } from "./oauth-flow.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
});
afterAll(async () => {
  await h?.close();
});

const REDIRECT = "http://127.0.0.1:33418/callback";
const SPOOFED = "Probe\u202Eevil \u2066x\u2069\u200E\u200F\u200B\u200D\uFEFF";
const SHOWN = "Probe\uFFFDevil \uFFFDx\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD";
/** Any format character (bidi control, zero-width) or line separator. */
const INVISIBLE = /[\p{Cf}\u2028\u2029]/u;

async function registered(app: FastifyInstance, metadata: Record<string, unknown>): Promise<string> {
  const answer = await register(app, { client_name: SPOOFED, ...metadata });
  expect(answer.statusCode, answer.body).toBe(201);
  return answer.json().client_id as string;
}

/** A form post from the operator's browser (oidc-provider's device pages take forms). */
async function submitForm(op: Browser, fields: Record<string, string>) {
  const cookie = [...op.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  const answer = await h.app.inject({
    method: "POST",
    url: "/device",
    headers: { origin: BASE, cookie, "content-type": "application/x-www-form-urlencoded" },
    payload: form(fields),
  });
  for (const c of answer.cookies as { name: string; value: string }[]) op.cookies.set(c.name, c.value);
  return answer;
}

const xsrfOf = (html: string) => /name="xsrf" value="([^"]+)"/.exec(html)![1]!;

describe("a self-chosen client name with bidi and zero-width characters", () => {
  it("reaches the consent page and the Clients list with each shown as U+FFFD", async () => {
    const op = await readyOperator(h);
    const clientId = await registered(h.app, { redirect_uris: [REDIRECT] });
    const query = new URLSearchParams({
      client_id: clientId,
      redirect_uri: REDIRECT,
      response_type: "code",
      code_challenge: pkcePair().challenge,
      code_challenge_method: "S256",
      resource: RESOURCE,
      scope: "mcp",
    });
    const opened = await op.request("GET", `/oauth/authorize?${query}`);
    const uid = new URL(pathOf(String(opened.headers.location)), BASE).searchParams.get("uid")!;
    const details = (await op.request("GET", `/consent/details?uid=${uid}`)).json();
    expect(details.client.name).toBe(SHOWN);
    expect(details.client.name).not.toMatch(INVISIBLE);

    await authorizeAndConsent(op, { clientId, redirectUri: REDIRECT, challenge: pkcePair().challenge });
    const clients = (await op.request("GET", "/api/access")).json().clients as { name: string }[];
    expect(clients.map((c) => c.name)).toContain(SHOWN);
    expect(clients.some((c) => INVISIBLE.test(c.name))).toBe(false);
  });

  it("reaches the device confirmation and the device's done page with each shown as U+FFFD", async () => {
    const clientId = await registered(h.app, {
      grant_types: ["urn:ietf:params:oauth:grant-type:device_code", "refresh_token"],
    });
    const asked = await h.app.inject({
      method: "POST",
      url: "/oauth/device/auth",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      payload: form({ client_id: clientId, scope: "mcp", resource: RESOURCE }),
    });
    expect(asked.statusCode, asked.body).toBe(200);
    const userCode = asked.json().user_code as string;

    const op = await readyOperator(h);
    const page = await op.request("GET", "/device");
    const entered = await submitForm(op, { xsrf: xsrfOf(page.body), user_code: userCode });
    expect(entered.statusCode, entered.body).toBe(200);
    expect(entered.body).toContain(SHOWN);
    expect(entered.body).not.toMatch(INVISIBLE);
    const confirmed = await submitForm(op, {
      xsrf: xsrfOf(entered.body),
      user_code: userCode,
      confirm: "yes",
    });
    const uid = new URL(pathOf(String(confirmed.headers.location)), BASE).searchParams.get("uid")!;
    expect((await op.request("GET", `/consent/details?uid=${uid}`)).json().client.name).toBe(SHOWN);
    const decided = await op.request(
      "POST",
      "/consent",
      { uid, decision: "approve" },
      { accept: "application/json" },
    );
    expect(decided.statusCode, decided.body).toBe(200);
    const done = await op.request("GET", pathOf(decided.json().location));
    expect(done.statusCode, done.body).toBe(200);
    expect(done.body).toContain(`${SHOWN} is connected`);
    expect(done.body).not.toMatch(INVISIBLE);
  });
});
