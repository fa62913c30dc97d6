// The files under control-plane/public/ and how they are answered. A page is read once, when the
// routes are registered, and sent from memory with its kind's headers; the few that show a server
// value name it as a {{slot}}, filled HTML-escaped. Scripts and stylesheets go out through
// @fastify/static (ETag, Last-Modified, 304), each at two routes: its plain name with a short cache,
// and a name carrying a hash of its bytes (console.3f9a0c1b2d4e.js) that any cache may keep for a
// year. A page names its scripts and stylesheets by the hashed name, so a new release is never
// half-cached.
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { basename, dirname, extname, join } from "node:path";
import { fileURLToPath } from "node:url";
import fastifyStatic from "@fastify/static";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { assetHeaders, IMMUTABLE_ASSET_CACHE_CONTROL, type PageKind, pageHeaders } from "./page-headers.ts";

/** control-plane/public/, found from this file so that any working directory serves it. */
export const PUBLIC_ROOT = fileURLToPath(new URL("../../public/", import.meta.url));

/**
 * Browser files of npm packages, served among the assets under a name of ours: the page's own CSP
 * ('self') covers them, no CDN is trusted, and their bytes are the pinned package's (the lockfile).
 */
const VENDOR_ASSETS: Readonly<Record<string, string>> = {
  // @simplewebauthn/browser's UMD bundle (global SimpleWebAuthnBrowser): WebAuthn ceremonies.
  "simplewebauthn-browser.js": fileURLToPath(
    new URL("../dist/bundle/index.umd.min.js", import.meta.resolve("@simplewebauthn/browser")),
  ),
};

/** Where the bytes of `/assets/<name>` are: a vendor file, or public/assets/<name>. */
export function assetPath(folder: string, name: string): string {
  return (folder === "assets" && VENDOR_ASSETS[name]) || join(PUBLIC_ROOT, folder, name);
}

const HTML_ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

/** Text made safe for an HTML text node or a quoted attribute value. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}

const SLOT = /\{\{([A-Za-z]+)\}\}/g;

/** The file name that carries the first 12 hex digits of the SHA-256 of `bytes`. */
export function hashedName(name: string, bytes: Buffer): string {
  const ext = extname(name);
  const hash = createHash("sha256").update(bytes).digest("hex").slice(0, 12);
  return `${name.slice(0, name.length - ext.length)}.${hash}${ext}`;
}

/**
 * Where a page's scripts and stylesheets are served from: a page of public/local/ is the `vault
 * serve` console, whose files sit at the root; every other page uses /assets/.
 */
const ASSET_MOUNTS: Readonly<Record<string, { prefix: string; folder: string }>> = {
  local: { prefix: "/", folder: "local/assets" },
  pages: { prefix: "/assets/", folder: "assets" },
};

const ASSET_REFERENCE = /(<(?:script|link)\b[^>]*?\b(?:src|href)=")([^"]+)(")/g;

/** `html` with each `<script src>` and `<link href>` of a file in `mount` named by its hash. */
function withHashedAssets(html: string, mount: { prefix: string; folder: string } | undefined): string {
  if (!mount) return html;
  return html.replace(ASSET_REFERENCE, (whole, before: string, url: string, after: string) => {
    const name = url.startsWith(mount.prefix) ? url.slice(mount.prefix.length) : "";
    if (!/^[\w.-]+\.(?:js|css)$/.test(name)) return whole;
    const bytes = readFileSync(assetPath(mount.folder, name));
    return `${before}${mount.prefix}${hashedName(name, bytes)}${after}`;
  });
}

/** A page with its slots; `fill` answers the page with each slot's value HTML-escaped. */
export interface PageFile<Slot extends string> {
  fill(values: Readonly<Record<Slot, string>>): string;
}

/**
 * Reads `path` (under public/) and checks that its {{slots}} are exactly `slots`, so a page and
 * the code that fills it cannot drift apart unnoticed: a mismatch stops the server at start.
 */
export function readPage<Slot extends string = never>(
  path: string,
  slots: readonly Slot[] = [],
): PageFile<Slot> {
  const text = withHashedAssets(
    readFileSync(join(PUBLIC_ROOT, path), "utf8"),
    ASSET_MOUNTS[path.slice(0, path.indexOf("/"))],
  );
  // split() with a capture group: text at even indexes, slot names at odd ones.
  const parts = text.split(SLOT);
  const found = new Set(parts.filter((_, index) => index % 2 === 1));
  const expected = new Set<string>(slots);
  if (found.size !== expected.size || [...found].some((slot) => !expected.has(slot))) {
    throw new Error(
      `${path} has the slots {${[...found].join(", ")}}, its route fills {${slots.join(", ")}}`,
    );
  }
  return {
    fill(values) {
      return parts.map((part, index) => (index % 2 === 1 ? escapeHtml(values[part as Slot]) : part)).join("");
    },
  };
}

/** Answers an HTML page with the headers of its kind (page-headers.ts). */
export function sendPage(reply: FastifyReply, kind: PageKind, html: string): FastifyReply {
  return reply.headers(pageHeaders(kind)).send(html);
}

/**
 * Spec 5 rule 6: a public page or file may be read from any site, so its answer names the asking
 * Origin (no credentials are allowed with it). The walled paths of operator-guard.ts never get here.
 */
export function reflectOrigin(request: FastifyRequest, reply: FastifyReply): void {
  const origin = request.headers.origin;
  if (origin) reply.header("access-control-allow-origin", origin);
  reply.header("vary", "Origin");
}

/** The CORS preflight of a public GET path: its methods, for the asking Origin. */
export function registerPublicPreflight(app: FastifyInstance, path: string): void {
  app.options(path, async (request, reply) => {
    reflectOrigin(request, reply);
    return reply.header("access-control-allow-methods", "GET, HEAD, OPTIONS").status(204).send();
  });
}

/**
 * Serves every file of public/`folder` at `prefix` + its name, one GET (and HEAD) route each, so
 * the route table names every file and anything else is the app's own 404; each also answers a
 * CORS preflight and names a foreign Origin (reflectOrigin). With `only`, just those files.
 */
export function registerAssets(
  app: FastifyInstance,
  folder: string,
  prefix: string,
  only?: readonly string[],
): void {
  const root = join(PUBLIC_ROOT, folder);
  const names = readdirSync(root, { withFileTypes: true })
    .filter((entry) => entry.isFile() && !entry.name.startsWith("."))
    .map((entry) => entry.name);
  if (folder === "assets") names.push(...Object.keys(VENDOR_ASSETS));
  const files = names
    .filter((name) => !only || only.includes(name))
    .map((name) => {
      const path = assetPath(folder, name);
      return {
        name,
        file: basename(path),
        folder: dirname(path),
        hashed: hashedName(name, readFileSync(path)),
        headers: assetHeaders(name),
      };
    });
  // Its own scope: @fastify/static decorates the reply, and each surface may register it once.
  app.register(async (scope) => {
    await scope.register(fastifyStatic, {
      root,
      serve: false,
      cacheControl: false,
      etag: true,
      lastModified: true,
    });
    for (const file of files) {
      for (const [url, cache] of [
        [`${prefix}${file.name}`, undefined],
        [`${prefix}${file.hashed}`, IMMUTABLE_ASSET_CACHE_CONTROL],
      ] as const) {
        scope.get(
          url,
          {
            // Route hooks run after the app's own onSend hooks, which mark every answer no-store:
            // a file that was found (200, or 304 to a matching ETag) gets its type and cache instead.
            onSend: async (request, reply) => {
              if (reply.statusCode < 400) {
                reply.headers(file.headers);
                if (cache) reply.header("cache-control", cache);
              }
              reflectOrigin(request, reply);
            },
          },
          (_request, reply) => reply.sendFile(file.file, file.folder),
        );
        registerPublicPreflight(scope, url);
      }
    }
  });
}
