// A sigv4 call is signed by Latch in its Authorization header. The query parameters of a
// presigned URL (X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token) from the agent would be
// a second authentication the service reads, chosen by the agent: refused on both tiers (issue 21
// item 4), before an approval is asked for and again in the proxy. So is a query pair AWS's signer
// cannot sign as it is sent (`__proto__`), which would spend an approval on a request AWS refuses.
import { queryPairs, readsAsQueryName } from "../requests/query-names.ts";

export const PRESIGN_PARAMETERS = ["X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token"] as const;

/**
 * The presign parameter an origin could read in the query of `path` (any case or encoding), else
 * undefined.
 *
 * @example findPresignParameter("/?Action=List&x-amz-signature=abc") // "X-Amz-Signature"
 */
export function findPresignParameter(path: string): string | undefined {
  const pairs = queryPairs(path);
  return PRESIGN_PARAMETERS.find((name) => pairs.some((pair) => readsAsQueryName(pair, name.toLowerCase())));
}

/** The sentence a refusal says (no value quoted). */
export function presignRefusal(parameter: string): string {
  return `a sigv4 call is signed by Latch; its query may not carry ${parameter} (the parameters of a presigned URL: ${PRESIGN_PARAMETERS.join(", ")})`;
}

/**
 * The one query name AWS's signer cannot sign: it builds the canonical query in a plain object,
 * where a `__proto__` key sets the prototype instead of adding the pair, so the pair would go out
 * unsigned and "[object Object]" be signed in its place (egress-proxy inject/sigv4.ts).
 */
export const UNSIGNABLE_QUERY_NAME = "__proto__";

export const UNSIGNABLE_QUERY_REFUSAL = `the query cannot be signed: AWS's signer cannot sign a parameter named ${UNSIGNABLE_QUERY_NAME}`;

/**
 * Why the query of a sigv4 call's `path` is refused (a presign parameter, or a pair named
 * `__proto__` in any percent-encoding, its pairs split on `&` and decoded as the signer does), else
 * undefined: the control plane asks before any approval, the proxy again before it signs.
 *
 * @example sigv4QueryRefusal("/?Action=List&%5F%5Fproto%5F%5F=1") // "the query cannot be signed: ..."
 */
export function sigv4QueryRefusal(path: string): string | undefined {
  const presign = findPresignParameter(path);
  if (presign !== undefined) return presignRefusal(presign);
  const mark = path.indexOf("?");
  if (mark === -1) return undefined;
  const isUnsignable = path
    .slice(mark + 1)
    .split("&")
    .some((pair) => readsAsExactly(pair, UNSIGNABLE_QUERY_NAME));
  return isUnsignable ? UNSIGNABLE_QUERY_REFUSAL : undefined;
}

/** Whether the name of `pair`, percent-decoded as the signer's query is (`+` stays), is `name`. */
function readsAsExactly(pair: string, name: string): boolean {
  const equals = pair.indexOf("=");
  const raw = equals === -1 ? pair : pair.slice(0, equals);
  try {
    return decodeURIComponent(raw) === name;
  } catch {
    return false;
  }
}
