// FetchDocument: a credential-less GET of a public document for the control plane (an OAuth client
// ID metadata document, DECISIONS "OAuth authorization server"), so that the control plane itself
// opens no outbound connection. The same rules as a call: a signed single-use ticket, the host and
// path rules, DNS resolved once and every answer classified (no private, loopback or link-local
// address), TLS to the host, redirects returned and never followed, one deadline, a body cap.
// Nothing is opened and nothing is redacted: the ticket carries no credential.

import type { FetchDocumentResponse, SignedTicket, Ticket } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import type { Logger } from "pino";
import type { DestinationResolver } from "../destination/resolve.ts";
import type { Metrics } from "../metrics/metrics.ts";
import { partOfKind } from "../tickets/ticket-kind.ts";
import type { TicketChecker, TicketSpender } from "../tickets/verify.ts";
import type { Upstream } from "../upstream/call.ts";
import { checkTarget } from "./check-target.ts";
import {
  createOrganisationCalls,
  inOrganisationPlace,
  type OrganisationCalls,
} from "./organisation-calls.ts";

/** The raw body cap of upstream/ is 1 MiB; a document may ask for less, never more. */
export const MAX_DOCUMENT_BYTES = 1024 * 1024;

export interface FetchDocumentDeps {
  checkTicket: TicketChecker;
  spendTicket: TicketSpender;
  resolver: DestinationResolver;
  upstream: Upstream;
  metrics: Metrics;
  logger: Logger;
  /** The cap on each organisation's calls in flight, shared with Execute; its own when not given. */
  organisationCalls?: OrganisationCalls;
}

export function createFetchDocument(
  deps: FetchDocumentDeps,
): (signed: SignedTicket | undefined) => Promise<FetchDocumentResponse> {
  const organisationCalls = deps.organisationCalls ?? createOrganisationCalls();
  return async (signed) => {
    const startedAt = performance.now();
    const ticket = await deps.checkTicket(signed);
    const spec = partOfKind(ticket, "document", "the ticket carries no document fetch");
    // Past its organisation's cap: refused as not started (organisation-calls.ts), unspent.
    return inOrganisationPlace(organisationCalls, ticket.organisationId, () =>
      fetchDocument(ticket, spec, startedAt),
    );
  };

  /** The document fetch of a verified ticket: spent, then sent. */
  async function fetchDocument(
    ticket: Ticket,
    spec: NonNullable<Ticket["document"]>,
    startedAt: number,
  ): Promise<FetchDocumentResponse> {
    await deps.spendTicket(ticket);
    let reachedOrigin = false;
    try {
      const target = checkTarget(spec);
      const maxBytes = Math.min(spec.maxBytes || MAX_DOCUMENT_BYTES, MAX_DOCUMENT_BYTES);
      const destination = await deps.resolver.resolve(target.host, spec.timeoutMs);
      const remainingMs = Math.max(1, spec.timeoutMs - (performance.now() - startedAt));
      const answer = await deps.upstream.call({
        organisationId: ticket.organisationId,
        destination,
        method: "GET",
        path: target.path,
        headers: [{ name: "accept", value: "application/json" }],
        timeoutMs: remainingMs,
        // How long the document may be cached is the document host's to say.
        keepHeaders: ["cache-control"],
      });
      reachedOrigin = true;
      if (answer.body.length > maxBytes) {
        throw new AppError("body_too_large", `the document is larger than ${maxBytes} bytes`);
      }
      deps.metrics.countCall("answered");
      deps.logger.info(
        { ticket: ticket.id.slice(0, 8), host: target.host, status: answer.status, document: true },
        "document fetched",
      );
      return {
        reachedOrigin,
        originStatus: answer.status,
        body: answer.body,
        contentType: answer.headers.find((h) => h.name === "content-type")?.value ?? "",
        cacheControl: answer.headers.find((h) => h.name === "cache-control")?.value ?? "",
        error: undefined,
        durationMs: Math.round(performance.now() - startedAt),
      };
    } catch (caught) {
      const error =
        caught instanceof AppError
          ? caught
          : new AppError("internal", "the fetch failed inside the proxy", { cause: caught });
      if (error.code === "internal") deps.logger.error({ err: caught }, "document fetch failed");
      deps.metrics.countCall(
        reachedOrigin || error.extra.reachedOrigin === true ? "failed_after_send" : "refused",
      );
      deps.metrics.countDenial(error.code);
      deps.logger.warn(
        { ticket: ticket.id.slice(0, 8), host: spec.host.slice(0, 253), code: error.code },
        "document fetch refused",
      );
      return {
        reachedOrigin: reachedOrigin || error.extra.reachedOrigin === true,
        originStatus: 0,
        body: Buffer.alloc(0),
        contentType: "",
        cacheControl: "",
        error: { code: error.code, message: error.message },
        durationMs: Math.round(performance.now() - startedAt),
      };
    }
  }
}
