// A database error reached through a route is logged with its SQLSTATE and statement name, and the
// caller gets the plain internal-error body: no SQL, parameter or quoted value in either.
import Fastify, { type FastifyInstance } from "fastify";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newTestOrganisation, testDatabase } from "../../test/database.ts";
import { LogCapture } from "../../test/egress-harness.ts";
import { createAuditRepo } from "../audit/audit.repo.ts";
import { registerErrorHandling } from "./errors.ts";
import { requestLogging, serializeLoggedError } from "./logging.ts";

const CANARY = "CANARY_logged_sql_51c2e8";

let app: FastifyInstance;
let logs: LogCapture;
let organisationId: string;

beforeAll(async () => {
  const database = await testDatabase();
  organisationId = await newTestOrganisation(database);
  const audit = createAuditRepo(database.db);
  logs = new LogCapture();
  // A pino logger types the instance more narrowly than FastifyInstance's default logger.
  app = Fastify(requestLogging(pino({ level: "info" }, logs))) as unknown as FastifyInstance;
  registerErrorHandling(app);
  // The audit route's repo call, with the filter the agent typed passed straight through.
  app.get("/audit", async (request) => {
    const { item_name } = request.query as { item_name?: string };
    return { events: await audit.findAuditEvents(organisationId, { itemName: item_name }) };
  });
  app.get("/raw", async () => {
    throw Object.assign(new Error(`invalid input syntax for type uuid: "${CANARY}"`), {
      severity: "ERROR",
      code: "22P02",
      query: `select * from "items" where "id" = $1`,
      params: [CANARY],
    });
  });
  await app.ready();
});

afterAll(async () => {
  await app.close();
});

function expectNoSqlOrValue(text: string): void {
  expect(text).not.toContain(CANARY);
  expect(text.toLowerCase()).not.toMatch(/from \\?"|\$1|"(?:query|params|detail|where)"/);
}

describe("database errors through a route", () => {
  it("a NUL in a filter: the log holds 22021 and the statement, the body a clean 500", async () => {
    logs.lines.length = 0;
    const response = await app.inject({
      method: "GET",
      url: `/audit?item_name=${encodeURIComponent(`${CANARY}\u0000`)}`,
    });
    expect(response.statusCode).toBe(500);
    expect(response.json()).toEqual({
      error: { code: "internal", message: "something went wrong on our side; it has been logged" },
    });
    expectNoSqlOrValue(response.body);
    const failure = logs.lines.map((line) => JSON.parse(line)).find((l) => l.msg === "request failed");
    expect(failure?.err).toMatchObject({ code: "22021", statement: "select audit_events" });
    expectNoSqlOrValue(logs.text());
  });

  it("an error straight from a driver (no wrapper) is cut down to its code", async () => {
    logs.lines.length = 0;
    const response = await app.inject({ method: "GET", url: "/raw" });
    expect(response.statusCode).toBe(500);
    expectNoSqlOrValue(response.body);
    const failure = logs.lines.map((line) => JSON.parse(line)).find((l) => l.msg === "request failed");
    expect(failure?.err).toEqual({
      type: "DatabaseError",
      message: "database error 22P02 in database",
      code: "22P02",
      statement: "database",
    });
    expectNoSqlOrValue(logs.text());
  });
});

describe("serializeLoggedError", () => {
  it("keeps an ordinary error's message and stack", () => {
    const serialized = serializeLoggedError(new TypeError("boom")) as Record<string, unknown>;
    expect(serialized).toMatchObject({ type: "TypeError", message: "boom" });
    expect(String(serialized.stack)).toContain("boom");
  });

  it("drops the raw request bytes an HTTP parse error carries (its bearer, its cookies)", async () => {
    const { connect } = await import("node:net");
    const seen = new LogCapture();
    const traced = Fastify(requestLogging(pino({ level: "trace" }, seen))) as unknown as FastifyInstance;
    await traced.listen({ host: "127.0.0.1", port: 0 });
    try {
      const { port } = traced.server.address() as { port: number };
      await new Promise<void>((resolve) => {
        const socket = connect(port, "127.0.0.1", () => {
          socket.write(
            `GET /x HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer avm_${CANARY}\r\nBad Header: x\r\n\r\n`,
          );
        });
        socket.on("data", () => socket.end());
        socket.on("close", () => resolve());
      });
      await expect.poll(() => seen.text()).toContain("HPE_INVALID_HEADER_TOKEN");
      expect(seen.text()).not.toContain("rawPacket");
      expect(seen.text()).not.toContain(CANARY);
    } finally {
      await traced.close();
    }
  });

  it("cuts a raw database error found in the cause chain", () => {
    const raw = Object.assign(new Error(`Key (name)=(${CANARY}) already exists.`), {
      code: "23505",
      detail: `Key (name)=(${CANARY}) already exists.`,
    });
    const outer = new Error("outer", { cause: new Error("middle", { cause: raw }) });
    const serialized = serializeLoggedError(outer);
    expect(serialized).toMatchObject({ type: "DatabaseError", code: "23505" });
    expect(JSON.stringify(serialized)).not.toContain(CANARY);
  });
});
