// The hosted sign-in pages and console shell (spec 4.3 "Sign-in and account", 3.3, 5 rules 4 and 6):
// where each page sends a browser in each sign-in state, the CSP on every page, no outside assets,
// and escaping of what the server puts into a page.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import * as OTPAuth from "otpauth";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Browser, type HostedHarness, lastCodeFor, startHosted, uniqueEmail } from "../../test/hosted.ts";
import { escapeHtml, PUBLIC_ROOT } from "./page-files.ts";
import { PAGE_CSP } from "./page-headers.ts";

const ASSET_TYPES: Record<string, string> = {
  js: "text/javascript; charset=utf-8",
  css: "text/css; charset=utf-8",
};
/** Every file of public/assets/ by its path under /assets/: the type it must be served with, its body. */
const ASSETS = Object.fromEntries(
  readdirSync(join(PUBLIC_ROOT, "assets")).map((name) => [
    `/assets/${name}`,
    {
      type: ASSET_TYPES[name.split(".").pop()!],
      body: readFileSync(join(PUBLIC_ROOT, "assets", name), "utf8"),
    },
  ]),
);

let h: HostedHarness;

beforeAll(async () => {
  h = await startHosted();
}, 60_000);

afterAll(async () => {
  await h.close();
});

const PAGES = ["/sign-in", "/sign-up", "/enroll-totp", "/verify-totp", "/console"] as const;

async function emailSignIn(browser: Browser, email: string) {
  await browser.request("POST", "/api/auth/otp/send", { email });
  const verified = await browser.request("POST", "/api/auth/otp/verify", {
    email,
    otp: lastCodeFor(h.inbox, email),
  });
  expect(verified.statusCode, verified.body).toBe(200);
}

const codeAt = (totp: OTPAuth.TOTP) => totp.generate({ timestamp: h.clock.now.getTime() });

/** Browsers in each sign-in state, for one operator with an authenticator (and one without). */
async function browsersInEachState() {
  const anonymous = new Browser(h.app);
  const needsEnrollment = new Browser(h.app);
  await emailSignIn(needsEnrollment, uniqueEmail("pending"));

  const email = uniqueEmail("pages");
  const ready = new Browser(h.app);
  await emailSignIn(ready, email);
  const started = await ready.request("POST", "/api/auth/totp/start", {});
  const totp = OTPAuth.URI.parse(started.json().otpauth_url) as OTPAuth.TOTP;
  const confirmed = await ready.request("POST", "/api/auth/totp/confirm", { code: codeAt(totp) });
  expect(confirmed.statusCode, confirmed.body).toBe(200);
  h.clock.advance(31_000);

  const needsVerification = new Browser(h.app);
  await emailSignIn(needsVerification, email);
  return { anonymous, needsEnrollment, needsVerification, ready, totp, email };
}

/** GET a page: the redirect target, or "page" when it is served. */
async function landing(browser: Browser, path: string): Promise<string> {
  const response = await browser.request("GET", path);
  if (response.statusCode === 302) return response.headers.location as string;
  expect(response.statusCode, response.body).toBe(200);
  expect(response.headers["content-type"]).toBe("text/html; charset=utf-8");
  return "page";
}

describe("where each page sends each sign-in state", () => {
  it("follows the redirect table", async () => {
    const b = await browsersInEachState();
    type State = "anonymous" | "needsEnrollment" | "needsVerification" | "ready";
    const table: Record<State, Record<(typeof PAGES)[number], string>> = {
      anonymous: {
        "/sign-in": "page",
        "/sign-up": "page",
        "/enroll-totp": "/sign-in",
        "/verify-totp": "/sign-in",
        "/console": "/sign-in",
      },
      needsEnrollment: {
        "/sign-in": "/enroll-totp",
        "/sign-up": "/enroll-totp",
        "/enroll-totp": "page",
        "/verify-totp": "/enroll-totp",
        "/console": "/enroll-totp",
      },
      needsVerification: {
        "/sign-in": "/verify-totp",
        "/sign-up": "/verify-totp",
        "/enroll-totp": "/verify-totp",
        "/verify-totp": "page",
        "/console": "/verify-totp",
      },
      ready: {
        "/sign-in": "/console",
        "/sign-up": "/console",
        "/enroll-totp": "page",
        "/verify-totp": "/console",
        "/console": "page",
      },
    };
    for (const [state, expected] of Object.entries(table)) {
      const browser = b[state as State];
      const actual: Record<string, string> = {};
      for (const path of PAGES) actual[path] = await landing(browser, path);
      expect({ state, actual }).toEqual({ state, actual: expected });
    }

    // The enrol page offers re-enrolment (a current code first) only to a ready, enrolled session.
    expect((await b.needsEnrollment.request("GET", "/enroll-totp")).body).toContain('data-reenroll="false"');
    expect((await b.ready.request("GET", "/enroll-totp")).body).toContain('data-reenroll="true"');

    // Passing the step moves the pending browser along; signing out sends every page to sign-in.
    const passed = await b.needsVerification.request("POST", "/api/auth/totp/verify", {
      code: codeAt(b.totp),
    });
    expect(passed.statusCode, passed.body).toBe(200);
    expect(await landing(b.needsVerification, "/verify-totp")).toBe("/console");
    expect(await landing(b.needsVerification, "/console")).toBe("page");
    expect((await b.ready.request("POST", "/api/auth/logout")).statusCode).toBe(200);
    expect(await landing(b.ready, "/console")).toBe("/sign-in");
    expect(await landing(b.ready, "/sign-in")).toBe("page");
  });

  it("names a ready operator by email with the organisation in the console shell", async () => {
    const { ready, email } = await browsersInEachState();
    const page = await ready.request("GET", "/console");
    expect(page.body).toContain(`Console of <span id="email">${email}</span>`);
    expect(page.body).toContain(`${email.split("@")[0]}&#39;s organisation`);
    expect(page.body).toMatch(/id="backup-left">10</);
    expect(page.body).toMatch(/<script src="\/assets\/console\.[0-9a-f]{12}\.js"><\/script>/);
  });

  it("refuses the pages to another site's Origin", async () => {
    for (const path of PAGES) {
      const response = await h.app.inject({
        method: "GET",
        url: path,
        headers: { origin: "https://evil.test" },
      });
      expect(response.statusCode, path).toBe(403);
      expect(response.headers["access-control-allow-origin"]).toBeUndefined();
    }
  });
});

describe("what the pages are made of", () => {
  it("sends the strict CSP with every page and serves the assets with their types", async () => {
    expect(PAGE_CSP).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
        "worker-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    const { anonymous, needsEnrollment, needsVerification, ready } = await browsersInEachState();
    const served = [
      await anonymous.request("GET", "/sign-in"),
      await anonymous.request("GET", "/sign-up"),
      await needsEnrollment.request("GET", "/enroll-totp"),
      await needsVerification.request("GET", "/verify-totp"),
      await ready.request("GET", "/console"),
    ];
    for (const response of served) {
      expect(response.statusCode).toBe(200);
      expect(response.headers["content-security-policy"]).toBe(PAGE_CSP);
      expect(response.headers["x-frame-options"]).toBe("DENY");
      expect(response.headers["x-content-type-options"]).toBe("nosniff");
      // No inline script or style for the CSP to have to allow.
      expect(response.body).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>/);
      expect(response.body).not.toMatch(/\sstyle=|<style|\son[a-z]+=/i);
    }
    for (const [path, asset] of Object.entries(ASSETS)) {
      const response = await anonymous.request("GET", path);
      expect(response.statusCode, path).toBe(200);
      expect(response.headers["content-type"]).toBe(asset.type);
      expect(response.body).toBe(asset.body);
    }
    expect((await anonymous.request("GET", "/assets/nope.js")).statusCode).toBe(404);
  });

  it("loads nothing from another host: no absolute URLs in any page or asset", async () => {
    const { anonymous, needsEnrollment, needsVerification, ready } = await browsersInEachState();
    const bodies = [
      (await anonymous.request("GET", "/sign-in")).body,
      (await anonymous.request("GET", "/sign-up")).body,
      (await needsEnrollment.request("GET", "/enroll-totp")).body,
      (await needsVerification.request("GET", "/verify-totp")).body,
      (await ready.request("GET", "/console")).body,
      ...Object.values(ASSETS).map((a) => a.body),
    ];
    for (const body of bodies) {
      expect(body).not.toMatch(/https?:\/\//i);
      expect(body).not.toMatch(/(?:src|href|action)\s*=\s*["']?\s*\/\//i);
      expect(body).not.toMatch(/@import|\burl\(/); // CSS imports and url() fetches
      for (const match of body.matchAll(/\s(?:src|href|action)="([^"]*)"/g)) {
        expect(match[1]).toMatch(/^(\/(?!\/)|#)/);
      }
    }
  });

  it("builds the console from text only: no markup from strings, no eval, every section present", async () => {
    for (const [path, asset] of Object.entries(ASSETS)) {
      if (!path.endsWith(".js")) continue;
      expect(asset.body, path).not.toMatch(
        /innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function/,
      );
    }
    const { ready } = await browsersInEachState();
    const page = (await ready.request("GET", "/console")).body;
    for (const script of [
      "console",
      "console-inject",
      "console-clients",
      "request-view",
      "console-inbox",
      "console-activity",
      "console-approvals",
    ]) {
      expect(page).toMatch(new RegExp(`<script src="/assets/${script}\\.[0-9a-f]{12}\\.js"></script>`));
    }
    for (const section of ["vault", "clients", "inbox", "approvals", "audit", "access"]) {
      expect(page).toContain(`<section id="${section}" class="panel" aria-labelledby="${section}-heading">`);
      expect(page).toContain(`<a href="#${section}">`);
    }
    // Secret inputs are password fields the browser does not offer to fill.
    for (const id of ["item-value", "rotate-value"]) {
      expect(page).toMatch(new RegExp(`<input\\s+id="${id}"\\s[^>]*type="password"\\s+autocomplete="off"`));
    }
  });

  it("escapes what it puts into a page: an organisation name full of markup", async () => {
    expect(escapeHtml(`<a href="x" title='y'>&</a>`)).toBe(
      "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;",
    );
    const { ready } = await browsersInEachState();
    const name = `<script>alert("x")</script> & <img src=x onerror=alert(1)>`;
    const created = await ready.request("POST", "/api/orgs", { name });
    expect(created.statusCode, created.body).toBe(201);
    const page = await ready.request("GET", "/console");
    expect(page.body).toContain(
      "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;img src=x onerror=alert(1)&gt;",
    );
    expect(page.body).not.toContain("<script>alert");
    expect(page.body).not.toContain("<img src=x");
  });
});

describe("an unknown page and another loopback address", () => {
  const html = { accept: "text/html,application/xhtml+xml,*/*;q=0.8" };

  it("answers a browser's unknown page with an HTML 404, and an API caller with the JSON envelope", async () => {
    const page = await h.app.inject({ method: "GET", url: "/no-such-page", headers: html });
    expect(page.statusCode).toBe(404);
    expect(page.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(page.headers["content-security-policy"]).toContain("script-src 'none'");
    expect(page.body).toContain("<h1>Page not found</h1>");
    expect(page.body).toContain('href="/console"');
    const json = await h.app.inject({ method: "GET", url: "/no-such-page" });
    expect(json.json()).toEqual({ error: { code: "not_found", message: "no such route" } });
    for (const url of ["/api/nope", "/oauth/nope", "/mcp/nope"]) {
      const api = await h.app.inject({ method: "GET", url, headers: html });
      expect(api.statusCode, url).toBe(404);
      expect(api.headers["content-type"], url).toMatch(/^application\/json/);
    }
    expect(
      (await h.app.inject({ method: "POST", url: "/no-such-page", headers: html })).json().error.code,
    ).toBe("not_found");
  });

  it("sends a page asked for on 127.0.0.1 to the same path on BASE_URL (localhost), and nothing else", async () => {
    const at = (
      url: string,
      host: string,
      extra: Record<string, string> = html,
      method: "GET" | "POST" = "GET",
    ) => h.app.inject({ method, url, headers: { host, ...extra } });
    for (const host of ["127.0.0.1:8787", "127.0.0.2", "[::1]:8787"]) {
      const moved = await at("/sign-up?return_to=%2Fconsole", host);
      expect(moved.statusCode, host).toBe(302);
      expect(moved.headers.location).toBe("http://localhost:8787/sign-up?return_to=%2Fconsole");
    }
    expect((await at("/", "127.0.0.1:8787")).headers.location).toBe("http://localhost:8787/");
    // The API, a POST, a non-browser and BASE_URL's own host are answered where they are.
    expect((await at("/api/auth/me", "127.0.0.1:8787")).statusCode).toBe(401);
    expect((await at("/health", "127.0.0.1:8787")).statusCode).toBe(200);
    expect((await at("/sign-up", "127.0.0.1:8787", {})).statusCode).toBe(200);
    expect((await at("/sign-up", "localhost:8787")).statusCode).toBe(200);
    // Another host name (not loopback) is not ours to judge here: no redirect to anywhere.
    expect((await at("/sign-up", "evil.example")).statusCode).toBe(200);
  });
});
