// The bearer token of an Authorization header: one reading for every route that accepts a client
// token (hosted MCP, approval requests, trusted resolve, the local walls).

/**
 * The bearer of an Authorization header, or undefined.
 * @example bearerOf("Bearer avm_abc") // "avm_abc"
 */
export function bearerOf(header: string | undefined): string | undefined {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
  return match?.[1];
}
