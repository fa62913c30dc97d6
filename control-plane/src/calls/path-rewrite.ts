// Spec 4.2 rule 3: a provider renamed a path. A call on the old path is sent to the new one by the
// rule the provider's file declares (providers/; today Spotify's playlist /tracks -> /items). The
// validated path is what the operator approved; the rewrite only follows the provider's rename.
import type { PathRewriteRule } from "../providers/provider.ts";
import { findProviderByApiHost, listProviders } from "../providers/providers.ts";

export interface PathRewrite {
  path: string;
  body: unknown;
  rewritten?: { from: string; to: string };
}

function findRule(rules: readonly PathRewriteRule[], method: string, path: string) {
  return rules.find((rule) => rule.methods.includes(method) && rule.pattern.test(path));
}

function renameBodyKey(rule: PathRewriteRule, method: string, body: unknown): unknown {
  const rename = rule.bodyKeyRename;
  if (
    !rename ||
    method !== rename.method ||
    typeof body !== "object" ||
    body === null ||
    Array.isArray(body) ||
    !Object.hasOwn(body, rename.from) ||
    Object.hasOwn(body, rename.to)
  ) {
    return body;
  }
  const { [rename.from]: value, ...rest } = body as Record<string, unknown>;
  return { ...rest, [rename.to]: value };
}

/** The path and body to send for a validated request; unchanged unless the host's provider
 * renamed that path (the name keeps the one rename there is today). */
export function rewritePlaylistPath(host: string, method: string, path: string, body: unknown): PathRewrite {
  const rule = findRule(findProviderByApiHost(host)?.pathRewrites ?? [], method, path);
  if (!rule) return { path, body };
  const to = path.replace(rule.pattern, rule.replacement);
  return { path: to, body: renameBodyKey(rule, method, body), rewritten: { from: path, to } };
}

/** next.for_model naming the change, in the words of the rule that made it (spec 4.2 rule 3). */
export function describeRewrite(rewritten: { from: string; to: string }): string {
  const rule = listProviders()
    .flatMap((provider) => provider.pathRewrites)
    .find((candidate) => candidate.pattern.test(rewritten.from));
  return rule
    ? rule.describe(rewritten)
    : `This call was sent to ${rewritten.to} instead of ${rewritten.from}. Use that path from now on.`;
}
