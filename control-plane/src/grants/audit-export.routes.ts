// GET /api/audit/export (DECISIONS "Teams": exporting the audit is an owner's, an admin's or an
// auditor's): every event of the filtered view, newest first, as CSV or JSON Lines, a file to keep.
// The console's Export buttons download it. A view of more than MAX_EXPORT_EVENTS events exports
// the newest of them, and says so in headers (the file's format stays as DECISIONS keeps it):
// X-Latch-Truncated: true and X-Latch-Oldest-At, the time of the oldest event the file holds.
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import type { AuditEventView, AuditRepo } from "../audit/audit.repo.ts";
import { toCsv, toExportRows, toJsonLines } from "../audit/audit-export.ts";
import { requireOrgOperator } from "../auth/operator-guard.ts";
import { operatorOnly } from "../auth/principal.ts";
import { checkedFirst, type ZodTypeProvider } from "../http/route-schemas.ts";
import { auditFilterOf, auditQuery } from "./grants.schemas.ts";

/** The most events one export holds; a narrower filter (dates) exports the rest. */
export const MAX_EXPORT_EVENTS = 10_000;
/** The response headers that say how much of the view the file holds. */
const EXPORT_HEADERS = {
  "X-Latch-Events": "how many events the file holds",
  "X-Latch-Truncated": `true when the view holds more events than one export (${MAX_EXPORT_EVENTS}): the file holds the newest; a narrower date range (since, until) exports the others`,
  "X-Latch-Oldest-At": "with X-Latch-Truncated: true, the time of the oldest event the file holds",
};
const PAGE = 200;

const exportQuery = auditQuery.omit({ before: true }).extend({
  format: z.enum(["csv", "jsonl"]).default("csv").describe("csv (the default) or jsonl"),
});

export function registerAuditExportRoutes(
  app: FastifyInstance,
  deps: {
    audit: Pick<AuditRepo, "findAuditEvents">;
    /** The organisation's clients by id, to name agents in the details. */
    clientNames(organisationId: string): Promise<Map<string, string>>;
  },
): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  const operatorOf = (request: FastifyRequest) => requireOrgOperator(request);
  api.get(
    "/api/audit/export",
    {
      ...checkedFirst(
        {
          ...operatorOnly("audit.export"),
          openapi: {
            responses: {
              200: {
                description: "The events as a file: CSV (format=csv) or JSON Lines (format=jsonl)",
                content: { "text/csv": z.string(), "application/jsonl": z.string() },
                headers: {
                  "Content-Disposition": "attachment; filename=latch-audit-<day>.<format>",
                  ...EXPORT_HEADERS,
                },
              },
            },
          },
        },
        operatorOf,
      ),
      schema: {
        querystring: exportQuery,
        response: {
          200: z.string().describe("the events as CSV (text/csv) or JSON Lines (application/jsonl)"),
        },
      },
    },
    async (request, reply) => {
      const { organisationId } = await operatorOf(request);
      const query = request.query;
      const events: AuditEventView[] = [];
      let before: string | undefined;
      // One event past the cap is read: it tells a view that was cut from one that fits exactly.
      while (events.length <= MAX_EXPORT_EVENTS) {
        const limit = Math.min(PAGE, MAX_EXPORT_EVENTS + 1 - events.length);
        const page = await deps.audit.findAuditEvents(organisationId, {
          ...auditFilterOf(query),
          before,
          limit,
        });
        events.push(...page);
        if (page.length < limit) break;
        before = page.at(-1)!.id;
      }
      const isTruncated = events.length > MAX_EXPORT_EVENTS;
      const kept = events.slice(0, MAX_EXPORT_EVENTS);
      const rows = toExportRows(kept, await deps.clientNames(organisationId));
      const isCsv = query.format === "csv";
      const day = new Date().toISOString().slice(0, 10);
      reply
        .header("content-type", isCsv ? "text/csv; charset=utf-8" : "application/jsonl; charset=utf-8")
        .header("content-disposition", `attachment; filename="latch-audit-${day}.${query.format}"`)
        .header("x-latch-events", String(rows.length))
        .header("x-latch-truncated", String(isTruncated));
      if (isTruncated) reply.header("x-latch-oldest-at", kept.at(-1)!.at);
      return reply.send(isCsv ? toCsv(rows) : toJsonLines(rows));
    },
  );
}
