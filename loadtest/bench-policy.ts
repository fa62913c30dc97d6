// npm run bench:policy: what the policy matcher adds to one http_request (DECISIONS "Policies": a
// list of 200 rules adds under 0.05 ms per call). The list is compiled once, as the control plane
// compiles it once per version; each call is then judged against it in this process, with no I/O.
// Printed per shape of call: a call no rule matches (every rule read, the worst case), one the last
// rule decides, one the first rule decides, and a deny rule's loose path reading (upper case,
// percent escapes). Prints the figure against the 0.05 ms budget; exits 1 only when a decision is
// wrong, never on speed (performance is measured here, not asserted in tests).
//
//   npm run bench:policy -- [--rules 200] [--calls 200000]
import { parseArgs } from "node:util";
import { compilePolicy, decide, type PolicyCall } from "../control-plane/src/policies/policy-match.ts";
import { parsePolicyRules } from "../control-plane/src/policies/policy-rules.ts";

const { values: args } = parseArgs({
  options: {
    rules: { type: "string", default: "200" },
    calls: { type: "string", default: "200000" },
  },
});
const ruleCount = Number(args.rules);
const callCount = Number(args.calls);
if (!Number.isInteger(ruleCount) || ruleCount < 3)
  throw new Error("--rules must be an integer of at least 3");
if (!Number.isInteger(callCount) || callCount <= 0) throw new Error("--calls must be a positive integer");

const BUDGET_MS = 0.05;
const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/** A list shaped like a real one: every field in use, suffixes, ** and * globs, agents by name and id. */
function realisticRules(count: number): unknown[] {
  return Array.from({ length: count }, (_, i) => {
    const effect = ["allow", "ask", "deny"][i % 3];
    const match: Record<string, unknown> = {
      hosts: i % 4 === 0 ? [`*.service${i}.example.com`] : [`api${i}.example.com`, `uploads${i}.example.com`],
      methods: [METHODS[i % 5], METHODS[(i + 2) % 5]],
      paths: [`/v${i % 3}/org${i}/**`, `/v${i % 3}/repos/*/issues/${i}`, `/v1/team${i}/*/members/**/roles`],
    };
    if (i % 2 === 0) match.agents = [`Agent ${i}`, `cli_${"x".repeat(10)}${i}`];
    if (i % 5 === 0) match.items = [`TOKEN_${i}`];
    if (i % 7 === 0) match.environments = ["production"];
    return {
      id: `rule-${i}`,
      effect,
      match,
      ...(effect !== "deny" && i % 6 === 0 ? { rate_limit: { calls: 100, per: "minute" } } : {}),
    };
  });
}

const rawRules = realisticRules(ruleCount - 3);
// Three rules of known shape: the first decides the "first rule" call by its own host, the last
// two the "loose path" and "last rule" calls.
rawRules.unshift({ id: "first", effect: "allow", match: { hosts: ["first.example.net"] } });
rawRules.push({
  id: "loose-deny",
  effect: "deny",
  match: { hosts: ["api.example.net"], paths: ["/admin/**"] },
});
rawRules.push({
  id: "last",
  effect: "ask",
  match: { hosts: ["*.example.org"], methods: ["GET"], paths: ["/v2/projects/*/builds/**"] },
});
const compiled = compilePolicy(parsePolicyRules(rawRules));

const base: PolicyCall = {
  agentId: "cli_benchagent0001",
  agentName: "Bench agent",
  item: "BENCH_TOKEN",
  host: "api.nowhere.example",
  method: "GET",
  path: "/v1/repos/latch/issues?state=open&per_page=100",
  environment: "production",
};
const shapes: { label: string; call: PolicyCall; expected: string | undefined }[] = [
  { label: "no rule matches (every rule read)", call: base, expected: undefined },
  {
    label: "the last rule decides",
    call: { ...base, host: "ci.example.org", path: "/v2/projects/latch/builds/77/logs?tail=1" },
    expected: "last",
  },
  { label: "the first rule decides", call: { ...base, host: "first.example.net" }, expected: "first" },
  {
    label: "a deny glob read loosely (case, escapes)",
    call: { ...base, host: "api.example.net", path: "/%41DMIN//Users/%65xport" },
    expected: "loose-deny",
  },
];

console.log(`policy matcher: ${compiled.rules.length} rules compiled once, ${callCount} calls per shape`);
let isWrong = false;
for (const { label, call, expected } of shapes) {
  const decided = decide(compiled, call)?.rule.id;
  if (decided !== expected) {
    console.error(`  ${label}: decided by ${decided ?? "no rule"}, expected ${expected ?? "no rule"}`);
    isWrong = true;
    continue;
  }
  // Warm up the JIT, then measure. The call object is varied a little so nothing is hoisted.
  for (let i = 0; i < 20_000; i++) decide(compiled, call);
  const started = process.hrtime.bigint();
  let sink = 0;
  for (let i = 0; i < callCount; i++) {
    sink += decide(compiled, i & 1 ? call : { ...call })?.index ?? -1;
  }
  const elapsedMs = Number(process.hrtime.bigint() - started) / 1e6;
  const perCall = elapsedMs / callCount;
  const verdict = perCall < BUDGET_MS ? "under" : "OVER";
  // The sum keeps the decisions alive: a loop whose result nobody reads could be optimised away.
  if (sink === Number.MIN_SAFE_INTEGER) console.log("unreachable");
  console.log(
    `  ${label.padEnd(42)} ${perCall.toFixed(5)} ms per call (${verdict} the ${BUDGET_MS} ms budget)`,
  );
}
if (isWrong) process.exit(1);
