// RFC 8628 end to end (spec 4.3 "/oauth/device/auth", "/device"; DECISIONS: user codes of 8 letters
// from BCDFGHJKLMNPQRSTVWXZ shown as XXXX-XXXX, verification_uri BASE_URL/device): a standard OAuth
// client library (openid-client) asks for a code and polls; the operator types the code on /device,
// confirms it, signs in and consents on /consent in the organisation of their choice; the library
// gets a JWT that /mcp accepts. Then spec 8's limit of 10 code attempts per 15 minutes.
import * as client from "openid-client";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { freePort } from "../chromium.ts";
import { Browser, type HostedHarness, readyOperator, startHosted } from "../hosted.ts";
import { pathOf, register, testAddress } from "./oauth-flow.ts";

let h: HostedHarness;
let base: string;
beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  h = await startHosted({ baseUrl: base });
  await h.app.listen({ host: "127.0.0.1", port });
}, 60_000);
afterAll(async () => {
  await h?.close();
});

/** The hidden xsrf field of the form oidc-provider renders on /device. */
function xsrfOf(html: string): string {
  const match = /name="xsrf" value="([^"]+)"/.exec(html);
  if (!match) throw new Error(`no xsrf field in ${html.slice(0, 200)}`);
  return match[1]!;
}

/** Where this file's code attempts come from, and how many it made (both tests count against it). */
const DEVICE_IP = testAddress();
let attempts = 0;

/** The codes each browser typed: confirming one of those is the only post with a code that is not an attempt. */
const typedBy = new WeakMap<Browser, Set<string>>();

/** A form post from the operator's browser (the Browser helper sends JSON; forms go through inject). */
async function submitForm(op: Browser, path: string, fields: Record<string, string>) {
  if (fields.user_code) {
    const typed = typedBy.get(op) ?? new Set<string>();
    typedBy.set(op, typed);
    const code = fields.user_code.toUpperCase().replace(/\W/g, "");
    if (!((fields.confirm || fields.abort) && typed.has(code))) attempts += 1;
    typed.add(code);
  }
  const cookie = [...op.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  const answer = await h.app.inject({
    method: "POST",
    remoteAddress: DEVICE_IP,
    url: path,
    headers: { origin: base, cookie, "content-type": "application/x-www-form-urlencoded" },
    payload: new URLSearchParams(fields).toString(),
  });
  for (const c of answer.cookies as { name: string; value: string }[]) op.cookies.set(c.name, c.value);
  return answer;
}

describe("the device flow with openid-client", () => {
  it("codes, confirmation, consent, and a JWT that /mcp accepts", async () => {
    const registered = await register(h.app, {
      client_name: "CLI on a server",
      grant_types: ["urn:ietf:params:oauth:grant-type:device_code", "refresh_token"],
    });
    expect(registered.statusCode, registered.body).toBe(201);
    const clientId = registered.json().client_id as string;
    const config = await client.discovery(new URL(base), clientId, undefined, client.None(), {
      execute: [client.allowInsecureRequests],
    });
    const asked = await client.initiateDeviceAuthorization(config, { scope: "mcp", resource: `${base}/mcp` });
    expect(asked.user_code).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
    expect(asked.verification_uri).toBe(`${base}/device`);

    // The operator's browser: the code page, a wrong code, the right one, the confirmation.
    const opAtBase = await readyOperator(h, "device", base);
    const page = await opAtBase.request("GET", "/device");
    expect(page.statusCode).toBe(200);
    expect(page.headers["content-security-policy"]).toContain("script-src 'none'");
    const wrong = await submitForm(opAtBase, "/device", { xsrf: xsrfOf(page.body), user_code: "BBBB-BBBB" });
    expect(wrong.body).toContain("not valid");
    const entered = await submitForm(opAtBase, "/device", {
      xsrf: xsrfOf(wrong.body),
      user_code: asked.user_code,
    });
    expect(entered.statusCode).toBe(200);
    expect(entered.body).toContain(asked.user_code);
    expect(entered.body).toContain("CLI on a server");
    const confirmed = await submitForm(opAtBase, "/device", {
      xsrf: xsrfOf(entered.body),
      user_code: asked.user_code,
      confirm: "yes",
    });
    expect([302, 303]).toContain(confirmed.statusCode);
    const consentPath = pathOf(String(confirmed.headers.location));
    expect(consentPath).toMatch(/^\/consent\?uid=/);
    const uid = new URL(consentPath, base).searchParams.get("uid")!;
    const details = (await opAtBase.request("GET", `/consent/details?uid=${uid}`)).json();
    expect(details.flow).toBe("device");
    expect(details.client.redirect_host).toBeNull();
    const decided = await opAtBase.request(
      "POST",
      "/consent",
      { uid, decision: "approve" },
      { accept: "application/json" },
    );
    expect(decided.statusCode, decided.body).toBe(200);
    const done = await opAtBase.request("GET", pathOf(decided.json().location));
    expect(done.statusCode).toBe(200);
    expect(done.body).toContain("is connected");
    // Approved and not yet polled for: the database alone cannot redeem it.
    const stored = await h.plane.database.db.selectFrom("oauth_artifacts").select("payload").execute();
    expect(JSON.stringify(stored)).not.toContain(asked.device_code);

    // The library's poll now gets the tokens.
    const tokens = await client.pollDeviceAuthorizationGrant(config, asked, { resource: `${base}/mcp` });
    expect(tokens.refresh_token).toBeTruthy();
    const listed = await fetch(`${base}/mcp`, {
      method: "POST",
      headers: { authorization: `Bearer ${tokens.access_token}`, "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(listed.status).toBe(200);
  }, 60_000);

  it("says a denied device was denied, not that its code was wrong", async () => {
    const registered = await register(h.app, {
      client_name: "Denied CLI",
      grant_types: ["urn:ietf:params:oauth:grant-type:device_code", "refresh_token"],
    });
    const asked = await fetch(`${base}/oauth/device/auth`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        client_id: registered.json().client_id,
        scope: "mcp",
        resource: `${base}/mcp`,
      }),
    });
    const { user_code: userCode } = (await asked.json()) as { user_code: string };
    const op = await readyOperator(h, "device-deny", base);
    const page = await op.request("GET", "/device");
    const entered = await submitForm(op, "/device", { xsrf: xsrfOf(page.body), user_code: userCode });
    const confirmed = await submitForm(op, "/device", {
      xsrf: xsrfOf(entered.body),
      user_code: userCode,
      confirm: "yes",
    });
    const uid = new URL(pathOf(String(confirmed.headers.location)), base).searchParams.get("uid")!;
    const decided = await op.request(
      "POST",
      "/consent",
      { uid, decision: "deny" },
      { accept: "application/json" },
    );
    expect(decided.statusCode, decided.body).toBe(200);
    const after = await op.request("GET", pathOf(decided.json().location));
    expect(after.body).toContain("You denied this device: it gets no access to Latch.");
    expect(after.body).not.toContain("not valid");
  });

  it("allows 10 code attempts per 15 minutes from one address, then 429", async () => {
    const browser = new Browser(h.app, base);
    let page = await browser.request("GET", "/device");
    while (attempts < 10) {
      const answer = await submitForm(browser, "/device", {
        xsrf: xsrfOf(page.body),
        user_code: "ZZZZ-ZZZZ",
      });
      expect(answer.statusCode).toBe(200);
      page = answer;
    }
    const eleventh = await submitForm(browser, "/device", {
      xsrf: xsrfOf(page.body),
      user_code: "ZZZZ-ZZZZ",
    });
    expect(eleventh.statusCode).toBe(429);
    expect(Number(eleventh.headers["retry-after"])).toBeGreaterThan(0);
    expect(eleventh.body).toContain("at most 10 per 15 minutes");
  });

  /**
   * A new browser's code form, from an address of its own: each call posts `fields` with the xsrf
   * of the page the last post answered.
   */
  async function codeFormOfNewBrowser() {
    const address = testAddress();
    const browser = new Browser(h.app, base);
    let page = (await browser.request("GET", "/device")).body;
    return async (fields: Record<string, string>) => {
      const cookie = [...browser.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
      const answer = await h.app.inject({
        method: "POST",
        remoteAddress: address,
        url: "/device",
        headers: { origin: base, cookie, "content-type": "application/x-www-form-urlencoded" },
        payload: new URLSearchParams({ xsrf: xsrfOf(page), ...fields }).toString(),
      });
      if (answer.statusCode === 200) page = answer.body;
      return answer;
    };
  }

  it("counts a confirmation or an abort of a code the browser never typed, and an empty confirm, as attempts", async () => {
    // The code provider looks the code up on every post that names one, and its answer (the
    // confirmation page, or "not valid") tells whether the code exists: guessing with confirm=yes,
    // confirm= or abort=yes must run into the same limit as typing.
    const post = await codeFormOfNewBrowser();
    const guesses: Record<string, string>[] = [{ confirm: "yes" }, { confirm: "" }, { abort: "yes" }];
    for (let i = 0; i < 10; i++) {
      const answer = await post({ user_code: `BBBB-BB${"BCDFGHJKLM"[i]}B`, ...guesses[i % 3] });
      expect(answer.statusCode, answer.body).toBe(200);
      expect(answer.body).toContain("not valid");
    }
    for (const guess of guesses) {
      const refused = await post({ user_code: "BBBB-BBNB", ...guess });
      expect(refused.statusCode).toBe(429);
      expect(refused.body).toContain("at most 10 per 15 minutes");
    }
  });

  it("does not count confirming a code the browser typed, in any spelling of it", async () => {
    const post = await codeFormOfNewBrowser();
    // Ten typings (the limit), then their confirmations: none of those is an attempt.
    for (let i = 0; i < 10; i++) {
      expect((await post({ user_code: `CCCC-CC${"BCDFGHJKLM"[i]}C` })).statusCode).toBe(200);
    }
    for (let i = 0; i < 10; i++) {
      const answer = await post({ user_code: `cccc cc${"bcdfghjklm"[i]}c`, confirm: "yes" });
      expect(answer.statusCode, answer.body).toBe(200);
    }
    // Another code is an attempt, over the limit.
    expect((await post({ user_code: "CCCC-CCNC", confirm: "yes" })).statusCode).toBe(429);
  });
});

describe("POST /device without the code page's OAuth session (issue 21 item 3)", () => {
  it("answers 400 with a page that sends the operator back to /device, never a 500 or a stack", async () => {
    const written: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    const spy = vi.spyOn(process.stderr, "write").mockImplementation((chunk, ...rest) => {
      written.push(String(chunk));
      return write(chunk, ...(rest as []));
    });
    const consoleSpy = vi.spyOn(console, "error").mockImplementation((...args) => {
      written.push(args.map(String).join(" "));
    });
    try {
      const op = await readyOperator(h, "device-no-session", base);
      const page = await op.request("GET", "/device");
      const xsrf = xsrfOf(page.body);
      const session = [...op.cookies].filter(([name]) => !name.startsWith("latch_oauth_session"));
      for (const cookie of [
        // No cookie at all, the operator's cookies without the OAuth one, and a forged OAuth one.
        "",
        session.map(([k, v]) => `${k}=${v}`).join("; "),
        "latch_oauth_session=forged; latch_oauth_session.sig=forged",
      ]) {
        const forms: Record<string, string>[] = [
          { xsrf, user_code: "BBBB-BBBB" },
          { xsrf, user_code: "BBBB-BBBB", confirm: "yes" },
          { user_code: "BBBB-BBBB" },
          {},
        ];
        for (const fields of forms) {
          const answer = await h.app.inject({
            method: "POST",
            url: "/device",
            remoteAddress: testAddress(),
            headers: {
              origin: base,
              ...(cookie ? { cookie } : {}),
              "content-type": "application/x-www-form-urlencoded",
            },
            payload: new URLSearchParams(fields).toString(),
          });
          expect(answer.statusCode, `${cookie} ${JSON.stringify(fields)}: ${answer.body.slice(0, 200)}`).toBe(
            400,
          );
          expect(answer.headers["content-type"]).toMatch(/^text\/html/);
          expect(answer.body).toContain('href="/device"');
        }
      }
    } finally {
      spy.mockRestore();
      consoleSpy.mockRestore();
    }
    expect(written.join("")).not.toMatch(/persist can only be called|TypeError|\n\s+at /);
  });
});
