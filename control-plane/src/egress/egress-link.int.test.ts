// The whole call path below the control plane's service layer: a ticket minted here, sent over
// real gRPC to a real proxy, which calls a real TLS origin on loopback.
import { AppError } from "@latch/shared/errors";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { gzipBomb, slowDrip } from "../../../egress-proxy/test/origin.ts";
import { type EgressHarness, startEgressHarness } from "../../test/egress-harness.ts";
import { createTicketMinter } from "./tickets.ts";

const SECRET = 'sk_test_Zq9/+x=y&z"quote"-canary-4f1c';

let h: EgressHarness;
beforeAll(async () => {
  h = await startEgressHarness({
    dnsAnswers: {
      "dns-public.latch.test": { A: ["127.0.0.1"] },
      "dns-private.latch.test": { A: ["10.0.0.5"] },
      "dns-mixed.latch.test": { A: ["127.0.0.1", "10.0.0.1"] },
      "dns-metadata.latch.test": { A: ["169.254.169.254"] },
      "dns-mapped.latch.test": { AAAA: ["::ffff:10.0.0.1"] },
      "dns-rebind.latch.test": { sequence: [{ A: ["127.0.0.1"] }, { A: ["10.0.0.1"] }] },
    },
  });
});
afterAll(() => h.close());
beforeEach(() => {
  // Default origin: echo what arrived, the way a careless API echoes a credential back.
  h.setHandler((req, res, recorded) => {
    res.writeHead(200, {
      "content-type": "application/json",
      "x-request-id": "req-1",
      "set-cookie": "s=1",
      "x-internal": "no",
    });
    res.end(
      JSON.stringify({
        method: req.method,
        url: req.url,
        headers: req.headers,
        body: recorded.body.toString("utf8"),
      }),
    );
  });
});

async function execute(secret: string, overrides: Parameters<EgressHarness["callSpec"]>[1] = {}) {
  const before = h.origin.requests.length;
  const response = await h.client.execute(
    h.minter.mintCallTicket(await h.callSpec(secret, overrides)),
    10_000,
  );
  return {
    response,
    sent: h.origin.requests.slice(before),
    body: Buffer.from(response.body).toString("utf8"),
  };
}

describe("inject modes reach the origin and are redacted on the way back", () => {
  it("bearer", async () => {
    const { response, sent, body } = await execute(SECRET);
    expect(response.error).toBeUndefined();
    expect(response.originStatus).toBe(200);
    expect(sent[0]?.headers.authorization).toBe(`Bearer ${SECRET}`);
    expect(body).not.toContain("sk_test_Zq9");
    expect(body).toContain("[redacted]");
  });

  it("basic, with the base64 of the pair redacted", async () => {
    const { sent, body } = await execute(SECRET, { inject: "basic", username: "acct_1" });
    const expected = Buffer.from(`acct_1:${SECRET}`).toString("base64");
    expect(sent[0]?.headers.authorization).toBe(`Basic ${expected}`);
    expect(body).not.toContain(expected);
    expect(body).not.toContain("sk_test_Zq9");
  });

  it("header:<name>", async () => {
    const { sent, body } = await execute(SECRET, { inject: "header:X-Api-Key" });
    expect(sent[0]?.headers["x-api-key"]).toBe(SECRET);
    expect(sent[0]?.headers.authorization).toBeUndefined();
    expect(body).not.toContain("sk_test_Zq9");
  });

  it("query:<param>, URL-encoded, replacing a caller-supplied value", async () => {
    const { sent, body } = await execute(SECRET, {
      inject: "query:api_key",
      path: "/v1/echo?page=2&api_key=mine",
    });
    const url = new URL(sent[0]?.url ?? "", "https://x");
    expect(url.searchParams.getAll("api_key")).toEqual([SECRET]);
    expect(url.searchParams.get("page")).toBe("2");
    expect(body).not.toContain(encodeURIComponent(SECRET));
    expect(body).not.toContain("sk_test_Zq9");
  });

  it("cookie:<name>", async () => {
    const secret = "cookie_value_0123456789abcdef";
    const { sent, body } = await execute(secret, { inject: "cookie:session" });
    expect(sent[0]?.headers.cookie).toBe(`session=${secret}`);
    expect(body).not.toContain(secret);
  });
});

describe("responses", () => {
  it("redacts a secret that the origin splits across chunks, in body and headers", async () => {
    h.setHandler((_req, res) => {
      res.writeHead(200, { "content-type": "text/plain", "x-request-id": `id-${SECRET}` });
      res.write(`before ${SECRET.slice(0, 9)}`);
      setTimeout(() => res.end(`${SECRET.slice(9)} after`), 20);
    });
    const { response, body } = await execute(SECRET);
    expect(body).toBe("before [redacted] after");
    expect(response.headers).toContainEqual({ name: "x-request-id", value: "id-[redacted]" });
  });

  it("returns only allow-listed headers", async () => {
    const { response } = await execute(SECRET);
    const names = response.headers.map((h) => h.name).sort();
    expect(names).toEqual(["content-type", "x-request-id"]);
  });

  it("returns a redirect without following it", async () => {
    h.setHandler((_req, res) => res.writeHead(302, { location: "https://api.latch.test/elsewhere" }).end());
    const { response, sent } = await execute(SECRET);
    expect(response.originStatus).toBe(302);
    expect(sent).toHaveLength(1);
    expect(response.headers.find((x) => x.name === "location")).toBeUndefined();
  });

  it("gives 204 an empty body", async () => {
    h.setHandler((_req, res) => res.writeHead(204).end());
    const { response, body } = await execute(SECRET);
    expect(response.originStatus).toBe(204);
    expect(body).toBe("");
  });

  it("cuts a compression bomb as body_too_large with origin_status 502", async () => {
    h.setHandler(gzipBomb(20 * 1024 * 1024));
    const { response } = await execute(SECRET);
    expect(response.error?.code).toBe("body_too_large");
    expect(response.originStatus).toBe(502);
    expect(response.reachedOrigin).toBe(true);
  });

  it("cuts a body the model may see at 256 KiB", async () => {
    h.setHandler((_req, res) => res.end("a".repeat(300 * 1024)));
    const { response } = await execute(SECRET);
    expect(response.body.length).toBe(256 * 1024);
    expect(response.bodyTruncated).toBe(true);
  });

  it("holds a slow-drip origin to the one deadline", async () => {
    h.setHandler(slowDrip(100, 10_000));
    const started = Date.now();
    const { response } = await execute(SECRET, { timeoutMs: 1_500 });
    expect(response.error?.code).toBe("timeout");
    expect(Date.now() - started).toBeLessThan(4_000);
  });

  it("reuses one TLS connection for a stream of calls", async () => {
    await execute(SECRET); // warm the pool
    const before = h.origin.connections;
    for (let i = 0; i < 8; i++) await execute(SECRET);
    expect(h.origin.connections - before).toBe(0);
  });
});

describe("refusals: nothing leaves", () => {
  it.each([
    ["a host the credential does not allow", { host: "other.latch.test" }, "host_mismatch"],
    ["an IP literal host", { host: "127.0.0.1", allowedHosts: ["127.0.0.1"] }, "ip_literal"],
    ["an octal IP literal host", { host: "0177.0.0.1", allowedHosts: ["0177.0.0.1"] }, "ip_literal"],
    ["a dot-segment path", { path: "/v1/../admin" }, "invalid_path"],
    ["an encoded slash", { path: "/v1/a%2fb" }, "invalid_path"],
    ["a caller Host header", { headers: [{ name: "Host", value: "evil" }] }, "invalid_header"],
    ["a CRLF in a header value", { headers: [{ name: "X-A", value: "a\r\nX-B: b" }] }, "invalid_header"],
    ["a TRACE method", { method: "TRACE" }, "invalid_method"],
    ["a timeout outside 1000-30000", { timeoutMs: 60_000 }, "invalid_timeout"],
    ["an unknown inject mode", { inject: "sigv5" }, "invalid_inject"],
  ])("%s", async (_name, overrides, code) => {
    const { response, sent } = await execute(SECRET, overrides);
    expect(response.error?.code).toBe(code);
    expect(response.reachedOrigin).toBe(false);
    expect(sent).toHaveLength(0);
  });

  it.each([
    ["dns-private.latch.test", "private_range"],
    ["dns-mixed.latch.test", "private_range"],
    ["dns-metadata.latch.test", "link_local"],
    ["dns-mapped.latch.test", "ipv6_embedding"],
    ["dns-missing.latch.test", "dns_no_address"],
  ])("refuses %s by its DNS answer (%s)", async (host, code) => {
    const { response, sent } = await execute(SECRET, { host, allowedHosts: [host] });
    expect(response.error?.code).toBe(code);
    expect(sent).toHaveLength(0);
    expect(h.proxy.metrics.render()).toContain(`latch_egress_denials_total{reason="${code}"}`);
  });

  it("connects to the address it checked, so a rebinding answer is never dialled", async () => {
    const host = "dns-rebind.latch.test";
    const { response, sent } = await execute(SECRET, { host, allowedHosts: [host] });
    expect(response.originStatus).toBe(200);
    expect(sent).toHaveLength(1);
    expect(h.dns.queries.filter((q) => q.name === host && q.type === "A")).toHaveLength(1);
    // The second resolution now answers 10.0.0.1: the next call is refused, not dialled.
    const again = await execute(SECRET, { host, allowedHosts: [host] });
    expect(again.response.error?.code).toBe("private_range");
  });

  it("resolves through the configured DNS server for a public answer", async () => {
    const host = "dns-public.latch.test";
    const { response } = await execute(SECRET, { host, allowedHosts: [host] });
    expect(response.originStatus).toBe(200);
  });
});

describe("tickets", () => {
  async function linkError(promise: Promise<unknown>): Promise<string> {
    try {
      await promise;
      return "accepted";
    } catch (error) {
      return error instanceof AppError ? error.code : String(error);
    }
  }

  it("refuses a replayed ticket and sends nothing the second time", async () => {
    const ticket = h.minter.mintCallTicket(await h.callSpec(SECRET));
    const before = h.origin.requests.length;
    await h.client.execute(ticket, 10_000);
    expect(await linkError(h.client.execute(ticket, 10_000))).toBe("ticket_replayed");
    expect(h.origin.requests.length - before).toBe(1);
  });

  it("refuses an expired ticket", async () => {
    const old = createTicketMinter({
      key: h.ticketKey,
      issuer: "t",
      audience: "latch-egress",
      now: () => Date.now() - 60_000,
    });
    expect(
      await linkError(
        h.client.execute(old.mintCallTicket(await h.callSpec(SECRET), { ttlMs: 10_000 }), 10_000),
      ),
    ).toBe("ticket_expired");
  });

  it("refuses a ticket with a flipped signature bit", async () => {
    const ticket = h.minter.mintCallTicket(await h.callSpec(SECRET));
    const signature = Buffer.from(ticket.signature);
    signature[0] = (signature[0] ?? 0) ^ 1;
    expect(await linkError(h.client.execute({ ...ticket, signature }, 10_000))).toBe("ticket_signature");
  });

  it("refuses a ticket for another audience", async () => {
    const other = createTicketMinter({ key: h.ticketKey, issuer: "t", audience: "latch-egress-eu" });
    expect(await linkError(h.client.execute(other.mintCallTicket(await h.callSpec(SECRET)), 10_000))).toBe(
      "ticket_audience",
    );
  });
});

describe("logs", () => {
  it("never carry the secret", () => {
    expect(h.logs.lines.length).toBeGreaterThan(0);
    expect(h.logs.text()).not.toContain("sk_test_Zq9");
  });
});
