// POST /mcp speaks JSON-RPC to the end (spec 4.1): a body that is not JSON, sent as another media
// type or over the size limit is a JSON-RPC error object (id null) with the HTTP status kept; a
// frame with an id is a request and always gets an answer, even for a notifications/ method; an id
// JSON cannot carry exactly is refused rather than answered with a rounded one. Raw frames through
// the hosted app, as the SDK client never sends these shapes.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BODY_LIMIT_BYTES } from "../src/app.ts";
import { type HostedHarness, operatorWithClient, startHosted } from "./hosted.ts";

let h: HostedHarness;
let token: string;

beforeAll(async () => {
  h = await startHosted();
  ({ token } = await operatorWithClient(h, {
    secret: "sk_live_frames_canary_0d4e",
    items: [{ name: "API_KEY" }],
    clientName: "frames agent",
  }));
}, 60_000);
afterAll(async () => {
  await h?.close();
});

/** POST /mcp with the model bearer, the body sent as it is. */
const post = (payload: string, contentType = "application/json") =>
  h.app.inject({
    method: "POST",
    url: "/mcp",
    headers: { authorization: `Bearer ${token}`, "content-type": contentType },
    payload,
  });

describe("POST /mcp refuses a body as JSON-RPC", () => {
  it("answers a body of another media type with -32700 and id null, still 415", async () => {
    const response = await post('{"jsonrpc":"2.0","id":1,"method":"ping"}', "text/plain");
    expect(response.statusCode).toBe(415);
    expect(response.json()).toEqual({
      jsonrpc: "2.0",
      id: null,
      error: { code: -32700, message: expect.stringContaining("application/json") },
    });
  });

  it("answers a body over the limit with -32600 naming the limit, id null, still 413", async () => {
    const frame = JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: {
        name: "http_request",
        arguments: { method: "POST", path: "/", body: "x".repeat(BODY_LIMIT_BYTES) },
      },
    });
    const response = await post(frame);
    expect(response.statusCode).toBe(413);
    expect(response.json()).toEqual({
      jsonrpc: "2.0",
      id: null,
      error: { code: -32600, message: expect.stringContaining("128 KiB") },
    });
  });

  it("keeps -32700 for a body that is not JSON, and the API envelope elsewhere", async () => {
    const broken = await post("{not json");
    expect(broken.statusCode).toBe(400);
    expect(broken.json()).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32700 } });
    // Not a JSON-RPC route: the API's own envelope.
    const api = await h.app.inject({
      method: "POST",
      url: "/api/items",
      headers: { "content-type": "text/plain" },
      payload: "x",
    });
    expect(api.json()).toMatchObject({ error: { code: expect.any(String) } });
  });
});

describe("POST /mcp frames", () => {
  it("answers a notifications/ method sent with an id as a request: -32601, not 202", async () => {
    const response = await post('{"jsonrpc":"2.0","id":7,"method":"notifications/x"}');
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ jsonrpc: "2.0", id: 7, error: { code: -32601 } });
    // Without an id it is a notification: 202 and nothing to read.
    const notification = await post('{"jsonrpc":"2.0","method":"notifications/initialized"}');
    expect(notification.statusCode).toBe(202);
    expect(notification.body).toBe("");
  });

  it("refuses an integer id beyond 2^53 with -32600 and id null, never echoing a rounded one", async () => {
    const response = await post('{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}');
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600 } });
    expect(response.body).not.toContain("e+29");
    // Not taken for a notification either.
    const notification = await post('{"jsonrpc":"2.0","id":1e300,"method":"notifications/initialized"}');
    expect(notification.json()).toMatchObject({ id: null, error: { code: -32600 } });
  });

  it("echoes ids JSON carries exactly: the largest safe integers, a string; a fraction is refused", async () => {
    for (const id of ["9007199254740991", "-9007199254740991", '"abc"']) {
      const response = await post(`{"jsonrpc":"2.0","id":${id},"method":"ping"}`);
      expect(response.body).toBe(`{"jsonrpc":"2.0","id":${id},"result":{}}`);
    }
    // 0.12345678901234567890 would come back as 0.12345678901234568: no fraction is echoed.
    for (const id of ["1.5", "0.12345678901234567890"]) {
      const response = await post(`{"jsonrpc":"2.0","id":${id},"method":"ping"}`);
      expect(response.json()).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600 } });
    }
  });
});
