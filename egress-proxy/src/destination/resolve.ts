// Destination policy: resolve a host once, check every answer, and pin the one address the
// upstream call dials. No second lookup happens anywhere, which is what defeats DNS rebinding.
import { Resolver } from "node:dns/promises";
import { isIP } from "node:net";
import { AppError } from "@latch/shared/errors";
import type { Cidr, DeniedVerdict } from "./classify.ts";
import { type ConnectToRule, findConnectToRule } from "./connect-to.ts";
import { type DestinationDecision, type DnsAnswer, decideDestination } from "./decide.ts";

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

/** What the resolver's two caches hold now (for tests: both stay bounded whatever DNS answers). */
export interface ResolverCacheSizes {
  answers: number;
  decisions: number;
  /** The characters of the decisions' keys, the one part of an entry whose size an answer sets. */
  decisionKeyChars: number;
}

/** The proxy's resolver, with a look at its caches. */
export interface CachingDestinationResolver extends DestinationResolver {
  cacheSizes(): ResolverCacheSizes;
}

/** Spec 4.2 rule 2: port 443 only. Another port comes only from a connect-to rule. */
const HTTPS_PORT = 443;
const DEFAULT_TIMEOUT_MS = 5_000;
const DNS_TRIES = 2;
/**
 * Addresses read per family. Real services answer far fewer: large CDNs and cloud load balancers
 * 4 to 8 A records (Route 53 multivalue answers 8 at most), and 32 A records are about what one
 * 512-byte UDP answer can carry. A longer answer is refused (`dns_failure`): only a hostile
 * server sends thousands, over TCP, to fill the proxy's memory and spend its CPU.
 */
const MAX_ADDRESSES_PER_FAMILY = 32;
const MAX_DECISIONS = 1024;
/**
 * The decisions' keys together, in characters. A key lists one answer's addresses (at most 64,
 * about 1,700 characters), so 1,024 long answers would keep 1.7 MB; the usual answer of a few
 * addresses (a key of a few hundred characters) meets the count bound first.
 */
const MAX_DECISION_KEY_CHARS = 512 * 1024;
/**
 * An answer is reused for its TTL, at most this long: a call within it asks no DNS. Every call
 * dials only the address decided on the answer it uses (a reused answer keeps the decision made
 * on it, which refuses or allows every call alike); a TTL of 0 is never reused, so an answer that
 * changes on every query (the rebinding attacker) is read afresh by every call.
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

/**
 * Both families at once. One family missing is normal; a resolver error with no answer is not.
 * An answer of more than MAX_ADDRESSES_PER_FAMILY addresses in a family is refused before any of
 * them is read further: c-ares parses the whole message and Node hands back every record (there
 * is no option to stop earlier), so the count is the first thing looked at.
 */
async function queryAddresses(resolver: Resolver, host: string): Promise<Answer> {
  const [a, aaaa] = await Promise.allSettled([
    resolver.resolve4(host, { ttl: true }),
    resolver.resolve6(host, { ttl: true }),
  ]);
  for (const [family, result] of [
    ["IPv4", a],
    ["IPv6", aaaa],
  ] as const) {
    if (result.status === "fulfilled" && result.value.length > MAX_ADDRESSES_PER_FAMILY) {
      throw new AppError(
        "dns_failure",
        `${host} answers more than ${MAX_ADDRESSES_PER_FAMILY} ${family} addresses, which Latch does not read`,
      );
    }
  }
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
 *    within its TTL, at most 30 s (MAX_ANSWER_TTL_S); more than 32 addresses in a family
 *    (MAX_ADDRESSES_PER_FAMILY) is `dns_failure`;
 * 3. classifies every answer and decides (decide.ts): one refused address refuses the whole
 *    answer with an `AddressRefused` naming it; otherwise the first IPv4 answer, else the first
 *    IPv6 one, is the one address the upstream call dials.
 *
 * @example
 * const resolver = createDestinationResolver({ connectTo: [], allowCidrs: [] });
 * const destination = await resolver.resolve("api.github.com", 10_000);
 */
export function createDestinationResolver(opts: ResolverOptions): CachingDestinationResolver {
  const servers = opts.dnsServers?.map((s) => s.trim()).filter((s) => s !== "");
  validateServers(servers);
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const connectTo = [...opts.connectTo];
  const allowCidrs = [...opts.allowCidrs];
  // The decision is a pure function of the answer (the ranges are fixed): the same few answers
  // come back all day, so each is classified once, the oldest dropped first past MAX_DECISIONS or
  // MAX_DECISION_KEY_CHARS. A decision is small (decide.ts); its key is at most 64 addresses.
  const decisions = new Map<string, DestinationDecision>();
  let decisionKeyChars = 0;
  const now = opts.now ?? Date.now;
  // Answers within their TTL, by host, each kept as its decision (the same pure function of it):
  // at most MAX_ANSWERS, the oldest dropped first, and the expired ones swept every
  // MAX_ANSWER_TTL_S, so a name asked once does not stay. A host is at most 253 characters (c-ares
  // refuses a longer name before asking), so an entry is small and of bounded size.
  const answers = new Map<string, { decision: DestinationDecision; expiresAt: number }>();
  let nextSweepAt = now() + MAX_ANSWER_TTL_S * 1000;
  const sweepAnswers = (at: number) => {
    for (const [host, known] of answers) if (known.expiresAt <= at) answers.delete(host);
    nextSweepAt = at + MAX_ANSWER_TTL_S * 1000;
  };
  const decide = (answer: DnsAnswer): DestinationDecision => {
    const key = `${answer.v4.join(",")}|${answer.v6.join(",")}`;
    const known = decisions.get(key);
    if (known) return known;
    const decision = decideDestination(answer, allowCidrs);
    decisions.set(key, decision);
    decisionKeyChars += key.length;
    while (decisions.size > MAX_DECISIONS || decisionKeyChars > MAX_DECISION_KEY_CHARS) {
      const oldest = decisions.keys().next().value!;
      decisions.delete(oldest);
      decisionKeyChars -= oldest.length;
    }
    return decision;
  };
  const lookUp = async (host: string, deadline: AbortSignal | number | undefined) => {
    const at = now();
    if (at >= nextSweepAt) sweepAnswers(at);
    const known = answers.get(host);
    if (known !== undefined && known.expiresAt > at) return known.decision;
    const answer = await resolveWithDeadline(servers, host, timeoutMs, deadline);
    const decision = decide(answer);
    answers.delete(host);
    if (answer.ttlS > 0) {
      if (answers.size >= MAX_ANSWERS) answers.delete(answers.keys().next().value!);
      answers.set(host, { decision, expiresAt: now() + answer.ttlS * 1000 });
    }
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
      const decision =
        target !== undefined
          ? decide(isIP(target) === 6 ? { v4: [], v6: [target] } : { v4: [target], v6: [] })
          : await lookUp(host, deadline);
      if (!decision.allowed) throw new AddressRefused(host, decision.refused);
      return { host, address: decision.address, family: decision.family, port };
    },
    cacheSizes: () => ({ answers: answers.size, decisions: decisions.size, decisionKeyChars }),
  };
}
