// The public site and discovery files (spec 4.3 "Health and discovery", 5 rules 6 and 7): every
// path with its type, size and bytes; robots by NODE_ENV; security.txt at two addresses with the
// same bytes and a future Expires; a foreign Origin named on public paths while the walls stay; an
// invalid bearer ignored on a public page; and the committed icons equal to a fresh rendering.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import Fastify from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HostedHarness, startHosted } from "../../test/hosted.ts";
import { registerRouteSchemas } from "../http/route-schemas.ts";
import { PUBLIC_ROOT } from "../pages/page-files.ts";
import { registerSiteRoutes } from "./site.routes.ts";
import { renderSiteAssets } from "./site-assets.ts";

const BASE = "http://localhost:8787";
let h: HostedHarness;

beforeAll(async () => {
  h = await startHosted();
}, 60_000);

afterAll(async () => {
  await h.close();
});

const get = (url: string, headers: Record<string, string> = {}) =>
  h.app.inject({ method: "GET", url, headers });

/** A PNG's width and height, read from its IHDR chunk (after the 8-byte signature). */
function pngSize(bytes: Buffer): { width: number; height: number } {
  expect(bytes.subarray(0, 8).toString("hex")).toBe("89504e470d0a1a0a");
  expect(bytes.subarray(12, 16).toString("ascii")).toBe("IHDR");
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
}

const PNGS: Record<string, [number, number]> = {
  "/apple-touch-icon.png": [180, 180],
  "/logo.png": [512, 512],
  "/android-chrome-192x192.png": [192, 192],
  "/android-chrome-512x512.png": [512, 512],
  "/og.png": [1200, 630],
  "/og-square.png": [1200, 1200],
};

describe("icons and social images", () => {
  it.each(Object.entries(PNGS))("%s is a PNG of its real size", async (path, [width, height]) => {
    const response = await get(path);
    expect(response.statusCode).toBe(200);
    expect(response.headers["content-type"]).toBe("image/png");
    expect(pngSize(response.rawPayload)).toEqual({ width, height });
  });

  it("/favicon.ico is an icon of 16, 32 and 48 pixel PNGs", async () => {
    const response = await get("/favicon.ico");
    expect(response.headers["content-type"]).toBe("image/x-icon");
    const ico = response.rawPayload;
    expect([ico.readUInt16LE(0), ico.readUInt16LE(2), ico.readUInt16LE(4)]).toEqual([0, 1, 3]);
    const sizes = [0, 1, 2].map((index) => {
      const entry = 6 + 16 * index;
      const image = ico.subarray(
        ico.readUInt32LE(entry + 12),
        ico.readUInt32LE(entry + 12) + ico.readUInt32LE(entry + 8),
      );
      expect(pngSize(image).width).toBe(ico.readUInt8(entry));
      return ico.readUInt8(entry);
    });
    expect(sizes).toEqual([16, 32, 48]);
  });

  it.each(["/favicon.svg", "/mark.svg", "/mark-on-dark.svg"])("%s is an SVG", async (path) => {
    const response = await get(path);
    expect(response.headers["content-type"]).toBe("image/svg+xml");
    expect(response.body).toMatch(/^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
  });

  it("/site.webmanifest names Latch and its two Android icons", async () => {
    const response = await get("/site.webmanifest");
    expect(response.headers["content-type"]).toBe("application/manifest+json");
    const manifest = response.json();
    expect(manifest.name).toBe("Latch");
    expect(manifest.icons.map((icon: { src: string }) => icon.src)).toEqual([
      "/android-chrome-192x192.png",
      "/android-chrome-512x512.png",
    ]);
  });

  it("are the committed files, equal to a fresh rendering of the mark (npm run assets)", () => {
    for (const [name, bytes] of renderSiteAssets()) {
      const committed = readFileSync(join(PUBLIC_ROOT, "site", name));
      expect(committed.equals(bytes), `${name}: run npm run assets`).toBe(true);
    }
  });
});

describe("the landing page and docs", () => {
  it("GET / says what Latch is, shows the flow and how to connect, with a strict policy and a short cache", async () => {
    const response = await get("/");
    expect(response.statusCode).toBe(200);
    expect(response.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(response.headers["cache-control"]).toBe("public, max-age=300");
    // Its one script is ours (the copy buttons); nothing is fetched.
    expect(response.headers["content-security-policy"]).toContain("script-src 'self'");
    expect(response.headers["content-security-policy"]).toContain("connect-src 'none'");
    expect(response.body).toContain("credential vault and broker for AI agents");
    // The flow, drawn across for a wide window and top to bottom for a phone.
    expect(response.body).toContain('<svg class="flow flow-wide"');
    expect(response.body).toContain('<svg class="flow flow-narrow"');
    expect(response.body).toContain(`${BASE}/mcp`);
    // Never a bare `npx vault`, which would fetch another package of that name.
    expect(response.body).toContain("npx --no -- vault serve");
    expect(response.body).not.toMatch(/npx vault/);
    // The console's picture, and no inline script: the only script is a file of ours.
    expect(response.body).toContain('<img\n          src="/console.png"');
    expect(response.body.match(/<script\b[^>]*>/g)).toEqual([
      expect.stringMatching(/^<script src="\/assets\/landing\.[0-9a-f]{12}\.js">$/),
    ]);
    expect(response.body).not.toMatch(/\{\{/);
    expect((await get("/console.png")).headers["content-type"]).toBe("image/png");
  });

  it("ignores an invalid bearer on a public page (spec 5 rule 7)", async () => {
    const response = await get("/", { authorization: "Bearer avm_notarealtokenatall_000000000" });
    expect(response.statusCode).toBe(200);
  });

  it("/docs pages, /llms.txt and /llms-full.txt come from the same Markdown", async () => {
    const source = readFileSync(join(PUBLIC_ROOT, "docs", "connect.md"), "utf8").replaceAll("BASE_URL", BASE);
    const page = await get("/docs/connect");
    expect(page.statusCode).toBe(200);
    expect(page.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(page.body).toContain("<h1>Connect an agent</h1>");
    expect(page.body).toContain(`${BASE}/mcp`);
    const full = await get("/llms-full.txt");
    expect(full.headers["content-type"]).toBe("text/markdown; charset=utf-8");
    expect(full.body).toContain(source.trim());
    const index = await get("/llms.txt");
    expect(index.body).toMatch(/^# Latch\n\n> /);
    expect(index.body).toContain(`- [Connect an agent](${BASE}/docs/connect)`);
    for (const path of [
      "/docs",
      "/docs/security",
      "/docs/approvals",
      "/docs/members",
      "/docs/sign-in",
      "/docs/inject",
      "/docs/cli",
      "/docs/run",
    ]) {
      expect((await get(path)).statusCode, path).toBe(200);
    }
    // The words users asked for: the agent is under Clients, the device flow's grant type, mail
    // without a server, and how to run the CLI without fetching anything.
    expect((await get("/docs/connect")).body).toContain("<strong>Clients</strong>");
    expect((await get("/docs/connect")).body).not.toMatch(/under Access/);
    expect((await get("/docs/run")).body).toContain("urn:ietf:params:oauth:grant-type:device_code");
    expect((await get("/docs/run")).body).toContain("./.latch/outbox/");
    expect((await get("/docs/cli")).body).toContain("npx --no -- vault");
    expect((await get("/docs/approvals")).body).toContain("any method, any path");
  });
});

describe("discovery files", () => {
  it("/robots.txt outside production disallows everything, lists the sitemap and points to llms.txt", async () => {
    const response = await get("/robots.txt");
    expect(response.headers["content-type"]).toBe("text/plain; charset=utf-8");
    expect(response.body).toContain("Disallow: /\n");
    expect(response.body).toContain(`Sitemap: ${BASE}/sitemap.xml`);
    expect(response.body).toContain(`# For language models: ${BASE}/llms.txt`);
    expect(response.body).toContain(`${BASE}/llms-full.txt`);
  });

  it("/robots.txt in production disallows the console, auth, collect, api, mcp, oauth, invitations and sso only", async () => {
    // The site's routes alone on a bare app, as a plane with NODE_ENV=production registers them.
    const app = Fastify();
    registerRouteSchemas(app);
    registerSiteRoutes(app, { baseUrl: BASE, isProduction: true, now: () => new Date() });
    const response = await app.inject({ method: "GET", url: "/robots.txt" });
    await app.close();
    expect(response.statusCode).toBe(200);
    const text = response.body;
    for (const path of [
      "/console",
      "/sign-in",
      "/sign-up",
      "/collect",
      "/api/",
      "/mcp",
      "/oauth/",
      "/invite",
      "/sso/",
    ]) {
      expect(text).toContain(`Disallow: ${path}\n`);
    }
    expect(text).not.toContain("Disallow: /\n");
    expect(text).toContain(`Sitemap: ${BASE}/sitemap.xml`);
    expect(text).toContain("/llms.txt");
  });

  it("/sitemap.xml lists the canonical public pages", async () => {
    const response = await get("/sitemap.xml");
    expect(response.headers["content-type"]).toBe("application/xml; charset=utf-8");
    const locs = [...response.body.matchAll(/<loc>([^<]+)<\/loc>/g)].map((m) => m[1]);
    expect(locs).toEqual([
      `${BASE}/`,
      `${BASE}/docs`,
      `${BASE}/docs/connect`,
      `${BASE}/docs/approvals`,
      `${BASE}/docs/members`,
      `${BASE}/docs/sign-in`,
      `${BASE}/docs/inject`,
      `${BASE}/docs/cli`,
      `${BASE}/docs/run`,
      `${BASE}/docs/policies`,
      `${BASE}/docs/security`,
    ]);
  });

  it("security.txt answers identical bytes at both addresses, with the RFC 9116 fields and a future Expires", async () => {
    const wellKnown = await get("/.well-known/security.txt");
    const root = await get("/security.txt");
    expect(wellKnown.statusCode).toBe(200);
    expect(wellKnown.headers["content-type"]).toBe("text/plain; charset=utf-8");
    expect(root.rawPayload.equals(wellKnown.rawPayload)).toBe(true);
    expect(wellKnown.body).toMatch(/^Contact: mailto:security@localhost$/m);
    expect(wellKnown.body).toMatch(/^Preferred-Languages: en$/m);
    expect(wellKnown.body).toContain(`Canonical: ${BASE}/.well-known/security.txt`);
    const expires = /^Expires: (\S+)$/m.exec(wellKnown.body)?.[1];
    expect(new Date(expires!).getTime()).toBeGreaterThan(Date.now());
    expect(new Date(expires!).getTime()).toBeLessThan(Date.now() + 366 * 86_400_000);
  });
});

describe("Origin (spec 5 rule 6)", () => {
  const PUBLIC = ["/", "/docs", "/robots.txt", "/.well-known/security.txt", "/og.png", "/assets/site.css"];
  const foreign = "https://elsewhere.example";

  it.each(PUBLIC)("%s names a foreign Origin on GET, HEAD and OPTIONS", async (url) => {
    for (const method of ["GET", "HEAD", "OPTIONS"] as const) {
      const response = await h.app.inject({ method, url, headers: { origin: foreign } });
      expect(response.statusCode, `${method} ${url}`).toBeLessThan(300);
      expect(response.headers["access-control-allow-origin"], `${method} ${url}`).toBe(foreign);
      expect(response.headers["access-control-allow-credentials"]).toBeUndefined();
    }
  });

  it.each(["/console", "/sign-in", "/api/items", "/collect/abc"])(
    "%s still refuses a foreign Origin",
    async (url) => {
      const response = await get(url, { origin: foreign });
      expect(response.statusCode).toBe(403);
      expect(response.headers["access-control-allow-origin"]).toBeUndefined();
    },
  );
});
