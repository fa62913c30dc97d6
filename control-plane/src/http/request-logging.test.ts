// What Fastify's request lines say, and at which level: a console's polling and the health checks
// stay below info, everything else (and any failure of those) is logged at info or above.
import { Writable } from "node:stream";
import Fastify, { type FastifyInstance } from "fastify";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { humanLogLine } from "./human-log.ts";
import { requestLogging } from "./logging.ts";

class Lines extends Writable {
  readonly entries: { level: number; msg: string; req?: { path?: string } }[] = [];
  override _write(chunk: Buffer, _encoding: BufferEncoding, done: () => void): void {
    this.entries.push(JSON.parse(chunk.toString("utf8")));
    done();
  }
}

let app: FastifyInstance | undefined;

afterEach(async () => {
  await app?.close();
  app = undefined;
});

async function appLoggingAt(level: "info" | "debug"): Promise<{ app: FastifyInstance; lines: Lines }> {
  const lines = new Lines();
  app = Fastify(requestLogging(pino({ level }, lines))) as unknown as FastifyInstance;
  app.get("/health", async () => ({ ok: true }));
  app.get("/ready", async (_request, reply) => reply.status(503).send({ ok: false }));
  app.get("/api/inbox", async () => ({ items: [] }));
  app.post("/api/inbox", async () => ({ ok: true }));
  app.get("/api/items", async () => ({ items: [] }));
  app.get("/broken", async () => {
    throw new Error("broken on purpose");
  });
  await app.ready();
  return { app, lines };
}

describe("request lines", () => {
  it("a health check and the console's inbox polling write nothing at info", async () => {
    const { app, lines } = await appLoggingAt("info");
    expect((await app.inject({ method: "GET", url: "/health" })).statusCode).toBe(200);
    expect((await app.inject({ method: "GET", url: "/api/inbox?since=1" })).statusCode).toBe(200);
    expect(lines.entries).toEqual([]);
  });

  it("a failing probe is still worth its completed line at info", async () => {
    const { app, lines } = await appLoggingAt("info");
    expect((await app.inject({ method: "GET", url: "/ready" })).statusCode).toBe(503);
    expect(lines.entries.map((e) => [e.level, e.msg])).toEqual([[30, "request completed"]]);
  });

  it("they are still there at debug", async () => {
    const { app, lines } = await appLoggingAt("debug");
    await app.inject({ method: "GET", url: "/health" });
    expect(lines.entries.map((e) => [e.level, e.msg])).toEqual([
      [20, "incoming request"],
      [20, "request completed"],
    ]);
  });

  it("every other request, and a write to a polled path, is logged at info", async () => {
    const { app, lines } = await appLoggingAt("info");
    await app.inject({ method: "GET", url: "/api/items" });
    await app.inject({ method: "POST", url: "/api/inbox", payload: {} });
    expect(lines.entries.map((e) => [e.level, e.msg])).toEqual([
      [30, "incoming request"],
      [30, "request completed"],
      [30, "incoming request"],
      [30, "request completed"],
    ]);
  });
});

describe("human log lines (a terminal)", () => {
  it("reads as time, level, message and fields, nested fields dotted", () => {
    const line = humanLogLine(
      `${JSON.stringify({ level: 30, time: Date.UTC(2026, 0, 1, 12, 4, 31), pid: 1, hostname: "h", msg: "request completed", req: { method: "GET", path: "/api/items" }, res: { status: 200 } })}\n`,
    );
    expect(line).toMatch(
      /^\d\d:\d\d:\d\d INFO {2}request completed req\.method=GET req\.path=\/api\/items res\.status=200\n$/,
    );
    expect(line).not.toContain("{");
    expect(line).not.toContain("hostname");
  });

  it("quotes a value that could start a fake line or a terminal escape", () => {
    const line = humanLogLine(
      `${JSON.stringify({ level: 40, time: 0, msg: "odd", name: "a\nFATAL b\u001b[2J" })}\n`,
    );
    expect(line.split("\n")).toHaveLength(2);
    expect(line).not.toContain("\u001b");
  });

  it("puts an error's stack on the lines below, indented", () => {
    const line = humanLogLine(
      `${JSON.stringify({ level: 50, time: 0, msg: "failed", err: { type: "Error", message: "boom", stack: "Error: boom\n    at x" } })}\n`,
    );
    expect(line).toMatch(/ERROR failed err\.type=Error err\.message=boom\n {4}Error: boom\n {8}at x\n$/);
  });

  it("escapes a terminal escape or a carriage return in an error's stack", () => {
    const line = humanLogLine(
      `${JSON.stringify({ level: 50, time: 0, msg: "failed", err: { type: "Error", stack: "Error: a\u001b[2J\rFATAL b\n    at x" } })}\n`,
    );
    expect(line).not.toContain("\u001b");
    expect(line).not.toContain("\r");
    expect(line).toContain("\\u001b[2J\\rFATAL b");
  });

  it("passes on a line that is not a log entry unchanged", () => {
    expect(humanLogLine("LATCH_EGRESS_READY port=1\n")).toBe("LATCH_EGRESS_READY port=1\n");
  });
});
