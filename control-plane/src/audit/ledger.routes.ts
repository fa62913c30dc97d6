// The ledger over HTTP, hosted and local (DECISIONS "Ledger and telemetry"):
// GET /api/audit/ledger (JSON Lines), GET /api/audit/verify, and the public
// GET /.well-known/latch-audit-keys.json that checkpoints verify with.
import { Readable } from "node:stream";
import type { FastifyContextConfig, FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import type { ZodTypeProvider } from "../http/route-schemas.ts";
import type { AuditKeysUnreadableError } from "./audit-keys.ts";
import { auditKeysDocument, ledgerExport, ledgerQuery, ledgerVerification } from "./ledger.schemas.ts";
import type { LedgerService } from "./ledger.service.ts";
import type { AuditKeysDocument } from "./ledger-verify.ts";

export interface LedgerRouteDeps {
  ledger: Pick<LedgerService, "exportLedger" | "verify">;
  /** The published keys; the last ones read, `onUnreadable` told why, when the key file cannot be read. */
  publishedKeys(onUnreadable?: (error: AuditKeysUnreadableError) => void): AuditKeysDocument;
  /** Who may read the ledger, and the organisation the caller acts in (checked before anything is read). */
  access: {
    config?: FastifyContextConfig;
    preValidation?: (request: FastifyRequest) => Promise<void>;
    organisationOf(request: FastifyRequest): Promise<string>;
  };
}

export function registerLedgerRoutes(app: FastifyInstance, deps: LedgerRouteDeps): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  const { organisationOf, ...access } = deps.access;

  api.get(
    "/api/audit/ledger",
    { ...access, schema: { querystring: ledgerQuery, response: { 200: ledgerExport } } },
    async (request, reply) => {
      const organisationId = await organisationOf(request);
      const lines = deps.ledger.exportLedger(organisationId, request.query.since_seq ?? 0);
      // The first line is read before answering, so a database that fails at once is an error
      // status, not an empty 200. A failure later cuts the stream: the file then ends without the
      // closing checkpoint, and verifying it against the published head shows rows missing.
      const first = await lines.next();
      async function* text() {
        if (!first.done) yield `${JSON.stringify(first.value)}\n`;
        for await (const line of lines) yield `${JSON.stringify(line)}\n`;
      }
      const day = new Date().toISOString().slice(0, 10);
      return (
        reply
          .type("application/jsonl; charset=utf-8")
          .header("content-disposition", `attachment; filename="latch-ledger-${organisationId}-${day}.jsonl"`)
          // A stream is sent as it is (Fastify serializes no stream); the schema documents its lines.
          .send(Readable.from(text()) as unknown as string)
      );
    },
  );

  api.get(
    "/api/audit/verify",
    { ...access, schema: { response: { 200: ledgerVerification } } },
    async (request) => deps.ledger.verify(await organisationOf(request)),
  );

  app.withTypeProvider<ZodTypeProvider>().get(
    "/.well-known/latch-audit-keys.json",
    {
      schema: { querystring: z.looseObject({}).describe("ignored"), response: { 200: auditKeysDocument } },
    },
    async (request, reply) => {
      // Public, like the other well-known documents: a foreign Origin is reflected (spec 5 rule 6).
      const origin = request.headers.origin;
      if (origin) reply.header("access-control-allow-origin", origin).header("vary", "Origin");
      // The last keys read are served (a 503 would stop every check of the checkpoints signed);
      // the file that cannot be read is logged each time, as the checkpoint round does.
      return deps.publishedKeys((error) =>
        request.log.error(
          { code: error.code, file: error.file, cause: error.reason },
          `audit keys published as last read: ${error.message}`,
        ),
      );
    },
  );
}
