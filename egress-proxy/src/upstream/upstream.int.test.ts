import { createServer, type Socket } from "node:net";
import { getCACertificates, setDefaultCACertificates } from "node:tls";
import { gzipSync } from "node:zlib";
import { AppError } from "@latch/shared/errors";
import { EnvHttpProxyAgent, getGlobalDispatcher, setGlobalDispatcher } from "undici";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  brotliBomb,
  gzipBomb,
  neverAnswer,
  type OriginHandler,
  type RunningOrigin,
  readTestCa,
  slowDrip,
  startOrigin,
  startRawTlsOrigin,
} from "../../test/origin.ts";
import { parseCidrList } from "../destination/classify.ts";
import { parseConnectTo } from "../destination/connect-to.ts";
import { createDestinationResolver, type Destination } from "../destination/resolve.ts";
import { createUpstream, type Upstream, type UpstreamRequest } from "./call.ts";
import { MAX_BODY_BYTES } from "./decode.ts";

const HOST = "api.latch.test";
const MiB = 1024 * 1024;

let upstream: Upstream;
const origins: RunningOrigin[] = [];

beforeEach(() => {
  upstream = createUpstream({ extraCa: readTestCa() });
});

afterEach(async () => {
  await upstream.close();
  await Promise.all(origins.splice(0).map((o) => o.close()));
});

async function origin(handler: OriginHandler, cert?: "trusted" | "untrusted"): Promise<RunningOrigin> {
  const started = await startOrigin(handler, { cert });
  origins.push(started);
  return started;
}

/** Through the real destination path: a connect-to rule to the origin's port, loopback allowed. */
function destinationFor(port: number, host = HOST): Promise<Destination> {
  const resolver = createDestinationResolver({
    connectTo: parseConnectTo(`${host}:443:127.0.0.1:${port}`),
    allowCidrs: parseCidrList("127.0.0.1/32"),
  });
  return resolver.resolve(host);
}

async function get(port: number, extra: Partial<UpstreamRequest> = {}) {
  return upstream.call({
    destination: await destinationFor(port),
    method: "GET",
    path: "/v1/things",
    headers: [],
    timeoutMs: 5_000,
    ...extra,
  });
}

async function failure(promise: Promise<unknown>): Promise<AppError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    return error as AppError;
  }
  throw new Error("expected the call to fail");
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("upstream call over real TLS", () => {
  it("sends the request as given to the pinned address with SNI and Host on the name", async () => {
    let servername: string | false | undefined;
    const o = await origin((req, res) => {
      servername = (req.socket as { servername?: string | false }).servername;
      res.writeHead(201, {
        "content-type": "application/json",
        "set-cookie": "session=abc",
        location: "https://elsewhere.example/",
        "x-secret": "hush",
        "x-ratelimit-remaining": "41",
        "x-request-id": "req_1",
      });
      res.end('{"ok":true}');
    });
    const response = await upstream.call({
      destination: await destinationFor(o.port),
      method: "POST",
      path: "/v1/things?limit=5",
      headers: [
        { name: "authorization", value: "Bearer token-123" },
        { name: "x-custom", value: "one" },
        // Owned by the upstream module: the caller's copies must not reach the origin.
        { name: "Host", value: "evil.example" },
        { name: "accept-encoding", value: "identity" },
        { name: "content-length", value: "999" },
      ],
      body: new TextEncoder().encode('{"name":"a"}'),
      contentType: "application/json",
      timeoutMs: 5_000,
    });

    expect(response.status).toBe(201);
    expect(response.body.toString()).toBe('{"ok":true}');
    expect(response.headers).toEqual([
      { name: "content-type", value: "application/json" },
      { name: "x-ratelimit-remaining", value: "41" },
      { name: "x-request-id", value: "req_1" },
    ]);
    expect(o.requests).toHaveLength(1);
    const seen = o.requests[0]!;
    expect(seen.method).toBe("POST");
    expect(seen.url).toBe("/v1/things?limit=5");
    expect(seen.headers.host).toBe(HOST);
    expect(seen.headers.authorization).toBe("Bearer token-123");
    expect(seen.headers["x-custom"]).toBe("one");
    expect(seen.headers["accept-encoding"]).toBe("gzip, deflate, br");
    expect(seen.headers["content-type"]).toBe("application/json");
    expect(seen.headers["content-length"]).toBe("12");
    expect(seen.body.toString()).toBe('{"name":"a"}');
    expect(servername).toBe(HOST);
  });

  it("announces an empty POST body with content-length 0", async () => {
    const o = await origin((_req, res) => res.end("done"));
    await get(o.port, { method: "POST" });
    expect(o.requests[0]?.headers["content-length"]).toBe("0");
    expect(o.requests[0]?.headers["content-type"]).toBeUndefined();
  });

  it.each([204, 304])("returns an empty body for %i", async (status) => {
    const o = await origin((_req, res) => {
      res.writeHead(status, { "x-request-id": "r" });
      res.end();
    });
    const response = await get(o.port);
    expect(response.status).toBe(status);
    expect(response.body.length).toBe(0);
    expect(response.headers).toEqual([{ name: "x-request-id", value: "r" }]);
  });

  it("returns a redirect without following it or exposing Location", async () => {
    const o = await origin((req, res) => {
      if (req.url === "/v1/things") {
        res.writeHead(302, { location: "/v1/elsewhere", "content-type": "text/plain" });
        res.end("moved");
      } else {
        res.end("followed");
      }
    });
    const response = await get(o.port);
    expect(response.status).toBe(302);
    expect(response.headers).toEqual([{ name: "content-type", value: "text/plain" }]);
    expect(response.body.toString()).toBe("moved");
    expect(o.requests).toHaveLength(1);
  });

  it("decodes a gzip body under the cap", async () => {
    const payload = JSON.stringify({ items: Array.from({ length: 2000 }, (_, i) => ({ i })) });
    const o = await origin((_req, res) => {
      res.writeHead(200, { "content-type": "application/json", "content-encoding": "gzip" });
      res.end(gzipSync(payload));
    });
    const response = await get(o.port);
    expect(response.body.toString()).toBe(payload);
  });

  it("accepts a plain body of exactly 1 MiB", async () => {
    const o = await origin((_req, res) => res.end(Buffer.alloc(MAX_BODY_BYTES, 0x61)));
    expect((await get(o.port)).body.length).toBe(MAX_BODY_BYTES);
  });
});

describe("deadline", () => {
  it("fails with timeout when the origin never answers", async () => {
    const o = await origin(neverAnswer());
    const started = performance.now();
    const error = await failure(get(o.port, { timeoutMs: 1_000 }));
    const elapsed = performance.now() - started;
    expect(error.code).toBe("timeout");
    // The request went out and the origin may have acted on it: a one-time approval is spent.
    expect(error.extra.reachedOrigin).toBe(true);
    expect(elapsed).toBeGreaterThanOrEqual(900);
    expect(elapsed).toBeLessThan(3_000);
  });

  it("cuts a slow-drip body at the total deadline, not at an idle timer", async () => {
    // One byte every 100 ms for 20 s: a per-chunk idle timer would never fire.
    const o = await origin(slowDrip(100, 20_000));
    const started = performance.now();
    const error = await failure(get(o.port, { timeoutMs: 1_000 }));
    const elapsed = performance.now() - started;
    expect(error.code).toBe("timeout");
    expect(error.extra.reachedOrigin).toBe(true);
    expect(elapsed).toBeLessThan(3_000);
  });
});

/**
 * A TCP listener that accepts and never answers the TLS ClientHello: the dial hangs in TLS. It
 * records each accepted socket and when the client side let it go.
 */
async function startSilentListener(): Promise<{ port: number; accepted: Socket[]; closed: number[] }> {
  const accepted: Socket[] = [];
  const closed: number[] = [];
  const server = createServer((socket) => {
    accepted.push(socket);
    // Read (and drop) what arrives, so that the client letting go is seen as a close.
    socket.resume();
    socket.on("error", () => {});
    socket.on("close", () => closed.push(performance.now()));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  origins.push({
    port: 0,
    url: "",
    requests: [],
    connections: 0,
    close: async () => {
      for (const socket of accepted) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
  return { port: (server.address() as { port: number }).port, accepted, closed };
}

describe("deadline before anything was sent", () => {
  it("ends a call whose TLS handshake hangs at its deadline, as not sent, and lets the dial go", async () => {
    const silent = await startSilentListener();
    const started = performance.now();
    const error = await failure(get(silent.port, { method: "POST", timeoutMs: 1_000 }));
    const elapsed = performance.now() - started;
    expect(error.code).toBe("timeout");
    // Nothing of the request left: the control plane gives a one-time approval back.
    expect(error.extra.reachedOrigin).toBe(false);
    expect(elapsed).toBeGreaterThanOrEqual(900);
    expect(elapsed).toBeLessThan(2_000);
    expect(silent.accepted).toHaveLength(1);
    // The half-open connection is not kept for undici's own connect timeout.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(silent.closed).toHaveLength(1);
    expect(silent.closed[0]! - started).toBeLessThan(1_500);
  });

  it("ends a call still queued behind a full pool at its deadline, as not sent, and never sends it", async () => {
    const o = await origin((req, res) => {
      if (req.url === "/slow") setTimeout(() => res.end("late"), 2_500);
      else res.end("queued answer");
    });
    // Every connection of the pool (16) busy with a slow call.
    const slow = Array.from({ length: 16 }, () => get(o.port, { path: "/slow", timeoutMs: 10_000 }));
    await new Promise((resolve) => setTimeout(resolve, 300));
    const started = performance.now();
    const error = await failure(get(o.port, { method: "POST", path: "/v1/pay", timeoutMs: 1_000 }));
    const elapsed = performance.now() - started;
    expect(error.code).toBe("timeout");
    expect(error.extra.reachedOrigin).toBe(false);
    expect(elapsed).toBeLessThan(2_000);
    for (const answer of await Promise.all(slow)) expect(answer.body.toString()).toBe("late");
    // A connection freed after the deadline must not carry the abandoned request.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(o.requests.filter((r) => r.url === "/v1/pay")).toHaveLength(0);
    // The pool still serves calls afterwards.
    expect((await get(o.port)).body.toString()).toBe("queued answer");
  });
});

describe("a call that gave up in the queue", () => {
  it("costs its organisation no connection when its turn comes, and is never sent", async () => {
    const o = await origin((req, res) => {
      if (req.url === "/slow") setTimeout(() => res.end("late"), 1_500);
      else res.end("ok");
    });
    const org = { organisationId: "org-queue" };
    // Every connection of the organisation's pool (16) busy with a slow call, then one call that
    // gives up while it waits for one of them.
    const slow = Array.from({ length: 16 }, () => get(o.port, { ...org, path: "/slow", timeoutMs: 10_000 }));
    await new Promise((resolve) => setTimeout(resolve, 300));
    const error = await failure(get(o.port, { ...org, method: "POST", path: "/v1/pay", timeoutMs: 300 }));
    expect(error.code).toBe("timeout");
    expect(error.extra.reachedOrigin).toBe(false);
    for (const answer of await Promise.all(slow)) expect(answer.body.toString()).toBe("late");
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(o.connections).toBe(16);
    // The 16 keep-alive connections are all still there: 16 calls at once reuse them. Had the
    // abandoned call's turn destroyed the connection it came to, one of these would dial again.
    const again = await Promise.all(Array.from({ length: 16 }, () => get(o.port, org)));
    for (const answer of again) expect(answer.body.toString()).toBe("ok");
    expect(o.connections).toBe(16);
    expect(o.requests.filter((r) => r.url === "/v1/pay")).toHaveLength(0);
  });
});

describe("size limits", () => {
  it("refuses a declared plain body of 1 MiB + 1", async () => {
    const o = await origin((_req, res) => res.end(Buffer.alloc(MAX_BODY_BYTES + 1)));
    const error = await failure(get(o.port));
    expect(error.code).toBe("body_too_large");
    expect(error.extra.reachedOrigin).toBe(true);
  });

  it("cuts a chunked body (no content-length) once past 1 MiB", async () => {
    const o = await origin((_req, res) => {
      res.writeHead(200, { "content-type": "application/octet-stream" });
      for (let i = 0; i < 4; i++) res.write(Buffer.alloc(MiB / 2));
      res.end();
    });
    const error = await failure(get(o.port));
    expect(error.code).toBe("body_too_large");
  });

  it.each([
    ["gzip", gzipBomb(10 * MiB)],
    ["brotli", brotliBomb(10 * MiB)],
  ])("cuts a %s bomb with body_too_large", async (_name, handler) => {
    const o = await origin(handler);
    const error = await failure(get(o.port));
    expect(error.code).toBe("body_too_large");
    expect(error.extra.reachedOrigin).toBe(true);
  });

  it("refuses an unknown content-encoding", async () => {
    const o = await origin((_req, res) => {
      res.writeHead(200, { "content-encoding": "zstd" });
      res.end("whatever");
    });
    const error = await failure(get(o.port));
    expect(error.code).toBe("bad_origin_response");
    expect(error.extra.reachedOrigin).toBe(true);
  });

  it("fails an oversized response header block safely, without echoing it", async () => {
    const o = await origin((_req, res) => {
      res.writeHead(200, { "x-huge": `SECRET-${"a".repeat(40 * 1024)}` });
      res.end("ok");
    });
    const error = await failure(get(o.port));
    expect(error.code).toBe("bad_origin_response");
    expect(error.message).not.toContain("SECRET");
    expect(String((error.cause as Error | undefined)?.message)).not.toContain("SECRET");
  });
});

describe("failure mapping", () => {
  it("maps an untrusted certificate to tls_failure and sends nothing", async () => {
    const o = await origin((_req, res) => res.end("should not be reached"), "untrusted");
    const error = await failure(get(o.port));
    expect(error.code).toBe("tls_failure");
    expect(error.extra.reachedOrigin).toBe(false);
    expect(o.requests).toHaveLength(0);
  });

  /** What `through` answers a call with a bearer to the origin on `port`: its error's code. */
  async function refusalOf(through: Upstream, port: number, host?: string): Promise<string> {
    const error = await failure(
      through.call({
        destination: await destinationFor(port, host),
        method: "GET",
        path: "/",
        headers: [{ name: "authorization", value: "Bearer SECRET" }],
        timeoutMs: 5_000,
      }),
    );
    return error.code;
  }

  it("refuses an untrusted certificate even with NODE_TLS_REJECT_UNAUTHORIZED=0 set", async () => {
    const o = await origin((_req, res) => res.end("should not be reached"), "untrusted");
    const plain = createUpstream({});
    const before = process.env.NODE_TLS_REJECT_UNAUTHORIZED;
    process.env.NODE_TLS_REJECT_UNAUTHORIZED = "0";
    try {
      // With extra CAs and without: the bundled roots either way, checked whatever the variable says.
      for (const through of [upstream, plain]) expect(await refusalOf(through, o.port)).toBe("tls_failure");
    } finally {
      if (before === undefined) delete process.env.NODE_TLS_REJECT_UNAUTHORIZED;
      else process.env.NODE_TLS_REJECT_UNAUTHORIZED = before;
      await plain.close();
    }
    expect(o.requests).toHaveLength(0);
  });

  it("trusts the test CA only through extraCa", async () => {
    const o = await origin((_req, res) => res.end("should not be reached"));
    const plain = createUpstream({});
    try {
      expect(await refusalOf(plain, o.port)).toBe("tls_failure");
    } finally {
      await plain.close();
    }
    expect(o.requests).toHaveLength(0);
  });

  it("trusts Node's bundled roots only: a CA put into Node's default store from outside is not trusted", async () => {
    const o = await origin((_req, res) => res.end("should not be reached"));
    // What NODE_EXTRA_CA_CERTS, NODE_USE_SYSTEM_CA or SSL_CERT_FILE do at start, done here at once.
    const before = getCACertificates("default");
    setDefaultCACertificates([...before, readTestCa()]);
    const plain = createUpstream({});
    try {
      expect(await refusalOf(plain, o.port)).toBe("tls_failure");
    } finally {
      setDefaultCACertificates(before);
      await plain.close();
    }
    expect(o.requests).toHaveLength(0);
  });

  it("checks the certificate against the host name, not the dialled address", async () => {
    const o = await origin((_req, res) => res.end("should not be reached"));
    const error = await failure(
      upstream.call({
        destination: await destinationFor(o.port, "api.other.test"),
        method: "GET",
        path: "/",
        headers: [],
        timeoutMs: 5_000,
      }),
    );
    expect(error.code).toBe("tls_failure");
    expect(o.requests).toHaveLength(0);
  });

  it("maps nothing listening to connect_failed", async () => {
    const error = await failure(get(await freePort()));
    expect(error.code).toBe("connect_failed");
    expect(error.extra.reachedOrigin).toBe(false);
  });

  it("maps malformed HTTP to bad_origin_response without logging the bytes", async () => {
    const raw = await startRawTlsOrigin((socket) => {
      socket.end("HTTP/1.1 200 OK\r\nx-echo: SECRET-token\r\nbroken header line\r\n\r\nbody");
    });
    origins.push(raw);
    const error = await failure(get(raw.port));
    expect(error.code).toBe("bad_origin_response");
    expect(JSON.stringify({ message: error.message, cause: String(error.cause) })).not.toContain("SECRET");
  });

  it("maps a connection closed before any answer to bad_origin_response", async () => {
    const raw = await startRawTlsOrigin((socket) => socket.destroy());
    origins.push(raw);
    const error = await failure(get(raw.port));
    expect(error.code).toBe("bad_origin_response");
    expect(error.extra.reachedOrigin).toBe(true);
  });
});

describe("connection reuse and isolation", () => {
  it("makes 10 sequential calls over one TLS connection", async () => {
    const o = await origin((_req, res) => res.end("ok"));
    for (let i = 0; i < 10; i++) {
      expect((await get(o.port)).status).toBe(200);
      // undici hands a keep-alive socket back to its pool one event-loop turn after the response
      // (client-h1 onMessageComplete, setImmediate). Calls arrive over gRPC, always at least a turn
      // apart; a tight loop without this yield would see two sockets alternate.
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(o.requests).toHaveLength(10);
    expect(o.connections).toBe(1);
  });

  it("ignores HTTPS_PROXY, HTTP_PROXY and a proxying global dispatcher", async () => {
    const o = await origin((_req, res) => res.end("direct"));
    const dead = `http://127.0.0.1:${await freePort()}`;
    const saved = { ...process.env };
    const savedDispatcher = getGlobalDispatcher();
    try {
      Object.assign(process.env, {
        HTTPS_PROXY: dead,
        https_proxy: dead,
        HTTP_PROXY: dead,
        http_proxy: dead,
        NO_PROXY: "",
      });
      setGlobalDispatcher(new EnvHttpProxyAgent());
      const fresh = createUpstream({ extraCa: readTestCa() });
      try {
        const response = await fresh.call({
          destination: await destinationFor(o.port),
          method: "GET",
          path: "/",
          headers: [],
          timeoutMs: 5_000,
        });
        expect(response.body.toString()).toBe("direct");
      } finally {
        await fresh.close();
      }
    } finally {
      setGlobalDispatcher(savedDispatcher);
      for (const key of ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY"]) {
        if (saved[key] === undefined) delete process.env[key];
        else process.env[key] = saved[key];
      }
    }
    expect(o.requests).toHaveLength(1);
  });
});
