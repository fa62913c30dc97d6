// Content decoding of an origin body under the response cap: a compression bomb is cut at the cap,
// never inflated in full.
import { brotliDecompressSync, gunzipSync, inflateRawSync, inflateSync, type ZlibOptions } from "node:zlib";
import { AppError } from "@latch/shared/errors";

/** Spec 4.2 rule 5: responses over 1 MiB are cut and fail with body_too_large. */
export const MAX_BODY_BYTES = 1024 * 1024;

/** The most content codings one answer may stack (`gzip, br` is two). */
export const MAX_CODINGS = 3;

type Decoder = (input: Buffer, options: ZlibOptions) => Buffer;

/** RFC 9110 8.4.1 codings; `x-gzip` is the legacy name of gzip (RFC 9110 8.4.1.3). */
const DECODERS: ReadonlyMap<string, Decoder> = new Map<string, Decoder>([
  ["gzip", gunzipSync],
  ["x-gzip", gunzipSync],
  ["deflate", inflateDeflate],
  ["br", brotliDecompressSync],
]);

/**
 * HTTP "deflate" is zlib-wrapped (RFC 9110 8.4.1.2), but some servers send raw deflate; the first
 * byte of a zlib stream says which (CM = 8 in the low nibble and a valid header checksum).
 */
function inflateDeflate(input: Buffer, options: ZlibOptions): Buffer {
  const [cmf = 0, flg = 0] = input;
  const isZlibWrapped = (cmf & 0x0f) === 8 && ((cmf << 8) | flg) % 31 === 0;
  return isZlibWrapped ? inflateSync(input, options) : inflateRawSync(input, options);
}

function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/** The codings in the order they were applied, `identity` dropped, lowercased. */
export function parseContentEncoding(header: string | string[] | undefined): string[] {
  const text = Array.isArray(header) ? header.join(",") : (header ?? "");
  return text
    .split(",")
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== "" && coding !== "identity");
}

/**
 * Undoes `content-encoding` (gzip, x-gzip, deflate, br, identity, and chains such as `gzip, br`,
 * undone last-applied first). Each step may produce at most `MAX_BODY_BYTES`: zlib stops there
 * (`maxOutputLength`) and the call fails with `body_too_large`. An unknown coding, corrupt or
 * truncated data fails with `bad_origin_response` (a cut stream is not silently half-decoded). Messages name
 * only a coding the proxy knows, never the origin's own text or body bytes.
 */
export function decodeBody(raw: Buffer, contentEncoding: string | string[] | undefined): Buffer {
  const codings = parseContentEncoding(contentEncoding);
  // Each step is capped, not their number: thousands of layers (a 32 KiB header allows them)
  // would hold the event loop for every call in flight. Real servers apply one, rarely two.
  if (codings.length > MAX_CODINGS) {
    throw new AppError(
      "bad_origin_response",
      `the origin applied ${codings.length} content-encodings; at most ${MAX_CODINGS} are undone`,
    );
  }
  for (const coding of codings) {
    if (!DECODERS.has(coding)) {
      // The coding is the origin's text: it is not echoed to the agent, outside redaction.
      throw new AppError(
        "bad_origin_response",
        "the origin used a content-encoding the proxy does not decode (gzip, deflate and br are)",
      );
    }
  }
  let body = raw;
  for (const coding of codings.reverse()) {
    // An empty body carries no compressed stream at all (some servers label empty answers too).
    if (body.length === 0) break;
    const decode = DECODERS.get(coding)!;
    try {
      body = decode(body, { maxOutputLength: MAX_BODY_BYTES });
    } catch (error) {
      if (errorCode(error) === "ERR_BUFFER_TOO_LARGE") {
        throw new AppError("body_too_large", "the origin response is over 1 MiB once decoded", {
          cause: error,
        });
      }
      throw new AppError("bad_origin_response", `the origin sent a corrupt ${coding} body`, { cause: error });
    }
  }
  if (body.length > MAX_BODY_BYTES) throw new AppError("body_too_large", "the origin response is over 1 MiB");
  return body;
}
