// The plain-text discovery files of spec 4.3: /robots.txt, /sitemap.xml and security.txt.

/**
 * Paths no crawler should walk in production: the console, sign-in, collect, the API, MCP, OAuth,
 * invitations (their link carries a token) and single sign-on.
 */
const PRIVATE_PREFIXES = [
  "/console",
  "/sign-in",
  "/sign-up",
  "/enroll-totp",
  "/verify-totp",
  "/approve",
  "/consent",
  "/device",
  "/collect",
  "/connect",
  "/integrations",
  "/api/",
  "/mcp",
  "/oauth/",
  "/invite",
  "/sso/",
];

/**
 * /robots.txt. In production the private paths are disallowed; elsewhere (a developer's or a test
 * plane) every path is, so that no staging copy is ever indexed.
 */
export function robotsTxt(baseUrl: string, isProduction: boolean): string {
  const rules = isProduction ? PRIVATE_PREFIXES.map((prefix) => `Disallow: ${prefix}`) : ["Disallow: /"];
  return [
    "# Latch: a credential vault and broker for AI agents.",
    `# For language models: ${baseUrl}/llms.txt (index) and ${baseUrl}/llms-full.txt (full docs).`,
    "User-agent: *",
    ...rules,
    "",
    `Sitemap: ${baseUrl}/sitemap.xml`,
    "",
  ].join("\n");
}

/** /sitemap.xml: the canonical public pages. */
export function sitemapXml(baseUrl: string, paths: readonly string[]): string {
  const urls = paths.map((path) => `  <url><loc>${baseUrl}${path}</loc></url>`);
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">',
    ...urls,
    "</urlset>",
    "",
  ].join("\n");
}

/** How long a security.txt stays valid (RFC 9116 2.5.5 advises less than a year). */
const SECURITY_TXT_DAYS = 180;

/**
 * security.txt (RFC 9116), served at /.well-known/security.txt and /security.txt with the same
 * bytes. Expires is counted from the day the plane started, so it is always in the future while a
 * plane runs for less than half a year between restarts.
 */
export function securityTxt(baseUrl: string, now: Date): string {
  const day = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  const expires = new Date(day + SECURITY_TXT_DAYS * 86_400_000).toISOString().replace(".000Z", "Z");
  return [
    `Contact: mailto:security@${new URL(baseUrl).hostname}`,
    `Expires: ${expires}`,
    "Preferred-Languages: en",
    `Canonical: ${baseUrl}/.well-known/security.txt`,
    `Policy: ${baseUrl}/docs/security`,
    "",
  ].join("\n");
}
