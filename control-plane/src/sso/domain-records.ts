// Proof that an organisation holds a domain it lists for single sign-on: a DNS TXT record,
// `_latch-verification.<domain>`, carrying `latch-verification=<the connection's token>`. The
// control plane has no network of its own, so the record is read through the egress proxy from a
// DNS-over-HTTPS JSON API (SSO_DNS_URL, Google's `/resolve?name=&type=TXT` by default), as a
// credential-less document fetch.
import { AppError } from "@latch/shared/errors";
import type { EgressClient } from "../egress/egress-client.ts";
import type { TicketMinter } from "../egress/tickets.ts";

export const RECORD_PREFIX = "_latch-verification";
const VALUE_PREFIX = "latch-verification=";
const TIMEOUT_MS = 5_000;
const MAX_ANSWER_BYTES = 64 * 1024;
/** DNS record type TXT and the rcode of a name that does not exist. */
const TXT = 16;
const NXDOMAIN = 3;

/** The record an organisation publishes for `domain`: its name and the value it must carry. */
export function verificationRecord(domain: string, token: string): { name: string; value: string } {
  return { name: `${RECORD_PREFIX}.${domain}`, value: `${VALUE_PREFIX}${token}` };
}

/**
 * The TXT texts published at `name` (none when it does not exist), read on a ticket of
 * `organisationId`, the organisation proving the domain.
 */
export type TxtLookup = (name: string, organisationId: string) => Promise<string[]>;

/**
 * A TXT record's text as the JSON API gives it: one or more quoted strings (a long record is cut
 * into strings of 255 bytes), joined; or the bare text some resolvers give.
 */
export function txtText(data: string): string {
  const quoted = data.match(/"((?:[^"\\]|\\.)*)"/g);
  if (!quoted) return data.trim();
  return quoted.map((part) => part.slice(1, -1).replace(/\\(.)/g, "$1")).join("");
}

function dnsFailure(message: string, cause?: unknown): AppError {
  return new AppError("dns_failure", message, cause === undefined ? {} : { cause });
}

export function createTxtLookup(deps: {
  egress: Pick<EgressClient, "fetchDocument">;
  minter: Pick<TicketMinter, "mintDocumentTicket">;
  dnsUrl: string;
}): TxtLookup {
  const base = new URL(deps.dnsUrl);
  return async (name, organisationId) => {
    const query = new URLSearchParams({ name, type: "TXT" });
    const ticket = deps.minter.mintDocumentTicket(
      {
        host: base.hostname,
        path: `${base.pathname}?${query}`,
        timeoutMs: TIMEOUT_MS,
        maxBytes: MAX_ANSWER_BYTES,
      },
      { organisationId },
    );
    const answer = await deps.egress.fetchDocument(ticket, TIMEOUT_MS + 1_000).catch((cause: unknown) => {
      throw dnsFailure(`the DNS records of ${name} could not be read`, cause);
    });
    if (answer.error || answer.originStatus !== 200) {
      throw dnsFailure(
        `the DNS records of ${name} could not be read (${answer.error?.code ?? `status ${answer.originStatus}`})`,
      );
    }
    let parsed: { Status?: unknown; Answer?: unknown };
    try {
      parsed = JSON.parse(Buffer.from(answer.body).toString("utf8"));
    } catch (cause) {
      throw dnsFailure(`the DNS answer for ${name} is not JSON`, cause);
    }
    if (parsed.Status === NXDOMAIN) return [];
    if (parsed.Status !== 0)
      throw dnsFailure(`the DNS answered ${name} with an error (${String(parsed.Status)})`);
    const records = Array.isArray(parsed.Answer) ? parsed.Answer : [];
    return records.flatMap((record: { type?: unknown; data?: unknown }) =>
      record?.type === TXT && typeof record.data === "string" ? [txtText(record.data)] : [],
    );
  };
}
