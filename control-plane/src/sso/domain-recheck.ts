// Proven domains are checked again. A domain proven once (sso-connections.service.ts verifyDomains)
// could change hands later: a lapsed registration bought by someone else, a subsidiary sold. Once a
// day each proven domain's TXT record is read again; a check that reads the DNS and does not find
// the record is a miss, and LAPSE_AFTER_MISSES misses in a row (two days at the least) take the
// domain off the proven ones: it makes no more accounts, routes no sign-in and is required of
// nobody until its owner proves it again. The owners are mailed at the first miss and at the
// lapse; the lapse is audited (`sso_domain_lapsed`, actor "system"). A DNS that cannot be read
// (the proxy down, the resolver failing) counts neither way: an outage never lapses a domain.
import { AppError } from "@latch/shared/errors";
import type { Logger } from "pino";
import type { Mail } from "../mail/mailer.ts";
import { startRounds } from "../rounds.ts";
import { type TxtLookup, verificationRecord } from "./domain-records.ts";
import type { DomainRecheckRow, SsoRepo } from "./sso.repo.ts";
import type { SsoTransaction } from "./sso-connections.service.ts";

/** How often each connection's proven domains are read again. */
export const RECHECK_EVERY_MS = 24 * 60 * 60 * 1000;
/** Checks in a row that miss a domain's record before it stops counting. */
export const LAPSE_AFTER_MISSES = 3;
/** How often a replica looks for connections due (each is taken by one replica). */
const ROUND_EVERY_MS = 60 * 60 * 1000;
const CONNECTIONS_PER_CLAIM = 50;
/** Bounded, so that one round cannot go on for ever. */
const MAX_CLAIMS_PER_ROUND = 40;

export interface DomainRecheckDeps {
  repo: Pick<SsoRepo, "claimDomainRechecks">;
  inTransaction<T>(fn: (tx: SsoTransaction) => Promise<T>): Promise<T>;
  lookUpTxt: TxtLookup;
  /** Mails the organisation's owners (their addresses are the caller's to find). */
  mailOwners(organisationId: string, mail: Omit<Mail, "to">): Promise<void>;
  baseUrl: string;
  logger: Pick<Logger, "warn" | "error">;
  now: () => Date;
}

/** What one domain's check found: its record, no record, or nothing (the DNS could not be read). */
type Finding = "found" | "missing" | "unread";

export interface RecheckRound {
  /** Connections whose proven domains were read. */
  connections: number;
  /** Domains found missing this round, and the ones of them that lapsed. */
  missing: { organisationId: string; domain: string; misses: number }[];
  lapsed: { organisationId: string; domain: string }[];
}

export function createDomainRecheck(deps: DomainRecheckDeps) {
  async function findRecord(domain: string, token: string, organisationId: string): Promise<Finding> {
    const record = verificationRecord(domain, token);
    try {
      const texts = await deps.lookUpTxt(record.name, organisationId);
      return texts.includes(record.value) ? "found" : "missing";
    } catch (error) {
      const code = error instanceof AppError ? error.code : "unknown";
      deps.logger.warn(
        { domain, code },
        "a proven SSO domain's record could not be read; checked again tomorrow",
      );
      return "unread";
    }
  }

  async function recheckConnection(row: DomainRecheckRow, round: RecheckRound): Promise<void> {
    const organisationId = row.organisation_id;
    const findings = await Promise.all(
      row.verified_domains.map(async (domain) => ({
        domain,
        finding: await findRecord(domain, row.domain_token, organisationId),
      })),
    );
    // Misses of the domains still proven only (one taken off the list forgets its count).
    const misses: Record<string, number> = {};
    const lapsed: string[] = [];
    const missing: RecheckRound["missing"] = [];
    for (const { domain, finding } of findings) {
      const before = row.domain_misses[domain] ?? 0;
      const after = finding === "found" ? 0 : finding === "missing" ? before + 1 : before;
      const isLapsed = finding === "missing" && after >= LAPSE_AFTER_MISSES;
      // A lapsed domain keeps no count: proven again, it starts from none.
      if (after > 0 && !isLapsed) misses[domain] = after;
      if (finding === "missing") missing.push({ organisationId, domain, misses: after });
      if (isLapsed) lapsed.push(domain);
    }
    const isKept = await deps.inTransaction(async ({ repo, recordEvent }) => {
      const read = { token: row.domain_token, misses: row.domain_misses };
      if (!(await repo.recordDomainRecheck(organisationId, read, misses, lapsed))) return false;
      for (const domain of lapsed) {
        await recordEvent({
          organisationId,
          actor: "system",
          action: "sso_domain_lapsed",
          detail: { domain, checks_missed: LAPSE_AFTER_MISSES },
        });
      }
      return true;
    });
    // The connection was made again, or a domain proven again, meanwhile: what was read is stale.
    if (!isKept) return;
    round.missing.push(...missing);
    round.lapsed.push(...lapsed.map((domain) => ({ organisationId, domain })));
    for (const { domain, misses: count } of missing) {
      await deps
        .mailOwners(organisationId, mailFor(domain, row.domain_token, count, deps.baseUrl))
        .catch((error: unknown) =>
          deps.logger.error(
            { code: (error as { code?: string }).code ?? "unknown" },
            "SSO domain mail not sent",
          ),
        );
    }
  }

  return {
    /**
     * One round: every connection whose proven domains were not read in the last day, taken a
     * batch at a time (another replica's round takes others), read, and what was found kept.
     * `only`: these organisations' connections alone (tests, whose database other runs share).
     */
    async recheckDue(options: { only?: readonly string[] } = {}): Promise<RecheckRound> {
      const round: RecheckRound = { connections: 0, missing: [], lapsed: [] };
      for (let claim = 0; claim < MAX_CLAIMS_PER_ROUND; claim++) {
        const at = deps.now();
        const rows = await deps.repo.claimDomainRechecks(
          at,
          new Date(at.getTime() - RECHECK_EVERY_MS),
          CONNECTIONS_PER_CLAIM,
          options.only,
        );
        for (const row of rows) {
          // One connection's failure (its write refused) leaves it as it was and the others checked.
          await recheckConnection(row, round).catch((error: unknown) =>
            deps.logger.error(
              { organisationId: row.organisation_id, code: (error as { code?: string }).code ?? "unknown" },
              "an SSO connection's domains were read again but not recorded",
            ),
          );
        }
        round.connections += rows.length;
        if (rows.length < CONNECTIONS_PER_CLAIM) break;
      }
      return round;
    },
  };
}

export type DomainRecheck = ReturnType<typeof createDomainRecheck>;

/** The owners' mail: a first miss warns, a lapse says what stopped. */
function mailFor(domain: string, token: string, misses: number, baseUrl: string): Omit<Mail, "to"> {
  const record = verificationRecord(domain, token);
  const publish = `The record: ${record.name} TXT "${record.value}". Publish it again, then use Check DNS records in Members: ${baseUrl}/console#members`;
  if (misses >= LAPSE_AFTER_MISSES) {
    return {
      subject: `Latch: ${domain} no longer counts for single sign-on`,
      text:
        `Latch did not find the TXT record that proves ${domain} on ${misses} daily checks in a row, so the domain no longer counts for your organisation's single sign-on: new addresses of it are not made members, "Sign in with SSO" does not route them to you, and single sign-on is not required of its members.\n\n` +
        publish,
    };
  }
  return {
    subject: `Latch: the DNS record proving ${domain} is missing`,
    text:
      `Latch's daily check did not find the TXT record that proves ${domain} for your organisation's single sign-on (${misses} of ${LAPSE_AFTER_MISSES} checks). If it is still missing after ${LAPSE_AFTER_MISSES - misses} more, the domain stops counting: new addresses of it are not made members and single sign-on is no longer required of its members.\n\n` +
      publish,
  };
}

/** Runs a round every hour until stopped; a failed round is logged and tried again the next hour. */
export function startDomainRecheckSchedule(
  recheck: Pick<DomainRecheck, "recheckDue">,
  logger: Pick<Logger, "error">,
  intervalMs = ROUND_EVERY_MS,
): () => void {
  return startRounds({
    everyMs: intervalMs,
    logger,
    failure: "SSO domains not checked again",
    round: () => recheck.recheckDue(),
  });
}
