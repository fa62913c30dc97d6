// A sigv4 call is signed by Latch in its Authorization header. The query parameters of a
// presigned URL (X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token) from the agent would be
// a second authentication the service reads, chosen by the agent: refused on both tiers (issue 21
// item 4), before an approval is asked for and again in the proxy.
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
