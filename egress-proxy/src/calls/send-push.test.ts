// SendPush's own rules (the end-to-end push is control-plane/test/web-push.int.test.ts): only the
// headers a push message needs, each of its form; at most 4096 bytes; only a push ticket; a refused
// message dials nothing.
import type { PushSpec, Ticket } from "@latch/proto/egress";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { createMetrics } from "../metrics/metrics.ts";
import type { UpstreamRequest } from "../upstream/call.ts";
import { createSendPush, type SendPushDeps } from "./send-push.ts";

const VAPID = "vapid t=eyJhbGciOiJFUzI1NiJ9.eyJhdWQiOiJ4In0.c2ln, k=BKey";

function push(overrides: Partial<PushSpec> = {}): PushSpec {
  return {
    host: "fcm.googleapis.com",
    path: "/fcm/send/abc",
    headers: [
      { name: "TTL", value: "600" },
      { name: "Content-Encoding", value: "aes128gcm" },
      { name: "Authorization", value: VAPID },
      { name: "Urgency", value: "high" },
    ],
    body: Buffer.alloc(200),
    timeoutMs: 5_000,
    ...overrides,
  };
}

function sendWith(spec: PushSpec, extra: Partial<Ticket> = {}) {
  const dialled: UpstreamRequest[] = [];
  const deps = {
    checkTicket: async () => ({ id: "t".repeat(22), push: spec, ...extra }) as Ticket,
    spendTicket: async () => {},
    resolver: {
      resolve: async () => ({ host: spec.host, address: "142.250.0.1", family: 4, port: 443 }),
    },
    upstream: {
      call: async (request: UpstreamRequest) => {
        dialled.push(request);
        return { status: 201, headers: [{ name: "retry-after", value: "30" }], body: Buffer.alloc(0) };
      },
      close: async () => {},
    },
    metrics: createMetrics(),
    logger: pino({ level: "silent" }),
  } as unknown as SendPushDeps;
  return { send: createSendPush(deps), dialled };
}

describe("SendPush", () => {
  it("posts the message with its push headers and answers the push service's status", async () => {
    const { send, dialled } = sendWith(push());
    const answer = await send(undefined);
    expect(answer).toMatchObject({ reachedOrigin: true, originStatus: 201, retryAfterS: 30 });
    expect(dialled[0]).toMatchObject({ method: "POST", path: "/fcm/send/abc" });
    expect(dialled[0]!.headers.map((h) => h.name)).toEqual([
      "ttl",
      "content-encoding",
      "authorization",
      "urgency",
    ]);
  });

  it.each<[string, Partial<PushSpec>, string]>([
    ["a cookie header", { headers: [{ name: "Cookie", value: "a=b" }] }, "invalid_header"],
    [
      "a second Authorization",
      {
        headers: [
          { name: "authorization", value: VAPID },
          { name: "Authorization", value: VAPID },
        ],
      },
      "invalid_header",
    ],
    [
      "a bearer instead of VAPID",
      { headers: [{ name: "Authorization", value: "Bearer abc" }] },
      "invalid_header",
    ],
    [
      "another content encoding",
      { headers: [{ name: "Content-Encoding", value: "aesgcm" }] },
      "invalid_header",
    ],
    ["a CRLF in a value", { headers: [{ name: "TTL", value: "60\r\nX-Evil: 1" }] }, "invalid_header"],
    // Names an object literal inherits: the table of push headers must not read them as forms.
    ["a constructor header", { headers: [{ name: "constructor", value: "1" }] }, "invalid_header"],
    ["a __proto__ header", { headers: [{ name: "__proto__", value: "1" }] }, "invalid_header"],
    ["a body over 4096 bytes", { body: Buffer.alloc(4097) }, "payload_too_large"],
    ["an IP address as host", { host: "10.0.0.1" }, "ip_literal"],
    ["a path with dot segments", { path: "/a/../b" }, "invalid_path"],
  ])("refuses %s and dials nothing", async (_label, overrides, code) => {
    const { send, dialled } = sendWith(push(overrides));
    const answer = await send(undefined);
    expect(answer).toMatchObject({ reachedOrigin: false, error: { code } });
    expect(dialled).toEqual([]);
  });

  it("takes only a push ticket", async () => {
    const { send, dialled } = sendWith(push(), { call: {} as Ticket["call"] });
    await expect(send(undefined)).rejects.toMatchObject({ code: "ticket_invalid" });
    expect(dialled).toEqual([]);
  });
});
