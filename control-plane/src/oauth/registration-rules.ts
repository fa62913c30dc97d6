// Dynamic client registration (spec 5 rule 2, DECISIONS "Redirect URIs"), checked before
// oidc-provider sees it: public clients only (no client secret is ever issued), redirect URIs that
// are https, RFC 8252 loopback http (any port) or a desktop application's private-use scheme
// (reverse-domain, or a real client's own), and nothing else. One refused URI refuses the registration whole, naming it. Every client is
// registered as `native`, so that loopback ports are ignored when matching (RFC 8252 7.3) and
// private-use schemes are accepted (oidc-provider's `web` default refuses both).

/** Schemes that are never an application's redirect (a script, a file, a document in the URL). */
const FORBIDDEN_SCHEMES = new Set([
  "javascript:",
  "vbscript:",
  "data:",
  "file:",
  "blob:",
  "about:",
  "filesystem:",
  "ftp:",
  "ws:",
  "wss:",
  "mailto:",
  "tel:",
  "sms:",
]);
const LOOPBACK_HOSTS = new Set(["127.0.0.1", "[::1]", "localhost"]);
const PRIVATE_USE_SCHEME = /^[a-z][a-z0-9+.-]{0,63}:$/;
/**
 * Private-use schemes of real MCP clients that are not reverse-domain (DECISIONS). Any other scheme
 * must hold a period (RFC 8252 7.1, `com.example.app:`): a scheme such as `x-evil:` belongs to no
 * one, so `x-evil://claude.ai/cb` would let the consent page name a host the code never goes to.
 */
const KNOWN_CLIENT_SCHEMES = new Set(["cursor:", "vscode:", "vscode-insiders:"]);
const GRANT_TYPES = new Set([
  "authorization_code",
  "refresh_token",
  "urn:ietf:params:oauth:grant-type:device_code",
]);

export type RegistrationCheck =
  | { ok: true; metadata: Record<string, unknown> }
  | { ok: false; error: "invalid_client_metadata" | "invalid_redirect_uri"; description: string };

const quoted = (uri: string) => JSON.stringify(uri.length > 80 ? `${uri.slice(0, 80)}...` : uri);

/** Why a redirect URI is refused, or undefined when it is allowed. */
export function redirectUriProblem(uri: string): string | undefined {
  const parsed = URL.parse(uri);
  if (!parsed) return "is not an absolute URI";
  if (parsed.hash || uri.includes("#")) return "has a fragment";
  if (parsed.username || parsed.password) return "carries credentials";
  const scheme = parsed.protocol.toLowerCase();
  if (scheme === "https:") return parsed.hostname ? undefined : "has no host";
  if (scheme === "http:") {
    return LOOPBACK_HOSTS.has(parsed.hostname)
      ? undefined
      : "uses http to a host other than loopback (127.0.0.1, [::1], localhost); use https";
  }
  if (FORBIDDEN_SCHEMES.has(scheme))
    return `uses the ${scheme.slice(0, -1)} scheme, which is never a redirect`;
  if (!PRIVATE_USE_SCHEME.test(scheme)) return "has a scheme that is not an application's";
  if (!scheme.includes(".") && !KNOWN_CLIENT_SCHEMES.has(scheme)) {
    return `uses the private-use scheme ${scheme} that is not reverse-domain (RFC 8252 7.1: one with a period, such as com.example.app:) nor a known client's (${[...KNOWN_CLIENT_SCHEMES].join(" ")})`;
  }
  return undefined;
}

/**
 * Metadata naming a document for the server to fetch besides the client's own (spec 8 counts
 * those fetches; oidc-provider would fetch these at registration, uncounted). A public client has
 * no keys to publish and Latch uses no pairwise subjects, so neither has a use here.
 */
const FETCHED_METADATA = ["sector_identifier_uri", "jwks_uri"] as const;

/** Why metadata that names a document to fetch is refused, or undefined. */
export function fetchedMetadataProblem(metadata: Record<string, unknown>): string | undefined {
  const named = FETCHED_METADATA.filter((field) => metadata[field] !== undefined);
  return named.length > 0
    ? `${named.join(" and ")} ${named.length > 1 ? "are" : "is"} not accepted: Latch fetches no document a client names besides its own metadata`
    : undefined;
}

/**
 * Metadata asking for sender-constrained access tokens (RFC 9449 5.2 `dpop_bound_access_tokens`,
 * RFC 8705 `tls_client_certificate_bound_access_tokens`): Latch issues bearer tokens only, so a
 * client that must never hold a bearer token is told so rather than silently given one.
 */
const BOUND_TOKEN_METADATA = [
  "dpop_bound_access_tokens",
  "tls_client_certificate_bound_access_tokens",
] as const;

/** Why metadata that asks for key-bound access tokens is refused, or undefined. */
export function boundTokensProblem(metadata: Record<string, unknown>): string | undefined {
  const asked = BOUND_TOKEN_METADATA.find((field) => metadata[field] === true);
  return asked
    ? `${asked} is not supported: Latch issues bearer access tokens only (no DPoP or certificate binding)`
    : undefined;
}

export function checkRegistration(body: unknown): RegistrationCheck {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return {
      ok: false,
      error: "invalid_client_metadata",
      description: "send the client metadata as a JSON object",
    };
  }
  const metadata = { ...(body as Record<string, unknown>) };
  const method = metadata.token_endpoint_auth_method;
  if ((method !== undefined && method !== "none") || "client_secret" in metadata) {
    return {
      ok: false,
      error: "invalid_client_metadata",
      description:
        "only public clients may register (token_endpoint_auth_method none): Latch never issues a client secret",
    };
  }
  const fetched = fetchedMetadataProblem(metadata) ?? boundTokensProblem(metadata);
  if (fetched) return { ok: false, error: "invalid_client_metadata", description: fetched };
  const uris = metadata.redirect_uris ?? [];
  if (!Array.isArray(uris) || uris.some((u) => typeof u !== "string")) {
    return {
      ok: false,
      error: "invalid_redirect_uri",
      description: "redirect_uris must be an array of URIs",
    };
  }
  for (const [index, uri] of (uris as string[]).entries()) {
    const problem = redirectUriProblem(uri);
    if (problem) {
      return {
        ok: false,
        error: "invalid_redirect_uri",
        description: `redirect_uris[${index}] ${quoted(uri)} ${problem}; the registration was refused whole`,
      };
    }
  }
  const grantTypes = metadata.grant_types ?? ["authorization_code", "refresh_token"];
  if (!Array.isArray(grantTypes) || grantTypes.some((g) => typeof g !== "string" || !GRANT_TYPES.has(g))) {
    return {
      ok: false,
      error: "invalid_client_metadata",
      description: `grant_types may hold only ${[...GRANT_TYPES].join(", ")}`,
    };
  }
  const grants = new Set(grantTypes as string[]);
  // Every MCP client gets refresh tokens (DECISIONS), so it may use them.
  grants.add("refresh_token");
  if (uris.length > 0) grants.add("authorization_code");
  const responseTypes = grants.has("authorization_code") ? ["code"] : [];
  return {
    ok: true,
    metadata: {
      ...metadata,
      application_type: "native",
      token_endpoint_auth_method: "none",
      grant_types: [...grants],
      response_types: responseTypes,
      // Scopes are the server's to give (only "mcp"); a client's list is not a restriction here.
      scope: undefined,
    },
  };
}
