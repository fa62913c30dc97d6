// The page and asset plumbing on a bare Fastify: the one CSP family and each page's difference,
// the {{slot}} check and its escaping, and the asset routes' types and caching (short, with an
// ETag, or a year at a content-hashed name) over an app whose own hook marks every answer no-store, as both planes' apps do.
import { readFileSync } from "node:fs";
import Fastify, { type FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { assetPath, escapeHtml, hashedName, readPage, registerAssets, sendPage } from "./page-files.ts";
import {
  ASSET_CACHE_CONTROL,
  assetHeaders,
  IMMUTABLE_ASSET_CACHE_CONTROL,
  PAGE_CSP,
  pageHeaders,
} from "./page-headers.ts";

describe("page headers", () => {
  it("keeps one policy family: each page differs from the strictest only where it says", () => {
    expect(PAGE_CSP).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
        "worker-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    const strict =
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
      "worker-src 'none'; manifest-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
    expect(pageHeaders("collect")["content-security-policy"]).toBe(strict);
    expect(pageHeaders("local-console")["content-security-policy"]).toBe(strict);
    // The approval link's page shows agent text (as text) and posts Revoke with our own script.
    expect(pageHeaders("approval-result")["content-security-policy"]).toBe(strict);
    for (const kind of ["account", "collect", "local-console", "approval-result"] as const) {
      expect(pageHeaders(kind)).toMatchObject({
        "content-type": "text/html; charset=utf-8",
        "x-frame-options": "DENY",
        "referrer-policy": "no-referrer",
        "x-content-type-options": "nosniff",
        "cache-control": "no-store",
      });
      expect(pageHeaders(kind)["content-security-policy"]).not.toMatch(/unsafe|\*|https?:/);
    }
    // The device pages post forms: Origin must name us, so their policy is same-origin.
    expect(pageHeaders("device")["referrer-policy"]).toBe("same-origin");
  });

  it("serves only scripts and stylesheets", () => {
    expect(assetHeaders("a.js")["content-type"]).toBe("text/javascript; charset=utf-8");
    expect(assetHeaders("a.css")["content-type"]).toBe("text/css; charset=utf-8");
    expect(() => assetHeaders("a.html")).toThrow(/no content type/);
    expect(() => assetHeaders("README")).toThrow(/no content type/);
  });
});

describe("pages", () => {
  it("fills each slot HTML-escaped", () => {
    expect(escapeHtml(`<a href="x" title='y'>&</a>`)).toBe(
      "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;",
    );
    const page = readPage("pages/approve-result.html", ["heading", "sentence"]);
    const html = page.fill({ heading: "<b>{{sentence}}</b>", sentence: `"x" & 'y'` });
    expect(html).toContain("<h1>&lt;b&gt;{{sentence}}&lt;/b&gt;</h1>");
    expect(html).toContain("<title>&lt;b&gt;{{sentence}}&lt;/b&gt; · Latch</title>");
    expect(html).toContain('<p id="sentence">&quot;x&quot; &amp; &#39;y&#39;</p>');
  });

  it("refuses at start a page whose slots are not the ones its route fills", () => {
    expect(() => readPage("pages/approve-result.html", ["heading"])).toThrow(/slots/);
    expect(() => readPage("pages/sign-in.html", ["email"])).toThrow(/slots/);
    expect(() => readPage("pages/no-such-page.html")).toThrow(/ENOENT/);
    expect(readPage("pages/sign-in.html").fill({})).toMatch(/^<!doctype html>/);
  });
});

describe("assets", () => {
  let app: FastifyInstance | undefined;
  afterEach(async () => {
    await app?.close();
  });

  async function plane(): Promise<FastifyInstance> {
    app = Fastify();
    app.addHook("onSend", async (_request, reply) => {
      reply.header("cache-control", "no-store");
    });
    registerAssets(app, "assets", "/assets/");
    app.get("/page", async (_request, reply) => sendPage(reply, "collect", "<!doctype html>"));
    await app.ready();
    return app;
  }

  it("answers a file with its type, a short cache and an ETag, and 304 when it has not changed", async () => {
    const served = await plane();
    const first = await served.inject({ method: "GET", url: "/assets/common.js" });
    expect(first.statusCode).toBe(200);
    expect(first.headers["content-type"]).toBe("text/javascript; charset=utf-8");
    expect(first.headers["cache-control"]).toBe(ASSET_CACHE_CONTROL);
    expect(ASSET_CACHE_CONTROL).not.toContain("immutable");
    expect(first.headers.etag).toBeDefined();
    expect(first.headers["last-modified"]).toBeDefined();
    const again = await served.inject({
      method: "GET",
      url: "/assets/common.js",
      headers: { "if-none-match": String(first.headers.etag) },
    });
    expect(again.statusCode).toBe(304);
    expect(again.body).toBe("");
    expect(again.headers["cache-control"]).toBe(ASSET_CACHE_CONTROL);
    const css = await served.inject({ method: "GET", url: "/assets/site.css" });
    expect(css.headers["content-type"]).toBe("text/css; charset=utf-8");
  });

  it("names each script and stylesheet of a page by its bytes' hash, kept a year at that name", async () => {
    const served = await plane();
    const html = readPage("pages/console.html", ["email", "organisation", "backupCodesRemaining"]).fill({
      email: "",
      organisation: "",
      backupCodesRemaining: "",
    });
    const urls = [...html.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((match) => match[1]!);
    expect(urls.length).toBeGreaterThan(1);
    for (const url of urls) {
      const name = url.slice("/assets/".length).replace(/\.[0-9a-f]{12}(\.\w+)$/, "$1");
      const bytes = readFileSync(assetPath("assets", name));
      expect(url, name).toBe(`/assets/${hashedName(name, bytes)}`);
      const hashed = await served.inject({ method: "GET", url });
      expect(hashed.statusCode, url).toBe(200);
      expect(hashed.rawPayload.equals(bytes), url).toBe(true);
      expect(hashed.headers["cache-control"], url).toBe(IMMUTABLE_ASSET_CACHE_CONTROL);
      // Another hash is not that file: a stale page's URL is a 404, never a year of old bytes.
      const stale = url.replace(/\.[0-9a-f]{12}\./, ".000000000000.");
      expect((await served.inject({ method: "GET", url: stale })).statusCode, stale).toBe(404);
    }
    // The hash follows the bytes.
    expect(hashedName("a.js", Buffer.from("one"))).not.toBe(hashedName("a.js", Buffer.from("two")));
    expect(hashedName("a.js", Buffer.from("one"))).toMatch(/^a\.[0-9a-f]{12}\.js$/);
  });

  it("leaves anything else to the app: a missing file or a path out of the folder is a no-store 404", async () => {
    const served = await plane();
    for (const url of [
      "/assets/nope.js",
      "/assets/../package.json",
      "/assets/%2e%2e/package.json",
      "/assets/",
    ]) {
      const response = await served.inject({ method: "GET", url });
      expect(response.statusCode, url).toBe(404);
      expect(response.headers["cache-control"], url).toBe("no-store");
    }
  });

  it("sends a page with its kind's headers, after the app's own", async () => {
    const page = await (await plane()).inject({ method: "GET", url: "/page" });
    expect(page.headers["content-security-policy"]).toBe(pageHeaders("collect")["content-security-policy"]);
    expect(page.headers["cache-control"]).toBe("no-store");
    expect(page.headers["content-type"]).toBe("text/html; charset=utf-8");
  });
});
