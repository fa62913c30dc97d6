// `vault policy get | set FILE | preview FILE` (DECISIONS "Policies"): the local vault's rules,
// with the same parser and matcher as the hosted service. `get` prints {version, rules} as JSON;
// `set` saves a file of that shape (or a bare list), replacing version `version` if the file names
// one (else whatever is saved); `preview` says what a file would have decided over the last 7 days.
import { closeSync, openSync, readSync } from "node:fs";
import { AppError } from "@latch/shared/errors";
import type { ExpectedVersion } from "../policies/policies.service.ts";
import type { PolicyPreview } from "../policies/policy-preview.ts";
import type { PolicyRule } from "../policies/policy-rules.ts";
import { policyWarnings } from "../policies/policy-warnings.ts";
import type { LocalOperator } from "./local-operator.ts";

/** A policy file is at most this long: 500 rules with their lists fit with room to spare. */
const MAX_FILE_BYTES = 1024 * 1024;

/** The rules a file holds, and the version it replaces when it names one. */
export function readPolicyFile(path: string): { rules: unknown; expected: ExpectedVersion } {
  // Read at most one byte past the limit: a huge file (or /dev/zero) is refused, never loaded.
  const buffer = Buffer.alloc(MAX_FILE_BYTES + 1);
  let length = 0;
  let fd: number | undefined;
  try {
    fd = openSync(path, "r");
    for (;;) {
      const read = readSync(fd, buffer, length, buffer.length - length, null);
      if (read === 0) break;
      length += read;
      if (length === buffer.length) break;
    }
  } catch (error) {
    throw new AppError(
      "invalid_request",
      `cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? "error"}`,
    );
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  if (length > MAX_FILE_BYTES) {
    throw new AppError("invalid_policy", `${path} is over ${MAX_FILE_BYTES} bytes`);
  }
  const text = buffer.subarray(0, length).toString("utf8");
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new AppError("invalid_policy", `${path} is not JSON: write {"rules": [...]} or a list of rules`);
  }
  if (Array.isArray(parsed)) return { rules: parsed, expected: "any" };
  if (parsed && typeof parsed === "object" && "rules" in parsed) {
    const { rules, version } = parsed as { rules: unknown; version?: unknown };
    if (version === undefined) return { rules, expected: "any" };
    if (!Number.isSafeInteger(version) || (version as number) < 0) {
      throw new AppError("invalid_policy", `${path}: version is the number vault policy get printed`);
    }
    return { rules, expected: version as number };
  }
  throw new AppError("invalid_policy", `${path}: write {"rules": [...]} or a list of rules`);
}

function summarise(rules: readonly PolicyRule[]): string {
  const count = (effect: string) => rules.filter((r) => r.enabled && r.effect === effect).length;
  const disabled = rules.filter((r) => !r.enabled).length;
  return `${rules.length} rule${rules.length === 1 ? "" : "s"} (${count("allow")} allow, ${count("ask")} ask, ${count("deny")} deny${disabled ? `, ${disabled} disabled` : ""})`;
}

/** The preview as a person reads it: a line per rule, then the totals. */
export function formatPreview(preview: PolicyPreview): string {
  const lines = [
    `Over ${preview.calls} audited call${preview.calls === 1 ? "" : "s"} since ${preview.from}${preview.truncated ? " (not all of them: the preview stopped at its limit)" : ""}:`,
  ];
  const width = Math.max(4, ...preview.rules.map((r) => r.id.length));
  for (const rule of preview.rules) {
    const limited = rule.rate_limited ? `, ${rule.rate_limited} over its rate limit` : "";
    const off = rule.enabled ? "" : " (disabled)";
    lines.push(
      `  ${rule.id.padEnd(width)}  ${rule.effect.padEnd(5)}  ${rule.calls} call${rule.calls === 1 ? "" : "s"}${limited}${off}`,
    );
  }
  const t = preview.totals;
  lines.push(
    `would have allowed ${t.allow}, asked ${t.ask}, denied ${t.deny}, rate-limited ${t.rate_limited}; ${t.none} matched no rule (approvals decide); ${preview.changed} decided otherwise than the saved policy`,
  );
  return `${lines.join("\n")}\n`;
}

export async function runPolicyCommand(
  op: LocalOperator,
  action: string | undefined,
  file: string | undefined,
  out: { stdout(text: string): void; stderr(text: string): void },
): Promise<number> {
  if (action === "get") {
    const list = await op.getPolicies();
    out.stdout(`${JSON.stringify({ version: list.version, rules: list.rules }, null, 2)}\n`);
    return 0;
  }
  if (!file) throw new AppError("invalid_request", `usage: vault policy ${action ?? "set"} FILE`);
  const { rules, expected } = readPolicyFile(file);
  if (action === "preview") {
    out.stdout(formatPreview(await op.previewPolicies(rules)));
    return 0;
  }
  const saved = await op.setPolicies(rules, expected);
  out.stdout(`Saved policy version ${saved.version}: ${summarise(saved.rules)}.\n`);
  for (const warning of policyWarnings(saved.rules, "local")) out.stderr(`note: ${warning}\n`);
  return 0;
}
