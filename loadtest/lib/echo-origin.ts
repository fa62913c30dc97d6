// The benchmark origin, run as its own process (see origin-process.ts) so that it never shares an
// event loop with the proxy under test: the test PKI's HTTPS origin (egress-proxy/test/origin.ts)
// answering GET /v1/echo with a ~1 KiB JSON body that echoes the Authorization header back, so
// the proxy's redaction has a credential to find in every answer.
import { randomBytes } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { startOrigin } from "../../egress-proxy/test/origin.ts";

/** Parent to child: "stats" asks for counters, "close" shuts the origin down. */
export type OriginCommand = "stats" | "close";

/** Child to parent. */
export type OriginMessage =
  | { type: "ready"; port: number }
  | { type: "stats"; requests: number; connections: number; cpuMs: number }
  | { type: "closed" };

/** A fixed list of records, so every answer has the same shape and about the same size. */
const ITEMS = Array.from({ length: 8 }, (_, i) => ({
  id: `item_${String(i).padStart(4, "0")}`,
  name: `Benchmark item ${i}`,
  status: i % 3 === 0 ? "archived" : "active",
  amount: 1000 + i * 17,
  currency: "EUR",
  tags: ["loadtest", "egress"],
}));

function echo(req: IncomingMessage, res: ServerResponse): void {
  if (req.method !== "GET" || req.url !== "/v1/echo") {
    res.writeHead(404, { "content-type": "application/json" }).end('{"error":"not_found"}');
    return;
  }
  const body = JSON.stringify({
    object: "echo",
    request_id: `req_${randomBytes(8).toString("hex")}`,
    method: req.method,
    path: req.url,
    authorization: req.headers.authorization ?? null,
    items: ITEMS,
  });
  res.writeHead(200, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    "cache-control": "no-store",
  });
  res.end(body);
}

async function main(): Promise<void> {
  if (!process.send) throw new Error("echo-origin.ts runs as a forked child (see origin-process.ts)");
  const send = (message: OriginMessage) => process.send?.(message);
  let requests = 0;
  const origin = await startOrigin((req, res) => {
    requests++;
    echo(req, res);
    // startOrigin records every request for the tests; a benchmark would only accumulate them.
    origin.requests.length = 0;
  });
  process.on("message", async (command: OriginCommand) => {
    if (command === "stats") {
      const cpu = process.cpuUsage();
      send({
        type: "stats",
        requests,
        connections: origin.connections,
        cpuMs: (cpu.user + cpu.system) / 1000,
      });
    }
    if (command === "close") {
      await origin.close();
      send({ type: "closed" });
      process.disconnect();
    }
  });
  // The parent going away (Ctrl-C, crash) takes the origin with it.
  process.on("disconnect", () => process.exit(0));
  send({ type: "ready", port: origin.port });
}

await main();
