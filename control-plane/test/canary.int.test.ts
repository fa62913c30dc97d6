// The leak test of the foundation: a canary secret goes in through the items service, out through
// the real egress proxy to a TLS origin that echoes it back in every way it can, and is then
// searched for in the answer, every database row, the database's files on disk and both tiers' logs.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { Writable } from "node:stream";
import { sql } from "kysely";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { telemetry as egressTelemetry } from "../../egress-proxy/src/telemetry.ts";
import { createAuditRepo } from "../src/audit/audit.repo.ts";
import { createCallsService, locateCredential } from "../src/calls/calls.service.ts";
import type { OpenDatabase } from "../src/db/database.ts";
import { createItemsRepo } from "../src/items/items.repo.ts";
import { createItemsService } from "../src/items/items.service.ts";
import { startTelemetry, type Telemetry } from "../src/telemetry.ts";
import { newTestOrganisation, testDatabase } from "./database.ts";
import { type EgressHarness, startEgressHarness } from "./egress-harness.ts";
import { type OtlpReceiver, startOtlpReceiver } from "./otlp-receiver.ts";

const CANARY = "cnry_4f1d2e9a7b3c5d6e8f0a1b2c";
/** The signing modes sign for a host of their own (sigv4: region and service from the host). */
const AWS_HOST = "sqs.eu-west-1.amazonaws.com";
const SIGNING_HOSTS: Record<string, string> = { sigv4: AWS_HOST };

/** Every form in which the canary could escape. */
function leakForms(value: string): string[] {
  return [
    value,
    Buffer.from(value).toString("base64"),
    Buffer.from(`user:${value}`).toString("base64"),
    Buffer.from(value).toString("hex"),
    encodeURIComponent(value),
    value.slice(4, 20),
  ];
}

function expectNoLeak(label: string, text: string): void {
  for (const form of leakForms(CANARY)) expect(text.includes(form), `${label} contains ${form}`).toBe(false);
}

let harness: EgressHarness;
let database: OpenDatabase;
const controlPlaneLogs: string[] = [];
/** Both tiers' OpenTelemetry export (spans of every call, audit rows as log records). */
let otlp: OtlpReceiver;
let tracing: Telemetry;

beforeAll(async () => {
  otlp = await startOtlpReceiver();
  harness = await startEgressHarness({ providerHosts: [AWS_HOST], otlpEndpoint: otlp.url });
  tracing = await startTelemetry({ endpoint: otlp.url });
  database = await testDatabase();
}, 60_000);

afterAll(async () => {
  await harness.close();
  await tracing.shutdown();
  await otlp.close();
});

describe("a canary secret", () => {
  it("never appears in an answer, a database row, the database files or a log line", async () => {
    const logger = pino(
      { level: "trace" },
      new Writable({
        write(chunk, _enc, done) {
          controlPlaneLogs.push(String(chunk));
          done();
        },
      }),
    );
    const organisationId = await newTestOrganisation(database);
    const audit = createAuditRepo(database.db);
    const items = createItemsService({
      repo: createItemsRepo(database.db),
      sealingKey: async () => harness.proxy.sealingKey,
      recordEvent: audit.insertAuditEvent,
      environments: ["production"],
      defaultEnvironment: "production",
    });
    const calls = createCallsService({
      findItemByName: items.findCallableByName,
      findItemsByHost: items.findCallableByHost,
      // As services.ts wires it: each audit row also leaves as a log record in the call's trace.
      recordEvent: async (event) =>
        tracing.emitAuditRow(await audit.appendEvent({ ...event, traceId: tracing.traceId() })),
      minter: harness.minter,
      egress: harness.client,
    });
    // An origin that hands back everything it was sent: header, query, cookie, in body and headers.
    harness.setHandler((req, res) => {
      const echo = JSON.stringify({ headers: req.headers, url: req.url });
      res.writeHead(200, {
        "content-type": "application/json",
        "x-request-id": String(req.headers.authorization ?? req.headers["x-api-key"] ?? ""),
        link: `<https://api.latch.test${req.url}>; rel="next"`,
      });
      res.end(echo);
    });

    const answers: string[] = [];
    const modes = [
      "bearer",
      "basic",
      "header:X-Api-Key",
      "query:api_key",
      "cookie:session",
      "sigv4",
      "hmac:stripe_sig",
      "hmac:slack_sig",
      "hmac:github_sig",
    ];
    for (const inject of modes) {
      const name = `CANARY_${inject.replace(/[^a-z0-9]/gi, "_").toUpperCase()}`;
      const host = SIGNING_HOSTS[inject] ?? "api.latch.test";
      const stored = await items.storeItem(organisationId, "operator", {
        name,
        value: CANARY,
        allowed_hosts: [host],
        inject,
        username: inject === "basic" ? "user" : inject === "sigv4" ? "AKIDCANARY" : undefined,
      });
      answers.push(JSON.stringify(stored));
      const args = { method: "GET" as const, path: "/v1/echo?page=1", item_name: name };
      const callScope = { organisationId, environment: "production" };
      const located = await locateCredential(
        { findItemByName: items.findCallableByName, findItemsByHost: items.findCallableByHost },
        callScope,
        args,
      );
      const outcome = await tracing.inSpan("tools/call http_request", {}, () =>
        calls.executeCall({ ...callScope, actor: "agent:canary" }, args, located, {
          release: async () => {},
        }),
      );
      expect(outcome.reachedOrigin).toBe(true);
      expect(outcome.result.origin_status).toBe(200);
      const sent = JSON.stringify(harness.origin.requests.at(-1));
      if (inject === "sigv4" || inject.startsWith("hmac:")) {
        // A signing key never leaves the proxy: the origin gets a signature made with it.
        expect(sent).not.toContain(CANARY);
        expect(sent).toMatch(/AWS4-HMAC-SHA256|stripe-signature|x-slack-signature|x-hub-signature-256/);
        answers.push(JSON.stringify(outcome));
        continue;
      }
      // The origin did receive the secret: the proxy injected it...
      expect(sent).toContain(inject === "basic" ? Buffer.from(`user:${CANARY}`).toString("base64") : CANARY);
      // ...and the answer carries it only as [redacted].
      expect(outcome.result.body).toContain("[redacted]");
      answers.push(JSON.stringify(outcome));
    }
    answers.push(JSON.stringify(await items.listItems(organisationId)));
    answers.push(JSON.stringify(await audit.findAuditEvents(organisationId)));
    expectNoLeak("answers", answers.join("\n"));

    const tables = await sql<{ tablename: string }>`
      select tablename from pg_tables where schemaname = 'public'`.execute(database.db);
    expect(tables.rows.map((t) => t.tablename)).toContain("items");
    for (const { tablename } of tables.rows) {
      const rows = await sql<{ row: string }>`
        select row_to_json(t)::text as row from ${sql.table(tablename)} t`.execute(database.db);
      expectNoLeak(`table ${tablename}`, rows.rows.map((r) => r.row).join("\n"));
    }

    if (!process.env.DATABASE_URL) {
      await sql`checkpoint`.execute(database.db);
      for (const file of walkDatabaseFiles()) {
        const bytes = readFileSync(file);
        for (const form of leakForms(CANARY)) {
          expect(bytes.includes(Buffer.from(form)), `${file} contains ${form}`).toBe(false);
        }
      }
    }

    expectNoLeak("egress proxy logs", harness.logs.text());
    expectNoLeak("control plane logs", controlPlaneLogs.join(""));
    await Promise.all([tracing.flush(), egressTelemetry().flush()]);
    const spans = otlp.spans();
    for (const name of [
      "tools/call http_request",
      "latch.egress.v1.EgressProxy/Execute",
      "DNS",
      "origin answer",
    ]) {
      expect(
        spans.some((span) => span.name === name),
        `a ${name} span`,
      ).toBe(true);
    }
    expect(otlp.logRecords().some((record) => record.body === "http_request")).toBe(true);
    expectNoLeak("the OpenTelemetry export", otlp.raw.join("\n"));
    logger.flush();
  });
});

/** The files of this worker's PGlite copy (see test/database.ts). */
function walkDatabaseFiles(): string[] {
  const root = process.env.LATCH_TEST_PGDATA;
  if (!root) throw new Error("LATCH_TEST_PGDATA is not set by test/database.ts");
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else files.push(path);
    }
  };
  walk(root);
  expect(files.length).toBeGreaterThan(100);
  return files;
}
