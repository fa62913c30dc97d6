// Request path and target checks for http_request (spec 4.2 `path`, rules 1 and 2).
//
// Rule 1: the path is validated once, and that exact string is what the operator approves and what
// the proxy sends. So nothing here rewrites a path: a path that a server, a reverse proxy or a URL
// parser could read differently from how it reads to a human is refused, never "fixed". Messages
// never echo the query string (it may carry a token the agent holds); they name the offending piece
// instead. `normalisePathForMatch` reads a valid path as an origin does, for comparisons only.
import { checkHostname } from "./host.ts";
import { quoteUntrusted } from "./quote.ts";

export type PathCheck = { ok: true; path: string } | { ok: false; code: "invalid_path"; message: string };

export type TargetCheck =
  | { ok: true; host: string | undefined; path: string }
  | {
      ok: false;
      code: "invalid_path" | "invalid_host" | "ip_literal" | "invalid_port";
      message: string;
      hint?: string;
    };

/** 8 KiB: common server limits for the request line are 8 KiB, and an approval must stay readable. */
export const MAX_PATH_LENGTH = 8192;

const HTTPS_HINT =
  "Latch calls APIs over HTTPS only; write the URL as https://host/path, or give a path and host.";
const PORT_HINT = "Latch connects to port 443 only; drop the port from the URL";
const PATH_HINT = "Give a path that starts with /, such as /v1/items, or a full https:// URL.";

/**
 * RFC 3986 pchar plus "/" and "%" (escapes are checked separately). Everything else in the path part
 * ("<>\"{}|^`[]" and spaces) must be percent-encoded; a raw "{id}" usually means an unfilled template.
 */
const PATH_CHARS = /^[A-Za-z0-9\-._~!$&'()*+,;=:@%/]*$/;
/** A "%" that is not followed by two hex digits: "%zz", "%4", a trailing "%". */
const MALFORMED_ESCAPE = /%(?![0-9A-Fa-f]{2})/;
/** Encoded "/", "\" or ".": they let a segment decode into a different path on the origin. */
const ENCODED_SEPARATOR = /%(?:2f|5c|2e)/i;
/** Encoded controls, incl. %0d%0a (CRLF) and %00 (NUL): header-injection and truncation bait. */
const ENCODED_CONTROL = /%(?:[01][0-9a-f]|7f)/i;
/** The same, encoded twice ("%252e%252e"): servers that decode twice see "..". */
const DOUBLE_ENCODED = /%25(?:2f|5c|2e|[01][0-9a-f]|7f)/i;
/** Encoded ";": "..%3b" decodes to "..;", which Tomcat and Spring read as "..". */
const ENCODED_SEMICOLON = /%3b/i;
/** A run of percent escapes; a multi-byte UTF-8 character always sits inside one run. */
const ESCAPE_RUN = /(?:%[0-9A-Fa-f]{2})+/g;
/**
 * Strict UTF-8 (WHATWG "fatal"): overlong forms (%c0%af for "/"), UTF-8-encoded surrogates
 * (%ed%a0%80), code points over U+10FFFF, cut-short sequences and stray continuation bytes all
 * throw. Lenient decoders turn some of them into "/" or "." after the scope check has passed.
 */
const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true });
/** What a path must never turn into after Unicode folding: a separator, a dot, ";" or a new "%". */
const STRUCTURAL_ASCII = /[/.\\;%]/;
/**
 * Slashes NFKC keeps but transliterating converters (glibc iconv to ASCII//TRANSLIT) turn into
 * "/" or "\".
 */
const TRANSLITERATED_SLASHES: ReadonlyMap<string, string> = new Map([
  ["\u2044", "/"],
  ["\u2215", "/"],
  ["\u29f8", "/"],
  ["\u2216", "\\"],
  ["\u29f5", "\\"],
  ["\u29f9", "\\"],
]);

/**
 * Validates a request path (with an optional "?query") and returns it unchanged.
 *
 * Refused in the whole string: not starting with "/", a leading "//" (scheme-relative: resolvers read
 * the next segment as a host), over 8 KiB, control characters (raw CR/LF would split the request),
 * spaces, non-ASCII (percent-encode its UTF-8 bytes), "#" (a fragment is never sent, so the approved
 * text would differ from the request), raw backslashes anywhere (some parsers and servers read "\" as
 * "/"), and malformed percent escapes.
 * Refused in the path part only (spec 4.2 rule 1): "." and ".." segments (also "..;" which Tomcat
 * reads as "..", and segments of dots and spaces like "..." or "..%20", which Windows servers trim
 * to ".."), "%2f" "%2e" "%5c"
 * in any case, encoded control characters ("%0d%0a" is refused even though encoded: it is only ever
 * header-injection bait in a path), those encoded twice, characters outside RFC 3986 pchar, "%3b"
 * in any case, percent escapes that are not strict UTF-8 (overlong "%c0%af", surrogates, cut-short
 * sequences), and characters that Unicode folding (NFKC) or transliteration turns into "/", ".",
 * "\", ";" or "%" (fullwidth "%ef%bc%8f", "%ef%bc%8e", one dot leader "%e2%80%a4", division slash).
 * The query is kept byte for byte: encoded data of any kind (%0a, %2f, %5c) is legitimate there.
 *
 * @example validateRequestPath("/v1/items?limit=10") // { ok: true, path: "/v1/items?limit=10" }
 * @example validateRequestPath("/a/%2e%2e/b") // { ok: false, code: "invalid_path", ... }
 */
export function validateRequestPath(raw: string): PathCheck {
  if (typeof raw !== "string" || raw.length === 0)
    return invalidPath("The path is empty; it must start with /.");
  if (raw.length > MAX_PATH_LENGTH)
    return invalidPath(`The path is longer than ${MAX_PATH_LENGTH} characters.`);
  if (!raw.startsWith("/")) return invalidPath("The path must start with /.");
  if (raw.startsWith("//"))
    return invalidPath("The path must not start with //, which URL parsers read as a host.");
  const badChar = findForbiddenCharacter(raw);
  if (badChar) return invalidPath(badChar);
  if (MALFORMED_ESCAPE.test(raw))
    return invalidPath('The path has a "%" that is not followed by two hex digits.');

  const queryAt = raw.indexOf("?");
  const pathPart = queryAt === -1 ? raw : raw.slice(0, queryAt);
  const problem = findPathPartProblem(pathPart);
  return problem ? invalidPath(problem) : { ok: true, path: raw };
}

/**
 * Splits an http_request target into host and path (spec 4.2 `path`, `host`, rule 2). A `path` that
 * starts with "https://" is read as a raw URL (never with `new URL`, which would normalise away the
 * very tricks the checks look for): no userinfo, the host through `checkHostname`, no port but 443,
 * the rest through `validateRequestPath` ("https://h" and "https://h?q" mean "/" and "/?q").
 * When both a URL and `host` are given they must agree.
 *
 * @example parseRequestTarget({ path: "https://api.example.com/v1" }) // { ok: true, host: "api.example.com", path: "/v1" }
 */
export function parseRequestTarget(input: { path: string; host?: string }): TargetCheck {
  const { path, host } = input;
  if (typeof path !== "string")
    return { ok: false, code: "invalid_path", message: "The path is missing.", hint: PATH_HINT };

  let urlHost: string | undefined;
  let pathOnly = path;
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(path)?.[1]?.toLowerCase();
  if (scheme !== undefined && !path.startsWith("/")) {
    if (scheme !== "https") {
      const message =
        scheme === "http"
          ? "Plain http:// URLs are refused; credentials only travel over HTTPS."
          : `The URL scheme ${quoteUntrusted(scheme, 16)} is not supported.`;
      return { ok: false, code: "invalid_path", message, hint: HTTPS_HINT };
    }
    const url = splitHttpsUrl(path);
    if (!url.ok) return url;
    urlHost = url.host;
    pathOnly = url.path;
  }

  let hostArg: string | undefined;
  if (host !== undefined) {
    const checked = checkHostname(host);
    if (!checked.ok) return withHostHint(checked);
    hostArg = checked.host;
  }
  if (urlHost !== undefined && hostArg !== undefined && urlHost !== hostArg) {
    return {
      ok: false,
      code: "invalid_host",
      message: `The host argument ${quoteUntrusted(hostArg, 64)} does not match the URL's host ${quoteUntrusted(urlHost, 64)}.`,
      hint: "Give the host once: either in the URL or as host with a plain path.",
    };
  }

  const checkedPath = validateRequestPath(pathOnly);
  if (!checkedPath.ok) {
    return pathOnly.startsWith("/") ? checkedPath : { ...checkedPath, hint: PATH_HINT };
  }
  return { ok: true, host: urlHost ?? hostArg, path: checkedPath.path };
}

/** RFC 3986 section 2.3 unreserved characters: their escapes mean the same as the character. */
const UNRESERVED_CHAR = /^[A-Za-z0-9\-._~]$/;
/** One percent escape, any case of hex ("%6d" and "%6D"). */
const PERCENT_ESCAPE = /%([0-9A-Fa-f]{2})/g;

/**
 * The path part (before "?") of a path `validateRequestPath` accepted, as an origin reads it, for
 * comparing with a known path such as a provider's user-only prefix or token URL: escapes of
 * unreserved characters decoded (RFC 3986 section 6.2.2.2: "/v1/%6De" is "/v1/me"), other escapes
 * with uppercase hex (section 6.2.2.1), and runs of "/" collapsed to one ("/v1//me" is "/v1/me";
 * common servers and routers do). Case is kept: paths are case-sensitive. Never what is approved or
 * sent (rule 1): those are the validated path unchanged. A prefix check on the raw text would let a
 * different spelling of the same path past it.
 *
 * @example normalisePathForMatch("/%75ser//repos?per_page=5") // "/user/repos"
 * @example normalisePathForMatch("/api/%74oken") // "/api/token"
 */
export function normalisePathForMatch(path: string): string {
  const queryAt = path.indexOf("?");
  const pathPart = queryAt === -1 ? path : path.slice(0, queryAt);
  return pathPart
    .replace(PERCENT_ESCAPE, (_escape, hex: string) => {
      const char = String.fromCharCode(Number.parseInt(hex, 16));
      return UNRESERVED_CHAR.test(char) ? char : `%${hex.toUpperCase()}`;
    })
    .replace(/\/{2,}/g, "/");
}

type TargetFailure = Extract<TargetCheck, { ok: false }>;
type SplitUrl = { ok: true; host: string; path: string } | TargetFailure;

/** Reads "https://authority/rest" as raw text; `url` is known to start with an https scheme. */
function splitHttpsUrl(url: string): SplitUrl {
  const afterScheme = url.slice("https:".length);
  if (!afterScheme.startsWith("//")) {
    return {
      ok: false,
      code: "invalid_path",
      message: "The URL must be written https://host/path.",
      hint: HTTPS_HINT,
    };
  }
  const rest = afterScheme.slice(2);
  // The authority ends at the first "/", "?" or "#", and also at "\" because WHATWG parsers treat
  // it as "/": "https://api.example.com\@evil.test/" must not be read two ways.
  const end = rest.search(/[/?#\\]/);
  const authority = end === -1 ? rest : rest.slice(0, end);
  const tail = end === -1 ? "" : rest.slice(end);
  if (tail.startsWith("\\")) {
    return {
      ok: false,
      code: "invalid_path",
      message: "The URL contains a backslash; use / to separate the path.",
    };
  }
  // Never echo an authority with "@": the part before it may be a password.
  if (authority.includes("@")) {
    return {
      ok: false,
      code: "invalid_host",
      message: "The URL must not contain user info (user:password@).",
      hint: "Latch adds the stored credential itself; put only the host in the URL.",
    };
  }
  if (authority === "")
    return { ok: false, code: "invalid_host", message: "The URL has no host.", hint: HTTPS_HINT };

  const { hostText, portText } = splitAuthority(authority);
  const checked = checkHostname(hostText);
  if (!checked.ok) return withHostHint(checked);
  if (portText !== undefined && portText !== "443") {
    return {
      ok: false,
      code: "invalid_port",
      message: `The URL names port ${quoteUntrusted(portText, 16)}; only 443 is allowed.`,
      hint: PORT_HINT,
    };
  }
  // An absent path is "/" for https (RFC 9110 section 4.2.2 with RFC 3986 section 6.2.3).
  const path = tail === "" ? "/" : tail.startsWith("/") ? tail : `/${tail}`;
  return { ok: true, host: checked.host, path };
}

/**
 * Host and port of an authority. "[...]" is one host (an IPv6 literal, refused by the host check);
 * more than one ":" without brackets is bare IPv6 and also goes whole to the host check.
 */
function splitAuthority(authority: string): { hostText: string; portText: string | undefined } {
  if (authority.startsWith("[")) {
    const close = authority.indexOf("]");
    if (close === -1) return { hostText: authority, portText: undefined };
    const after = authority.slice(close + 1);
    return {
      hostText: authority.slice(0, close + 1),
      portText: after.startsWith(":") ? after.slice(1) : undefined,
    };
  }
  const colon = authority.indexOf(":");
  if (colon === -1 || authority.indexOf(":", colon + 1) !== -1)
    return { hostText: authority, portText: undefined };
  return { hostText: authority.slice(0, colon), portText: authority.slice(colon + 1) };
}

function withHostHint(check: { code: "invalid_host" | "ip_literal"; message: string }): TargetFailure {
  const hint =
    check.code === "ip_literal"
      ? "Call the API by its domain name; IP addresses are never allowed."
      : "Give a plain domain name such as api.example.com.";
  return { ok: false, code: check.code, message: check.message, hint };
}

/** The first character refused anywhere in path or query, described as a sentence. */
function findForbiddenCharacter(raw: string): string | undefined {
  const match = /[\x00-\x1f\x7f \\#]|[^\x00-\x7f]/u.exec(raw);
  if (!match) return undefined;
  const char = match[0];
  if (char === " ") return "The path contains a space; percent-encode it as %20.";
  if (char === "#")
    return 'The path contains "#": a fragment is never sent; percent-encode it as %23 if it is data.';
  if (char === "\\") return "The path contains a backslash, which some servers read as /.";
  const code = codePointName(char);
  if (char.charCodeAt(0) < 0x80) return `The path contains the control character ${code}.`;
  const readAs = readAsStructural(char);
  if (readAs !== undefined)
    return `The path contains ${code}, which servers that fold Unicode read as ${quoteUntrusted(readAs, 8)}; it is refused encoded or not.`;
  return `The path contains the non-ASCII character ${code}; percent-encode its UTF-8 bytes.`;
}

/** Rule 1 on the part before "?", as a sentence, or undefined when it is fine. */
function findPathPartProblem(pathPart: string): string | undefined {
  if (!PATH_CHARS.test(pathPart)) {
    const char = /[^A-Za-z0-9\-._~!$&'()*+,;=:@%/]/.exec(pathPart)?.[0] ?? "?";
    return `The path contains ${quoteUntrusted(char, 1)}, which must be percent-encoded.`;
  }
  const double = DOUBLE_ENCODED.exec(pathPart);
  if (double) return `The path contains the double-encoded sequence ${double[0]}.`;
  const separator = ENCODED_SEPARATOR.exec(pathPart);
  if (separator)
    return `The path contains ${separator[0]}: an encoded "/", "\\" or "." inside a segment is refused.`;
  const control = ENCODED_CONTROL.exec(pathPart);
  if (control) return `The path contains the encoded control character ${control[0]}.`;
  const semicolon = ENCODED_SEMICOLON.exec(pathPart);
  if (semicolon)
    return `The path contains ${semicolon[0]}: an encoded ";" inside a segment is refused (decoded, "..;" reads as "..").`;
  const unicode = findEncodedUnicodeProblem(pathPart);
  if (unicode) return unicode;
  for (const segment of pathPart.split("/").slice(1)) {
    // "..;jsessionid" is ".." to Tomcat and Spring, so judge the part before any ";". Windows
    // servers trim a segment's trailing dots and spaces: "..%20" and ". ." are ".." and "." there.
    const bare = (segment.split(";")[0] ?? "").replace(/%20/gi, " ");
    if (/^[. ]+$/.test(bare) && bare.includes("."))
      return `The path has a ${quoteUntrusted(segment, 16)} segment; give the resolved path instead.`;
  }
  return undefined;
}

/**
 * Decodes every run of percent escapes in the path part as strict UTF-8 and refuses a run that is
 * not valid UTF-8 or that holds a look-alike of "/", ".", "\\", ";" or "%". An origin that decodes
 * leniently or folds Unicode (NFKC, transliteration) would otherwise read "/a/%ef%bc%8f../admin" as a path
 * outside the prefix the operator approved, while the approved text itself looks harmless.
 */
function findEncodedUnicodeProblem(pathPart: string): string | undefined {
  for (const [run] of pathPart.matchAll(ESCAPE_RUN)) {
    const bytes = Uint8Array.from(run.slice(1).split("%"), (hex) => Number.parseInt(hex, 16));
    if (bytes.every((byte) => byte < 0x80)) continue;
    let text: string;
    try {
      text = STRICT_UTF8.decode(bytes);
    } catch {
      return `The path contains ${quoteUntrusted(run, 36)}, which is not valid UTF-8 (an overlong form, an encoded surrogate, a value over U+10FFFF or a cut-short sequence); servers that decode it leniently may read "/" or ".".`;
    }
    for (const char of text) {
      const readAs = readAsStructural(char);
      if (readAs !== undefined) {
        return `The path contains ${encodeURIComponent(char)} (${codePointName(char)}), which servers that fold Unicode read as ${quoteUntrusted(readAs, 8)}.`;
      }
    }
  }
  return undefined;
}

/** The ASCII text a non-ASCII character may be folded into when that text is structural. */
function readAsStructural(char: string): string | undefined {
  if (char.charCodeAt(0) < 0x80) return undefined;
  const folded = char.normalize("NFKC");
  if (STRUCTURAL_ASCII.test(folded)) return folded;
  return TRANSLITERATED_SLASHES.get(char);
}

function codePointName(char: string): string {
  return `U+${(char.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, "0")}`;
}

function invalidPath(message: string): PathCheck {
  return { ok: false, code: "invalid_path", message };
}
