// Who decided a grant, and what a standing approval covers when the operator chooses (DECISIONS
// "The approval, readable and reversible"): the request's method and host under its path's prefix,
// or the whole credential. Pure functions.
import { AppError } from "@latch/shared/errors";
import type { CallScope, GrantWithItem } from "./grants.repo.ts";

/**
 * What a standing approval covers when the operator chooses: the request's method and host under
 * its path's prefix (the Inbox's default for Always allow), or the whole credential.
 */
export type StandingScope = "path_prefix" | "credential";

/**
 * The operator id behind an actor (`operator:<id>` hosted; the local vault's operator at the
 * keyboard has no account and is "local"), recorded as who approved, denied or revoked.
 */
export function operatorIdOf(actor: string): string | null {
  if (actor.startsWith("operator:")) return actor.slice("operator:".length);
  return actor === "operator" ? "local" : null;
}

/**
 * The scope "path_prefix" gives a call: its method and host, and its path (without the query) up
 * to its last `/`, the same prefix an 8-hour approval covers.
 * @example pathPrefixScope({ method: "POST", host: "api.github.com", path: "/repos/a/b/issues?x=1" })
 * // { method: "POST", host: "api.github.com", path: "/repos/a/b/" }
 */
export function pathPrefixScope(call: { method: string; host: string; path: string }): CallScope {
  const path = call.path.split("?")[0]!;
  return { method: call.method, host: call.host, path: path.slice(0, path.lastIndexOf("/") + 1) || "/" };
}

/**
 * The scope a standing approval is given: the request's method and host under its path's prefix,
 * the whole credential, or (undefined) the one it was asked with. Only standing policies take one.
 */
export function standingScopeOf(
  row: GrantWithItem,
  policy: string,
  choice: StandingScope | undefined,
): CallScope | undefined {
  if (!choice) return undefined;
  if (policy !== "item_standing" && policy !== "folder_standing") {
    throw new AppError("invalid_request", "scope is for standing approvals (item_standing, folder_standing)");
  }
  if (choice === "credential") return { host: null, method: null, path: null };
  if (!row.call_method || !row.call_host || row.call_path === null) {
    throw new AppError(
      "invalid_request",
      "this request named no call, so it has no path to scope to; approve the whole credential instead",
    );
  }
  return pathPrefixScope({ method: row.call_method, host: row.call_host, path: row.call_path });
}

/** A standing scope in words, for the audit: "POST api.github.com/repos/acme/app/", "any call". */
export function describeStandingScope(scope: CallScope | undefined): string {
  if (!scope?.host && !scope?.method && !scope?.path) return "any call";
  return `${scope.method ?? "any method"} ${scope.host ?? "any host"}${scope.path ?? "/"}`;
}
