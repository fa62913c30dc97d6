// GET /api/inbox/stream (DECISIONS "Approvals that reach the operator"): the live inbox as
// Server-Sent Events for the session's organisation: approval_requested, approval_decided,
// need_created and need_closed, each with the ledger seq as its id. The first event (`ready`)
// carries the current seq, so a stream that drops before anything happened still resumes from
// there with Last-Event-ID and misses nothing; one that fell too far behind gets `reset` (load the
// inbox again). The session is checked again while the stream is open, and before each event is
// written: signed out, switched to another organisation or removed from it, the stream ends.
import { AppError } from "@latch/shared/errors";
import type { FastifyContextConfig, FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import type { AuditRepo } from "../audit/audit.repo.ts";
import { createKeepaliveStreams, STREAM_LIMITS, type StreamLimits } from "../http/keepalive-streams.ts";
import type { ZodTypeProvider } from "../http/route-schemas.ts";
import { formatServerSentEvent, INBOX_ACTIONS, type InboxEvent, toInboxEvent } from "./inbox-events.ts";
import { INBOX_PAGE, type InboxHub } from "./inbox-hub.ts";

/** A comment line keeps proxies and browsers from closing an idle stream. */
const KEEPALIVE_MS = 20_000;
/** How often an open stream checks that its session may still read the organisation. */
const RECHECK_MS = 10_000;
/** EventSource waits this long before reconnecting (the `retry` field). */
const RETRY_MS = 2_000;

export interface InboxStreamDeps {
  hub: InboxHub;
  audit: Pick<AuditRepo, "findHeadSeqs" | "findRowsAfter">;
  access: {
    config?: FastifyContextConfig;
    preValidation?: (request: FastifyRequest) => Promise<void>;
    /** The organisation and session of the caller. */
    callerOf(request: FastifyRequest): Promise<{ organisationId: string; sessionId: string }>;
    /** Whether the caller's session may still read the organisation (re-checked while open). */
    isStillAllowed(request: FastifyRequest, organisationId: string): Promise<boolean>;
  };
  /**
   * The caps on open streams (http/keepalive-streams.ts, as GET /mcp's; the holder is the
   * session): 8 per session (tabs), 200 per organisation, 2,000 per process, a full process making
   * room at the expense of the organisation holding the most. A test passes small ones.
   */
  limits?: StreamLimits;
}

/** The seq a reconnect names, or undefined (none, or not a seq). */
function lastEventIdOf(request: FastifyRequest): number | undefined {
  const header = request.headers["last-event-id"];
  const value = typeof header === "string" ? header.trim() : "";
  return /^\d{1,15}$/.test(value) ? Number(value) : undefined;
}

/** The 429 of a stream a cap refuses (its session's, its organisation's or the process's). */
function tooManyStreams(): AppError {
  return new AppError(
    "rate_limited",
    "too many live inbox streams are open for this session, its organisation or this server; close a tab",
    { extra: { retry_after: 30 } },
  );
}

export function registerInboxStreamRoutes(app: FastifyInstance, deps: InboxStreamDeps): void {
  const { callerOf, isStillAllowed, ...access } = deps.access;
  // Every stream from its admission (still opening, too) until its socket closes. Streams are
  // hijacked from Fastify, so closing the server must end them itself.
  const streams = createKeepaliveStreams(deps.limits ?? STREAM_LIMITS);
  app.addHook("preClose", async () => {
    streams.endAll();
    deps.hub.close();
  });

  app.withTypeProvider<ZodTypeProvider>().get(
    "/api/inbox/stream",
    {
      ...access,
      config: {
        ...access.config,
        openapi: {
          summary: "The live inbox (Server-Sent Events); Last-Event-ID resumes after a seq",
          responses: {
            200: {
              description:
                "events approval_requested, approval_decided, need_created, need_closed (and ready, reset), each with the ledger seq as id",
              content: { "text/event-stream": z.string() },
            },
          },
          errors: [429],
        },
      },
    },
    async (request, reply) => {
      const { organisationId, sessionId } = await callerOf(request);
      const raw = reply.raw;
      /** Ended (to make room for a smaller organisation, or the server closes) before it opened. */
      let isEnded = false;
      let isOpen = false;
      // The place is taken before the ledger is read: streams opened at once are counted one by one,
      // never all let through by the same look at the count. Ended once open, it ends cleanly and
      // the console's EventSource reconnects by itself (`retry`).
      const stream = streams.admit(sessionId, organisationId, () => {
        isEnded = true;
        if (isOpen) raw.end();
      });
      if (stream === undefined) throw tooManyStreams();
      // Every path gives the place back through here; a second time does nothing.
      const release = () => streams.forget(stream);
      let head: number;
      let resumeFrom: number | undefined;
      let missed: Awaited<ReturnType<typeof deps.audit.findRowsAfter>>;
      try {
        head = (await deps.audit.findHeadSeqs([organisationId])).get(organisationId) ?? 0;
        const asked = lastEventIdOf(request);
        // An id ahead of this organisation's ledger (another organisation's, or made up) is read as now.
        resumeFrom = asked !== undefined && asked <= head ? asked : undefined;
        missed =
          resumeFrom === undefined
            ? []
            : await deps.audit.findRowsAfter(organisationId, {
                actions: INBOX_ACTIONS,
                afterSeq: resumeFrom,
                limit: INBOX_PAGE + 1,
              });
      } catch (error) {
        release();
        throw error;
      }
      // Its place went to another organisation (or the server closes) while the ledger was read:
      // refused as if it came now.
      if (isEnded) {
        release();
        throw tooManyStreams();
      }

      reply.hijack();
      // The browser went away while the ledger was read: its `close` has fired already, so nothing
      // would ever end this stream; give its place back now.
      if (raw.destroyed || request.raw.destroyed || request.raw.socket.destroyed) {
        release();
        return;
      }
      isOpen = true;
      raw.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-store",
        "x-content-type-options": "nosniff",
        // nginx and similar would hold the events back in a buffer.
        "x-accel-buffering": "no",
        connection: "keep-alive",
      });
      const write = (text: string) => {
        if (!raw.writableEnded) raw.write(text);
      };
      write(`retry: ${RETRY_MS}\n\n`);
      let cursor: number;
      if (missed.length > INBOX_PAGE) {
        // Too far behind to replay: the console loads the inbox again and follows from now.
        cursor = head;
        write(formatServerSentEvent({ id: head, type: "reset", data: { seq: head } }));
      } else {
        const events = missed.map(toInboxEvent).filter((e): e is InboxEvent => e !== undefined);
        cursor = Math.max(resumeFrom ?? head, missed.at(-1)?.seq ?? 0);
        write(formatServerSentEvent({ id: resumeFrom ?? head, type: "ready", data: { seq: head } }));
        for (const event of events) write(formatServerSentEvent(event));
      }

      // Each batch is judged before it is written, in order: a member removed (or signed out,
      // switched away, shut out by "Require SSO") since the last check hears nothing more of the
      // organisation, not RECHECK_MS of its requests. A check that fails ends the stream too: the
      // console reconnects with Last-Event-ID and misses nothing.
      let delivered = Promise.resolve();
      const unsubscribe = deps.hub.subscribe(organisationId, {
        cursor,
        send: (events) => {
          delivered = delivered.then(async () => {
            if (raw.writableEnded) return;
            const allowed = await isStillAllowed(request, organisationId).catch(() => false);
            if (!allowed) {
              raw.end();
              return;
            }
            for (const event of events) write(formatServerSentEvent(event));
          });
        },
      });
      const keepalive = setInterval(() => write(": keepalive\n\n"), KEEPALIVE_MS);
      let isChecking = false;
      const recheck = setInterval(() => {
        if (isChecking) return;
        isChecking = true;
        isStillAllowed(request, organisationId)
          .then(
            (allowed) => {
              if (!allowed) raw.end();
            },
            // The database is down: keep the stream; the next check decides.
            () => {},
          )
          .finally(() => {
            isChecking = false;
          });
      }, RECHECK_MS);
      const close = () => {
        clearInterval(keepalive);
        clearInterval(recheck);
        unsubscribe();
        release();
      };
      raw.once("close", close);
    },
  );
}
