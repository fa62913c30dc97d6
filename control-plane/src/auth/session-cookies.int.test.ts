// The operator's cookies (spec 5, issue 9): `__Host-` names over https so no sibling subdomain or
// plain-http page can plant one, plain names on an http://localhost development plane, and a
// request carrying two session cookies is refused rather than judged by whichever comes first.
import type { LightMyRequestResponse } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  Browser,
  type HostedHarness,
  lastCodeFor,
  readyOperator,
  startHosted,
  uniqueEmail,
} from "../../test/hosted.ts";

const HTTPS_BASE = "https://latch.example.test";

let secure: HostedHarness;
let plain: HostedHarness;

beforeAll(async () => {
  secure = await startHosted({ baseUrl: HTTPS_BASE });
  plain = await startHosted({ baseUrl: "http://localhost:8787", replicaOf: secure });
}, 60_000);

afterAll(async () => {
  await plain?.close();
  await secure?.close();
});

/** The Set-Cookie lines of a response, one string each. */
function setCookies(response: LightMyRequestResponse): string[] {
  const raw = response.headers["set-cookie"];
  return raw === undefined ? [] : Array.isArray(raw) ? raw : [raw];
}

/** Signs in by email code on `h` (the session is pending: no authenticator yet). */
async function signIn(h: HostedHarness, origin: string) {
  const browser = new Browser(h.app, origin);
  const email = uniqueEmail("cookie");
  await browser.request("POST", "/api/auth/otp/send", { email });
  const verified = await browser.request("POST", "/api/auth/otp/verify", {
    email,
    otp: lastCodeFor(h.inbox, email),
  });
  expect(verified.statusCode, verified.body).toBe(200);
  return { browser, verified };
}

const me = (h: HostedHarness, origin: string, cookie: string) =>
  h.app.inject({ method: "GET", url: "/api/auth/me", headers: { origin, cookie } });

describe("over https", () => {
  it("sets __Host- cookies: Secure, Path=/, no Domain", async () => {
    const { browser, verified } = await signIn(secure, HTTPS_BASE);
    const lines = setCookies(verified);
    const session = lines.find((l) => l.startsWith("__Host-latch_session="));
    const csrf = lines.find((l) => l.startsWith("__Host-latch_csrf="));
    expect(session, lines.join("\n")).toBeDefined();
    expect(csrf, lines.join("\n")).toBeDefined();
    for (const line of [session!, csrf!]) {
      expect(line).toMatch(/; Secure(;|$)/);
      expect(line).toMatch(/; Path=\/(;|$)/);
      expect(line).not.toMatch(/Domain=/i);
      // The session lasts until sign-out or revoke (spec 8): it survives a browser restart.
      expect(line).toMatch(/; Max-Age=34560000(;|$)/);
    }
    expect(session).toMatch(/; HttpOnly(;|$)/);
    expect(csrf).not.toMatch(/HttpOnly/);
    expect(lines.some((l) => /^latch_(session|csrf)=/.test(l))).toBe(false);

    // The session works under its prefixed name, with the CSRF token from the prefixed cookie
    // (the test browser echoes __Host-latch_csrf in X-CSRF-Token as the pages' script does).
    expect((await browser.request("GET", "/api/auth/me")).statusCode).toBe(200);
    const started = await browser.request("POST", "/api/auth/totp/start", {});
    expect(started.statusCode, started.body).toBe(200);

    // The same token under the unprefixed name is not a session here: anyone could have set it.
    const token = browser.cookies.get("__Host-latch_session")!;
    expect((await me(secure, HTTPS_BASE, `latch_session=${token}`)).statusCode).toBe(401);

    // Signing out clears both prefixed cookies, with the Secure flag a browser needs to accept it.
    const out = await browser.request("POST", "/api/auth/logout", {});
    expect(out.statusCode, out.body).toBe(200);
    const cleared = setCookies(out);
    for (const name of ["__Host-latch_session", "__Host-latch_csrf"]) {
      const line = cleared.find((l) => l.startsWith(`${name}=`));
      expect(line, cleared.join("\n")).toMatch(/; Secure(;|$)/);
      expect(line).toMatch(/; Path=\/(;|$)/);
    }
  });

  it("refuses two prefixed session cookies, and ignores an unprefixed one planted beside it", async () => {
    const { browser } = await signIn(secure, HTTPS_BASE);
    const token = browser.cookies.get("__Host-latch_session")!;
    for (const cookie of [
      `__Host-latch_session=${token}; __Host-latch_session=planted`,
      `__Host-latch_session=planted; __Host-latch_session=${token}`,
    ]) {
      const response = await me(secure, HTTPS_BASE, cookie);
      expect(response.statusCode, cookie).toBe(401);
      expect(response.json().error.code).toBe("duplicate_session_cookie");
    }
    // A sibling subdomain or an http page can plant latch_session, never the __Host- name: the
    // planted one is not a session here, and it locks nobody out (not even the sign-in page).
    for (const cookie of [
      `__Host-latch_session=${token}; latch_session=planted`,
      `latch_session=planted; __Host-latch_session=${token}`,
    ]) {
      const response = await me(secure, HTTPS_BASE, cookie);
      expect(response.statusCode, cookie).toBe(200);
    }
    const signInPage = await secure.app.inject({
      method: "GET",
      url: "/sign-in",
      headers: { host: new URL(HTTPS_BASE).host, cookie: "latch_session=planted" },
    });
    expect(signInPage.statusCode).toBe(200);
    expect((await me(secure, HTTPS_BASE, `__Host-latch_session=${token}`)).statusCode).toBe(200);
  });
});

describe("over http on localhost (development)", () => {
  it("sets the plain names without Secure, and the whole sign-in works", async () => {
    const { verified } = await signIn(plain, "http://localhost:8787");
    const lines = setCookies(verified);
    const session = lines.find((l) => l.startsWith("latch_session="));
    expect(session, lines.join("\n")).toBeDefined();
    expect(session).not.toMatch(/Secure/);
    expect(session).toMatch(/; Path=\/(;|$)/);
    expect(lines.some((l) => l.startsWith("__Host-"))).toBe(false);

    // Email code, authenticator, a ready session that reaches an MFA-only route, sign-out.
    const op = await readyOperator(plain);
    expect((await op.request("GET", "/api/access")).statusCode).toBe(200);
    expect((await op.request("POST", "/api/auth/logout", {})).statusCode).toBe(200);
    expect((await op.request("GET", "/api/auth/me")).statusCode).toBe(401);
  });

  it("refuses two session cookies: the same name twice, or beside the prefixed name", async () => {
    const { browser } = await signIn(plain, "http://localhost:8787");
    const token = browser.cookies.get("latch_session")!;
    for (const cookie of [
      `latch_session=${token}; latch_session=other`,
      `latch_session=other;latch_session=${token}`,
      `latch_session=${token}; __Host-latch_session=other`,
    ]) {
      const response = await me(plain, "http://localhost:8787", cookie);
      expect(response.statusCode, cookie).toBe(401);
      expect(response.json().error).toMatchObject({ code: "duplicate_session_cookie" });
      expect(response.json().error.message).toMatch(/two|more than one/);
    }
    // Pages refuse too: no page is rendered for "whichever session came first".
    const page = await plain.app.inject({
      method: "GET",
      url: "/console",
      headers: { cookie: `latch_session=${token}; latch_session=other` },
    });
    expect(page.statusCode).toBe(401);
    expect((await me(plain, "http://localhost:8787", `latch_session=${token}`)).statusCode).toBe(200);
  });
});
