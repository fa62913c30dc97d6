// A trusted client (avt_) reads every credential of its environment in plaintext
// (POST /runtime/resolve), so issuing one and rotating one need the step-up of a standing approval
// (DECISIONS "Passkeys and single sign-on": a verification of the last 5 minutes, a passkey when the
// organisation asks for one): a session cookie stolen long after its sign-in mints no plaintext
// reader. A model client's issue and rotation do not: each of its calls still waits for an approval.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Browser, type HostedHarness, signUpOperator, startHosted } from "./hosted.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
}, 60_000);
afterAll(async () => {
  await h?.close();
});

const MINUTE = 60_000;
const SECRET = "sk_trusted_step_up_0001";

function expectStepUp(response: Awaited<ReturnType<Browser["request"]>>, doing: string, methods: string[]) {
  expect(response.statusCode, response.body).toBe(403);
  expect(response.json().error).toMatchObject({ code: "step_up_required", methods });
  expect(response.json().error.message).toMatch(new RegExp(`^${doing} needs a`));
}

/** A signed-up operator with one staging credential, and fresh authenticator codes. */
async function operator() {
  const { browser, totp } = await signUpOperator(h, { label: "trusted" });
  const stored = await browser.request("POST", "/api/items", {
    name: "RUNTIME_KEY",
    value: SECRET,
    environment: "staging",
    allowed_hosts: ["api.latch.test"],
  });
  expect(stored.statusCode, stored.body).toBe(201);
  // Each code from a later 30-second step: an accepted step is never accepted again.
  const verify = async () => {
    h.clock.advance(30_000);
    const code = totp.generate({ timestamp: h.clock.now.getTime() });
    const verified = await browser.request("POST", "/api/auth/totp/verify", { code });
    expect(verified.statusCode, verified.body).toBe(200);
  };
  return { browser, verify };
}

async function resolve(token: string) {
  return h.app.inject({
    method: "POST",
    url: "/runtime/resolve",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    payload: JSON.stringify({ item_name: "RUNTIME_KEY" }),
  });
}

async function listed(browser: Browser): Promise<{ client_id: string; kind: string }[]> {
  const answer = await browser.request("GET", "/api/access");
  expect(answer.statusCode, answer.body).toBe(200);
  return answer.json().clients;
}

describe("issuing a trusted client", () => {
  it("needs a verification of the last 5 minutes; a model client does not", async () => {
    const { browser, verify } = await operator();
    h.clock.advance(6 * MINUTE);
    const stale = await browser.request("POST", "/api/clients/trusted", { name: "runtime" });
    expectStepUp(stale, "issuing a trusted client", ["totp"]);
    expect(stale.body).not.toContain("avt_");
    // Nothing was issued by the refusal.
    expect((await listed(browser)).filter((c) => c.kind === "trusted")).toEqual([]);

    const model = await browser.request("POST", "/api/clients/model", { name: "agent" });
    expect(model.statusCode, model.body).toBe(201);

    await verify();
    const issued = await browser.request("POST", "/api/clients/trusted", { name: "runtime" });
    expect(issued.statusCode, issued.body).toBe(201);
    const answer = await resolve(issued.json().token);
    expect(answer.statusCode, answer.body).toBe(200);
    expect(answer.json().value).toBe(SECRET);
  });

  it("needs a passkey when the organisation asks for one: a fresh authenticator code does not do", async () => {
    const { browser, verify } = await operator();
    const turnedOn = await browser.request("PATCH", "/api/orgs/settings", {
      standing_approvals_need_passkey: true,
    });
    expect(turnedOn.statusCode, turnedOn.body).toBe(200);
    await verify();
    expectStepUp(
      await browser.request("POST", "/api/clients/trusted", { name: "runtime" }),
      "issuing a trusted client",
      ["passkey"],
    );
  });
});

describe("rotating a client", () => {
  it("needs the step-up for a trusted client, not for a model client", async () => {
    const { browser, verify } = await operator();
    const trusted = await browser.request("POST", "/api/clients/trusted", { name: "runtime" });
    expect(trusted.statusCode, trusted.body).toBe(201);
    const model = await browser.request("POST", "/api/clients/model", { name: "agent" });
    expect(model.statusCode, model.body).toBe(201);
    const oldToken = trusted.json().token as string;
    const trustedId = trusted.json().client_id as string;
    h.clock.advance(6 * MINUTE);

    const stale = await browser.request("POST", `/api/clients/${trustedId}/rotate`);
    expectStepUp(stale, "rotating a trusted client", ["totp"]);
    expect(stale.body).not.toContain("avt_");
    // The refusal replaced nothing: the old bearer still reads.
    expect((await resolve(oldToken)).statusCode).toBe(200);

    const rotatedModel = await browser.request("POST", `/api/clients/${model.json().client_id}/rotate`);
    expect(rotatedModel.statusCode, rotatedModel.body).toBe(200);
    // A client that is not there is 404 after the role, without a step-up to ask for.
    expect((await browser.request("POST", "/api/clients/cli_0000000000000000/rotate")).statusCode).toBe(404);

    await verify();
    const rotated = await browser.request("POST", `/api/clients/${trustedId}/rotate`);
    expect(rotated.statusCode, rotated.body).toBe(200);
    expect((await resolve(oldToken)).statusCode).toBe(401);
    expect((await resolve(rotated.json().token)).statusCode).toBe(200);
  });
});
