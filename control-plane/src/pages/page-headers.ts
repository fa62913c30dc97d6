// The response headers of every HTML page and browser file the planes serve: one
// Content-Security-Policy family, where each page names only how it differs from the strictest
// policy, plus framing, referrer, sniffing and caching. No page holds inline script or style, so
// no policy needs 'unsafe-inline' or another host.

type Directive =
  | "default-src"
  | "script-src"
  | "style-src"
  | "img-src"
  | "connect-src"
  | "worker-src"
  | "manifest-src"
  | "base-uri"
  | "form-action"
  | "frame-ancestors";

/**
 * The strictest policy, in the order it is written out: our own scripts, stylesheets, images and
 * fetches; no <base> that could redirect relative URLs; no form posts; no framing (clickjacking).
 */
const STRICT: ReadonlyArray<readonly [Directive, string]> = [
  ["default-src", "'none'"],
  ["script-src", "'self'"],
  ["style-src", "'self'"],
  ["img-src", "'self'"],
  ["connect-src", "'self'"],
  ["worker-src", "'none'"],
  ["manifest-src", "'none'"],
  ["base-uri", "'none'"],
  ["form-action", "'none'"],
  ["frame-ancestors", "'none'"],
];

/** Each kind of page, and where its policy differs from STRICT. */
const CSP_DIFFERENCES = {
  /**
   * Sign-in, sign-up, enrolment, the authenticator step and the console: the enrolment QR code is a
   * data: image. Every form is sent by script (fetch), so the browser may submit none itself: a page
   * whose script did not load (a rolling deploy, a blocked file) would otherwise send a form by GET,
   * putting what was typed (a credential, a client secret, a code) in the URL, the history and a
   * proxy's access log.
   */
  account: {
    "img-src": "'self' data:",
    "worker-src": "'self'",
    "manifest-src": "'self'",
  },
  /** The collect page (/collect/:id). */
  collect: {},
  /** The console of `vault serve` (GET /). */
  "local-console": {},
  /**
   * The OAuth consent page (/consent): its script posts the decision and then follows the answer's
   * location, which is the client's redirect (any scheme), so it navigates rather than submits.
   */
  consent: {},
  /** The device code pages oidc-provider renders (/device): plain forms that post to us, no script. */
  device: { "script-src": "'none'", "connect-src": "'none'", "form-action": "'self'" },
  /** The public site (/docs, the 404 page): text, our stylesheet and images, no script or fetch. */
  site: { "script-src": "'none'", "connect-src": "'none'" },
  /**
   * The landing page (GET /): the site's policy plus our own script for its copy buttons; no fetch;
   * the web app manifest it links (installed, it opens the console).
   */
  landing: { "connect-src": "'none'", "manifest-src": "'self'" },
  /**
   * The answer to an approval link: the request it approved (agent text, as text nodes only) and
   * our script for "Revoke this approval", which posts to us; no form, no other host.
   */
  "approval-result": {},
  /** An invitation link's page (/invite?token=): our script for Join, which posts to us. */
  invitation: {},
  /** A single sign-on that did not finish (/sso/...): a sentence and a link; no script or fetch. */
  "sso-result": { "script-src": "'none'", "connect-src": "'none'" },
} as const satisfies Record<string, Partial<Record<Directive, string>>>;

export type PageKind = keyof typeof CSP_DIFFERENCES;

function policyOf(kind: PageKind): string {
  const differences: Partial<Record<Directive, string>> = CSP_DIFFERENCES[kind];
  return STRICT.map(([directive, value]) => `${directive} ${differences[directive] ?? value}`).join("; ");
}

/** The policy of the sign-in pages and the console. */
export const PAGE_CSP = policyOf("account");

/**
 * The device code pages post plain forms, and under no-referrer a browser sends such a post with
 * `Origin: null`, which the operator guard refuses as another site's: same-origin names our origin
 * to us and still tells no other site anything.
 */
const REFERRER_POLICY: Partial<Record<PageKind, string>> = { device: "same-origin" };

function headersOf(kind: PageKind): Readonly<Record<string, string>> {
  return Object.freeze({
    "content-type": "text/html; charset=utf-8",
    "content-security-policy": policyOf(kind),
    // For browsers that predate frame-ancestors.
    "x-frame-options": "DENY",
    // An approval link carries its token in the URL: no page tells another site where it was.
    "referrer-policy": REFERRER_POLICY[kind] ?? "no-referrer",
    "x-content-type-options": "nosniff",
    // A page's answer depends on the session (a redirect, or the operator's own email), so no
    // cache keeps one.
    "cache-control": "no-store",
  });
}

const PAGE_HEADERS = Object.fromEntries(
  Object.keys(CSP_DIFFERENCES).map((kind) => [kind, headersOf(kind as PageKind)]),
) as Record<PageKind, Readonly<Record<string, string>>>;

/**
 * The public site's pages and discovery files answer the same to everyone (no session is read), so
 * any cache may keep one for five minutes; none has a content-hashed name, so none is immutable.
 */
export const PUBLIC_PAGE_CACHE_CONTROL = "public, max-age=300";

const publicHeadersOf = (kind: "site" | "landing") =>
  Object.freeze({ ...PAGE_HEADERS[kind], "cache-control": PUBLIC_PAGE_CACHE_CONTROL });
const PUBLIC_PAGE_HEADERS = { site: publicHeadersOf("site"), landing: publicHeadersOf("landing") };

/** The headers of one kind of HTML page. */
export function pageHeaders(kind: PageKind): Readonly<Record<string, string>> {
  return PAGE_HEADERS[kind];
}

const ASSET_TYPES: Readonly<Record<string, string>> = {
  js: "text/javascript; charset=utf-8",
  css: "text/css; charset=utf-8",
  svg: "image/svg+xml",
  png: "image/png",
  ico: "image/x-icon",
  webmanifest: "application/manifest+json",
};

/** The headers of a public page (GET /, /docs): the "site" (or "landing") policy, cached briefly. */
export function publicPageHeaders(kind: "site" | "landing" = "site"): Readonly<Record<string, string>> {
  return PUBLIC_PAGE_HEADERS[kind];
}

/** The headers of a public text file (robots.txt, sitemap.xml, security.txt, llms.txt). */
export function publicTextHeaders(type: string): Readonly<Record<string, string>> {
  return Object.freeze({
    "content-type": type,
    "cache-control": PUBLIC_PAGE_CACHE_CONTROL,
    "x-content-type-options": "nosniff",
  });
}

/**
 * A file asked for by its plain name may change with the next release, so a browser keeps it only
 * briefly: after five minutes it asks again with the file's ETag (a 304 when nothing changed).
 */
export const ASSET_CACHE_CONTROL = "public, max-age=300";

/** A file asked for by its content-hashed name (page-files.ts) never changes: keep it a year. */
export const IMMUTABLE_ASSET_CACHE_CONTROL = "public, max-age=31536000, immutable";

/**
 * The headers of a browser file (a script, a stylesheet, an icon, the web manifest); any other
 * kind of file is refused when it is registered.
 */
export function assetHeaders(file: string): Readonly<Record<string, string>> {
  const type = ASSET_TYPES[file.slice(file.lastIndexOf(".") + 1)];
  if (!type) throw new Error(`no content type for the browser file ${file}: add one to page-headers.ts`);
  return Object.freeze({
    "content-type": type,
    "cache-control": ASSET_CACHE_CONTROL,
    "x-content-type-options": "nosniff",
    // The console's push worker (Web Push) serves the whole site from /assets/: it shows
    // notifications and opens the console, and handles no fetch.
    ...(PUSH_WORKER.test(file) ? { "service-worker-allowed": "/" } : {}),
  });
}

/**
 * HSTS (RFC 6797): a browser that saw the plane over https asks it only over https for a year, its
 * subdomains too, so an attacker on the network cannot strip TLS from a later visit (typing the bare
 * host, an http:// link) and read the session cookie or an approval link's token. Only when BASE_URL
 * is https: a browser ignores it over http (section 8.1), and the local vault and tests speak http.
 */
const STRICT_TRANSPORT_SECURITY = "max-age=31536000; includeSubDomains";

/** The Strict-Transport-Security value every answer of the plane at `baseUrl` carries, or none. */
export function strictTransportSecurity(baseUrl: string): string | undefined {
  return new URL(baseUrl).protocol === "https:" ? STRICT_TRANSPORT_SECURITY : undefined;
}

/** The service worker's file, by its name or its content-hashed name. */
const PUSH_WORKER = /(?:^|\/)push-worker(?:\.[0-9a-f]{12})?\.js$/;
