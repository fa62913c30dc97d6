import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { answerLine, relayTo } from "./mcp-stdio.ts";

// A stand-in for `vault serve`'s POST /mcp: sessions from initialize, 400 without one, 404 once
// forgotten (spec 4.4).
const sessions = new Set<string>();
let issued = 0;
let initializeCount = 0;
let received = 0;
let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => {
      raw += c;
    });
    req.on("end", () => {
      received++;
      const frame = JSON.parse(raw) as { id?: number; method: string };
      if (frame.method === "initialize") {
        initializeCount++;
        const id = `s${++issued}`;
        sessions.add(id);
        res.writeHead(200, { "content-type": "application/json", "mcp-session-id": id });
        res.end(JSON.stringify({ jsonrpc: "2.0", id: frame.id, result: { session: id } }));
        return;
      }
      const session = req.headers["mcp-session-id"];
      if (typeof session !== "string") {
        res.writeHead(400, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { code: "invalid_request", message: "send Mcp-Session-Id" } }));
        return;
      }
      if (!sessions.has(session)) {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { code: "not_found", message: "unknown session" } }));
        return;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ jsonrpc: "2.0", id: frame.id, result: { session } }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe("the vault mcp relay to a running vault serve", () => {
  it("answers a refused frame with a JSON-RPC error for its id", async () => {
    const relay = relayTo(
      base,
      "avm_test",
      () => true,
      () => "avm_test",
    );
    expect(await relay({ jsonrpc: "2.0", id: 7, method: "ping" })).toMatchObject({
      jsonrpc: "2.0",
      id: 7,
      error: { code: -32000 },
    });
  });

  it("sends nothing once that vault serve no longer runs there (its port may be anyone's), and answers the id", async () => {
    let isServing = true;
    const relay = relayTo(
      base,
      "avm_test",
      () => isServing,
      () => "avm_test",
    );
    await relay({ jsonrpc: "2.0", id: 1, method: "initialize", params: { clientInfo: { name: "a" } } });
    isServing = false;
    const before = received;
    expect(await relay({ jsonrpc: "2.0", id: 2, method: "ping" })).toMatchObject({
      id: 2,
      error: { code: -32000, message: expect.stringContaining("restart vault mcp") },
    });
    expect(await relay({ jsonrpc: "2.0", method: "notifications/initialized" })).toBeUndefined();
    expect(received).toBe(before);
  });

  it("answers the id of a frame whose connection fails, instead of leaving the client waiting", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", () => resolve()));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const relay = relayTo(
      `http://127.0.0.1:${port}`,
      "avm_test",
      () => true,
      () => "avm_test",
    );
    expect(await relay({ jsonrpc: "2.0", id: "x", method: "ping" })).toMatchObject({
      id: "x",
      error: { code: -32000, message: expect.stringContaining("did not answer") },
    });
  });

  it("initializes again when the server forgot the session (8 idle hours) and sends the frame once more", async () => {
    const relay = relayTo(
      base,
      "avm_test",
      () => true,
      () => "avm_test",
    );
    await relay({ jsonrpc: "2.0", id: 1, method: "initialize", params: { clientInfo: { name: "a" } } });
    const before = initializeCount;
    sessions.clear();
    const answer = (await relay({ jsonrpc: "2.0", id: 2, method: "ping" })) as {
      id: number;
      result: { session: string };
    };
    expect(answer.id).toBe(2);
    expect(sessions.has(answer.result.session)).toBe(true);
    expect(initializeCount).toBe(before + 1);
  });
});

// A `vault serve` restarted after tokens.json was deleted holds a new model token (and none of the
// old sessions): the relay reads tokens.json again on a 401 and sends the frame once more.
describe("the relay to a vault serve whose model token changed", () => {
  let accepted = "lvm_first";
  let renewedSessions = new Set<string>();
  let guarded: Server;
  let guardedBase: string;

  beforeAll(async () => {
    guarded = createServer((req, res) => {
      let raw = "";
      req.on("data", (c) => {
        raw += c;
      });
      req.on("end", () => {
        const frame = JSON.parse(raw) as { id?: number; method: string };
        if (req.headers.authorization !== `Bearer ${accepted}`) {
          res.writeHead(401, { "content-type": "application/json" });
          res.end(JSON.stringify({ error: { code: "unauthorized", message: "send the model token" } }));
          return;
        }
        if (frame.method === "initialize") {
          const id = `g${renewedSessions.size + 1}`;
          renewedSessions.add(id);
          res.writeHead(200, { "content-type": "application/json", "mcp-session-id": id });
          res.end(JSON.stringify({ jsonrpc: "2.0", id: frame.id, result: { session: id } }));
          return;
        }
        const session = req.headers["mcp-session-id"];
        if (typeof session !== "string" || !renewedSessions.has(session)) {
          res.writeHead(404, { "content-type": "application/json" });
          res.end(JSON.stringify({ error: { code: "not_found", message: "unknown session" } }));
          return;
        }
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ jsonrpc: "2.0", id: frame.id, result: { token: accepted } }));
      });
    });
    await new Promise<void>((resolve) => guarded.listen(0, "127.0.0.1", () => resolve()));
    guardedBase = `http://127.0.0.1:${(guarded.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => guarded.close(() => resolve())));

  it("reads tokens.json again on a 401 and answers the frame with the new token", async () => {
    accepted = "lvm_first";
    let onDisk = "lvm_first";
    const relay = relayTo(
      guardedBase,
      "lvm_first",
      () => true,
      () => onDisk,
    );
    await relay({ jsonrpc: "2.0", id: 1, method: "initialize", params: { clientInfo: { name: "a" } } });
    expect(await relay({ jsonrpc: "2.0", id: 2, method: "ping" })).toMatchObject({
      result: { token: "lvm_first" },
    });

    // tokens.json deleted, vault serve restarted: a new model token, the sessions forgotten.
    accepted = "lvm_second";
    onDisk = "lvm_second";
    renewedSessions = new Set();
    expect(await relay({ jsonrpc: "2.0", id: 3, method: "ping" })).toMatchObject({
      id: 3,
      result: { token: "lvm_second" },
    });
    expect(await relay({ jsonrpc: "2.0", id: 4, method: "ping" })).toMatchObject({ id: 4, result: {} });
  });

  it("still refused with what tokens.json holds, tells the user to restart the agent's vault mcp", async () => {
    accepted = "lvm_elsewhere";
    const relay = relayTo(
      guardedBase,
      "lvm_first",
      () => true,
      () => "lvm_first",
    );
    const answer = (await relay({ jsonrpc: "2.0", id: 5, method: "ping" })) as { error: { message: string } };
    expect(answer).toMatchObject({ id: 5, error: { code: -32000 } });
    expect(answer.error.message).toContain("restart the agent's vault mcp");
    expect(answer.error.message).not.toContain("lvm_");

    // tokens.json gone (or unreadable): the same sentence, nothing read is sent.
    const unreadable = relayTo(
      guardedBase,
      "lvm_first",
      () => true,
      () => {
        throw new Error("ENOENT");
      },
    );
    expect(await unreadable({ jsonrpc: "2.0", id: 6, method: "ping" })).toMatchObject({
      id: 6,
      error: { message: expect.stringContaining("restart the agent's vault mcp") },
    });
  });
});

describe("a stdin line", () => {
  it("too deep is refused with -32602 for its id before the relay serialises it (no stack overflow)", async () => {
    const handled: unknown[] = [];
    const handle = async (frame: unknown) => {
      handled.push(frame);
      return { jsonrpc: "2.0", id: 1, result: {} };
    };
    const deep = `${"[".repeat(50_000)}${"]".repeat(50_000)}`;
    const line = `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"http_request","arguments":{"method":"POST","path":"/","body":${deep}}}}`;
    expect(await answerLine(line, handle)).toMatchObject({ jsonrpc: "2.0", id: 9, error: { code: -32602 } });
    expect(await answerLine("{not json", handle)).toMatchObject({ id: null, error: { code: -32700 } });
    expect(handled).toEqual([]);
    expect(await answerLine('{"jsonrpc":"2.0","id":1,"method":"ping"}', handle)).toMatchObject({
      result: {},
    });
    expect(handled).toHaveLength(1);
  });
});
