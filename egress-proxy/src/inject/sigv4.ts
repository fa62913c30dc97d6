// AWS Signature Version 4 for the `sigv4` inject mode, by AWS's own signer (@smithy/signature-v4,
// the one every AWS SDK for JavaScript v3 uses) over Node's OpenSSL SHA-256 (@smithy/core's
// `Hash`, the SDK's Node hash): no canonicalisation or key derivation is written here, only the
// mapping from the request Latch sends to the signer's request and back.

import { AppError } from "@latch/shared/errors";
import type { AwsSigningScope } from "@latch/shared/inject/aws-host";
import { UNSIGNABLE_QUERY_NAME, UNSIGNABLE_QUERY_REFUSAL } from "@latch/shared/inject/aws-presign";
import type { HeaderPair } from "@latch/shared/requests/headers";
import { Hash } from "@smithy/core/serde";
import { SignatureV4 } from "@smithy/signature-v4";
import type { SourceData } from "@smithy/types";

export interface SigV4Request {
  method: string;
  host: string;
  /** Path and query exactly as they go on the request line. */
  path: string;
  /** Lowercase names; the caller's, plus any the sender adds itself that should be signed. */
  headers: readonly HeaderPair[];
  body: Uint8Array | undefined;
}

export interface SigV4Options {
  /** Signing time; the proxy's clock. */
  date: Date;
  /**
   * Whether the payload hash goes out as `x-amz-content-sha256` (and so is signed as a header).
   * Always true for calls (DECISIONS: payload hash signed); the test suite's `sign_body` says.
   */
  signBody?: boolean;
  /**
   * AWS normalises and encodes the path a second time for every service but S3, which signs the
   * path as sent (SigV4 "Create a canonical request"). Defaults to that rule for `scope.service`.
   */
  normalizePath?: boolean;
  /** Receives the canonical request and string to sign (the test suite compares them). */
  trace?: (step: { canonicalRequest: string; stringToSign: string }) => void;
}

/**
 * Headers whose caller copy is dropped before signing: the signer writes them, and a caller's
 * `x-amz-content-sha256` would otherwise be trusted as the payload hash (`UNSIGNED-PAYLOAD`
 * would leave the body unsigned) and a session token would sign as someone else.
 */
const SIGNER_OWNED = new Set([
  "authorization",
  "x-amz-date",
  "date",
  "x-amz-content-sha256",
  "x-amz-security-token",
]);

/** The SDK's Node hash bound to SHA-256 (HMAC when given a key). */
class Sha256 extends Hash {
  constructor(secret?: SourceData) {
    super("sha256", secret);
  }
}

/** Exposes the two intermediate strings of AWS's signer, unchanged, to `trace`. */
class TracingSigner extends SignatureV4 {
  private canonicalRequest = "";
  private readonly trace: SigV4Options["trace"];

  constructor(init: ConstructorParameters<typeof SignatureV4>[0], trace: SigV4Options["trace"]) {
    super(init);
    this.trace = trace;
  }

  protected override createCanonicalRequest(
    ...args: Parameters<SignatureV4["createCanonicalRequest"]>
  ): string {
    this.canonicalRequest = super.createCanonicalRequest(...args);
    return this.canonicalRequest;
  }

  protected override async createStringToSign(
    ...args: Parameters<SignatureV4["createStringToSign"]>
  ): Promise<string> {
    const stringToSign = await super.createStringToSign(...args);
    this.trace?.({ canonicalRequest: this.canonicalRequest, stringToSign });
    return stringToSign;
  }
}

/**
 * Signs `request` with the access key id (`username`) and secret access key (`secret`) and
 * returns its headers with `x-amz-date`, `x-amz-content-sha256` and `authorization` added (and
 * the caller's copies of those removed). Host is signed as `request.host`, the Host the upstream
 * sends. The secret goes into AWS's signer only; it appears in no header.
 *
 * @example await signSigV4({ method: "GET", host: "sqs.eu-west-1.amazonaws.com", path: "/", headers: [], body: undefined },
 *   { username: "AKID...", secret: "..." }, { service: "sqs", region: "eu-west-1" }, { date: new Date() })
 */
export async function signSigV4(
  request: SigV4Request,
  credential: { username: string | undefined; secret: string },
  scope: AwsSigningScope,
  options: SigV4Options,
): Promise<HeaderPair[]> {
  if (!credential.username) {
    throw new AppError("invalid_inject", "a sigv4 credential needs its access key id in username");
  }
  const normalizePath = options.normalizePath ?? scope.service !== "s3";
  const signer = new TracingSigner(
    {
      service: scope.service,
      region: scope.region,
      credentials: { accessKeyId: credential.username, secretAccessKey: credential.secret },
      sha256: Sha256,
      uriEscapePath: normalizePath,
      applyChecksum: options.signBody ?? true,
    },
    options.trace,
  );
  const kept = request.headers.filter((header) => !SIGNER_OWNED.has(header.name.toLowerCase()));
  const { pathname, query } = splitTarget(request.path);
  const signed = await signer.sign(
    {
      method: request.method,
      protocol: "https:",
      hostname: request.host,
      path: pathname,
      query,
      headers: { ...joinHeaders(kept), host: request.host },
      body: request.body,
    },
    { signingDate: options.date },
  );
  const added: HeaderPair[] = [];
  for (const name of ["x-amz-date", "x-amz-content-sha256", "authorization"]) {
    const value = signed.headers[name];
    if (value !== undefined) added.push({ name, value });
  }
  return [...kept, ...added];
}

/**
 * One value per name, repeated names joined by "," in order, as SigV4's canonical headers want
 * them (and as RFC 9110 5.3 says a recipient may combine them).
 */
function joinHeaders(headers: readonly HeaderPair[]): Record<string, string> {
  const joined: Record<string, string> = Object.create(null);
  for (const { name, value } of headers) {
    const lower = name.toLowerCase();
    joined[lower] = lower in joined ? `${joined[lower]},${value}` : value;
  }
  return joined;
}

/**
 * The path and the decoded query pairs, which AWS's signer encodes again in its canonical form.
 * A name with no `=` signs as `name=` (SigV4: an empty value). `+` stays a literal plus. A pair
 * the signer would not sign as it is sent (`__proto__`, in any encoding) is refused: the signature
 * covers exactly the request that goes out.
 */
function splitTarget(target: string): { pathname: string; query: Record<string, string | string[]> } {
  const mark = target.indexOf("?");
  const pathname = mark === -1 ? target : target.slice(0, mark);
  const query: Record<string, string | string[]> = Object.create(null);
  if (mark === -1) return { pathname, query };
  for (const pair of target.slice(mark + 1).split("&")) {
    if (pair.length === 0) continue;
    const equals = pair.indexOf("=");
    const name = decodeQueryPart(equals === -1 ? pair : pair.slice(0, equals));
    if (name === UNSIGNABLE_QUERY_NAME) throw new AppError("invalid_path", UNSIGNABLE_QUERY_REFUSAL);
    const value = equals === -1 ? "" : decodeQueryPart(pair.slice(equals + 1));
    const previous = query[name];
    query[name] =
      previous === undefined ? value : [...(Array.isArray(previous) ? previous : [previous]), value];
  }
  return { pathname, query };
}

function decodeQueryPart(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    // The path rule refuses malformed escapes before a call gets here.
    throw new AppError("invalid_path", "the query cannot be signed: it holds an escape that is not UTF-8");
  }
}
