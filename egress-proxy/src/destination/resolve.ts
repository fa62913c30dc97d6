// Destination policy: resolve a host once, check every answer, and pin the one address the
// upstream call dials. No second lookup happens anywhere, which is what defeats DNS rebinding.
import { Resolver } from "node:dns/promises";
import { isIP } from "node:net";
import { AppError } from "@latch/shared/errors";
import type { Cidr, DeniedVerdict } from "./classify.ts";
import { type ConnectToRule, findConnectToRule } from "./connect-to.ts";
import { decideDestination } from "./decide.ts";

export interface ResolverOptions {
  /** Resolvers to ask, `ip[:port]` (`[v6]:port`); unset means the system's (from resolv.conf). */
  dnsServers?: string[];
  connectTo: readonly ConnectToRule[];
  /** Development/test only: ranges allowed despite the public-address rule. */
  allowCidrs: readonly Cidr[];
  /** Budget for one resolution (both queries, retries included). Default 5000 ms. */
  timeoutMs?: number;
  /** The clock of the answers' TTLs; Date.now unless a test moves it. */
  now?: () => number;
}

/** Where one call goes: `host` names the request (Host, SNI, certificate), `address` is dialled. */
export interface Destination {
  host: string;
  address: string;
  family: 4 | 6;
  port: number;
}

export interface DestinationResolver {
  /**
   * `deadline`: the caller's signal, or the milliseconds its call has left; the resolution ends
   * with `timeout` when it passes. No timer is set when no DNS is asked (a connect-to rule).
   */
  resolve(host: string, deadline?: AbortSignal | number): Promise<Destination>;
}

/** Spec 4.2 rule 2: port 443 only. Another port comes only from a connect-to rule. */
const HTTPS_PORT = 443;
const DEFAULT_TIMEOUT_MS = 5_000;
const DNS_TRIES = 2;
const MAX_DECISIONS = 1024;
/**
 * An answer is reused for its TTL, at most this long: a call within it asks no DNS. Every call
 * still decides on the answer it uses and dials only the address decided (a cached answer is
 * checked like a fresh one); a TTL of 0 is never reused, so an answer that changes on every query
 * (the rebinding attacker) is read afresh by every call.
 */
const MAX_ANSWER_TTL_S = 30;
const MAX_ANSWERS = 1024;
/** c-ares codes meaning "no such record" (ENODATA) or "no such name" (ENOTFOUND, NXDOMAIN). */
const ABSENT_CODES: ReadonlySet<string> = new Set(["ENODATA", "ENOTFOUND"]);

function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

function newResolver(servers: readonly string[] | undefined, timeoutMs: number): Resolver {
  // c-ares backs off between tries; a third of the budget per try keeps both tries inside it.
  const resolver = new Resolver({ timeout: Math.max(100, Math.ceil(timeoutMs / 3)), tries: DNS_TRIES });
  if (servers !== undefined && servers.length > 0) resolver.setServers([...servers]);
  return resolver;
}

/**
 * A refusal by the public-address rule. An AppError whose code is the verdict's reason (so the
 * caller sees `link_local`, `ipv6_embedding`, ...), carrying the verdict itself for the call's
 * log line: which address of the answer was refused and in which block.
 */
export class AddressRefused extends AppError {
  readonly verdict: DeniedVerdict;

  constructor(host: string, verdict: DeniedVerdict) {
    super(
      verdict.reason,
      `${host} resolves to a refused address, ${verdict.range}; calls go to public addresses only`,
    );
    this.verdict = verdict;
  }
}

/** The addresses of an answer, and how long it may be reused (0: not at all). */
interface Answer {
  v4: string[];
  v6: string[];
  ttlS: number;
}

/** Both families at once. One family missing is normal; a resolver error with no answer is not. */
async function queryAddresses(resolver: Resolver, host: string): Promise<Answer> {
  const [a, aaaa] = await Promise.allSettled([
    resolver.resolve4(host, { ttl: true }),
    resolver.resolve6(host, { ttl: true }),
  ]);
  const v4 = a.status === "fulfilled" ? a.value.map((record) => record.address) : [];
  const v6 = aaaa.status === "fulfilled" ? aaaa.value.map((record) => record.address) : [];
  const failures = [a, aaaa].flatMap((r) => (r.status === "rejected" ? [r.reason as unknown] : []));
  const hardFailure = failures.find((reason) => !ABSENT_CODES.has(errorCode(reason) ?? ""));
  // With some answers and one family failing (say AAAA timing out), every address we will use was
  // seen and checked, so the call can go on; with no answer at all the failure is the result.
  if (v4.length === 0 && v6.length === 0) {
    if (hardFailure !== undefined) {
      throw new AppError("dns_failure", `DNS resolution of ${host} failed`, { cause: hardFailure });
    }
    throw new AppError("dns_no_address", `${host} has no A or AAAA record`);
  }
  // The shortest TTL of every record; an answer with a family failing is not reused.
  const records = [
    ...(a.status === "fulfilled" ? a.value : []),
    ...(aaaa.status === "fulfilled" ? aaaa.value : []),
  ];
  const ttlS = hardFailure === undefined ? Math.min(MAX_ANSWER_TTL_S, ...records.map((r) => r.ttl)) : 0;
  return { v4, v6, ttlS };
}

/**
 * Runs the two queries under the resolution budget and the caller's deadline: a signal, or the
 * milliseconds the call has left (one timer then serves both).
 */
async function resolveWithDeadline(
  servers: readonly string[] | undefined,
  host: string,
  timeoutMs: number,
  deadline: AbortSignal | number | undefined,
): Promise<Answer> {
  const signal = typeof deadline === "number" ? undefined : deadline;
  const callMs = typeof deadline === "number" ? deadline : Number.POSITIVE_INFINITY;
  if (signal?.aborted || callMs <= 0) {
    throw new AppError("timeout", "the call deadline passed before DNS resolution");
  }
  const resolver = newResolver(servers, timeoutMs);
  let isBudgetSpent = false;
  let isCallDeadline = false;
  const timer = setTimeout(
    () => {
      if (callMs < timeoutMs) isCallDeadline = true;
      else isBudgetSpent = true;
      resolver.cancel();
    },
    Math.min(timeoutMs, callMs),
  );
  const onAbort = () => resolver.cancel();
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    return await queryAddresses(resolver, host);
  } catch (error) {
    if (signal?.aborted || isCallDeadline)
      throw new AppError("timeout", "the call deadline passed during DNS resolution", { cause: error });
    if (isBudgetSpent)
      throw new AppError("dns_failure", `DNS resolution of ${host} timed out`, { cause: error });
    throw error;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}

function validateServers(servers: readonly string[] | undefined): void {
  if (servers === undefined || servers.length === 0) return;
  try {
    new Resolver().setServers([...servers]);
  } catch (error) {
    throw new AppError("invalid_request", "EGRESS_DNS_SERVERS must list ip[:port] entries", { cause: error });
  }
}

/**
 * Builds the resolver the proxy uses for every call. `resolve(host)`:
 * 1. a connect-to rule with a target address replaces DNS (development/test only);
 * 2. otherwise asks the configured resolvers for A and AAAA in parallel (never getaddrinfo:
 *    /etc/hosts and nsswitch must not decide where a credential goes), or reuses their answer
 *    within its TTL, at most 30 s (MAX_ANSWER_TTL_S);
 * 3. classifies every answer and decides (decide.ts): one refused address refuses the whole
 *    answer with an `AddressRefused` naming it; otherwise the first IPv4 answer, else the first
 *    IPv6 one, is the one address the upstream call dials.
 *
 * @example
 * const resolver = createDestinationResolver({ connectTo: [], allowCidrs: [] });
 * const destination = await resolver.resolve("api.github.com", 10_000);
 */
export function createDestinationResolver(opts: ResolverOptions): DestinationResolver {
  const servers = opts.dnsServers?.map((s) => s.trim()).filter((s) => s !== "");
  validateServers(servers);
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const connectTo = [...opts.connectTo];
  const allowCidrs = [...opts.allowCidrs];
  // The decision is a pure function of the answer (the ranges are fixed): the same few answers
  // come back all day, so each is classified once, at most MAX_DECISIONS of them kept.
  const decisions = new Map<string, ReturnType<typeof decideDestination>>();
  const now = opts.now ?? Date.now;
  // Answers within their TTL, by host (at most MAX_ANSWERS, the oldest dropped first).
  const answers = new Map<string, { v4: string[]; v6: string[]; expiresAt: number }>();
  const lookUp = async (host: string, deadline: AbortSignal | number | undefined) => {
    const known = answers.get(host);
    if (known !== undefined && known.expiresAt > now()) return known;
    const answer = await resolveWithDeadline(servers, host, timeoutMs, deadline);
    answers.delete(host);
    if (answer.ttlS > 0) {
      if (answers.size >= MAX_ANSWERS) answers.delete(answers.keys().next().value!);
      answers.set(host, { v4: answer.v4, v6: answer.v6, expiresAt: now() + answer.ttlS * 1000 });
    }
    return answer;
  };
  const decide = (answer: { v4: string[]; v6: string[] }) => {
    const key = `${answer.v4.join(",")}|${answer.v6.join(",")}`;
    const known = decisions.get(key);
    if (known) return known;
    const decision = decideDestination(answer, allowCidrs);
    if (decisions.size >= MAX_DECISIONS) decisions.delete(decisions.keys().next().value!);
    decisions.set(key, decision);
    return decision;
  };

  return {
    async resolve(hostText, deadline) {
      const host = hostText.toLowerCase().replace(/\.$/, "");
      // The caller refuses IP literals; this stops one that slips through from skipping the policy.
      if (isIP(host) !== 0) throw new AppError("ip_literal", "the host must be a name, not an IP address");
      const rule = findConnectToRule(connectTo, host, HTTPS_PORT);
      const port = rule?.targetPort ?? HTTPS_PORT;

      // A connect-to target replaces DNS but not the policy: it is decided like any answer.
      const target = rule?.targetAddress;
      const answer =
        target !== undefined
          ? isIP(target) === 6
            ? { v4: [], v6: [target] }
            : { v4: [target], v6: [] }
          : await lookUp(host, deadline);
      if (answer.v4.length === 0 && answer.v6.length === 0) {
        throw new AppError("dns_no_address", `${host} has no A or AAAA record`);
      }
      const decision = decide(answer);
      if (!decision.allowed) throw new AddressRefused(host, decision.refused);
      return { host, address: decision.address, family: decision.family, port };
    },
  };
}
