// A DNS-over-HTTPS JSON API for the single sign-on domain check (sso/domain-records.ts), on a
// loopback TLS origin with the test PKI's *.latch.test certificate, named https://dns.latch.test
// (the egress proxy reaches it through EGRESS_CONNECT_TO). It answers `GET /resolve?name=&type=TXT`
// as Google's API does: Status 0 with the TXT records published at the name, each a quoted string
// (a long one cut in pieces of 255), Status 3 for a name with none, Status 2 (SERVFAIL) for a name
// the test broke. Records the names asked for.
import { readFileSync } from "node:fs";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";

export const DOH_HOST = "dns.latch.test";
export const DOH_URL = `https://${DOH_HOST}/resolve`;
const PKI = new URL("../../egress-proxy/test/pki/", import.meta.url);
const pki = (file: string) => readFileSync(new URL(file, PKI), "utf8");

export interface TestDoh {
  /** `host:443:127.0.0.1:port`, for EGRESS_CONNECT_TO. */
  connectTo: string;
  port: number;
  /** The names asked for, in order. */
  asked: string[];
  /** Adds a TXT record (its text) at `name`. */
  publish(name: string, text: string): void;
  /** Takes every TXT record at `name` away (the name then does not exist: Status 3). */
  withdraw(name: string): void;
  /** Answers questions about `name` with SERVFAIL (Status 2) until told otherwise. */
  breakName(name: string, isBroken: boolean): void;
  close(): Promise<void>;
}

/** A TXT text as the JSON API writes it: quoted strings of at most 255 bytes. */
function quoted(text: string): string {
  const pieces = text.match(/[\s\S]{1,255}/g) ?? [""];
  return pieces.map((piece) => `"${piece.replace(/(["\\])/g, "\\$1")}"`).join(" ");
}

export async function startTestDoh(): Promise<TestDoh> {
  const records = new Map<string, string[]>();
  const asked: string[] = [];
  const broken = new Set<string>();
  const server = createServer(
    { cert: pki("trusted-leaf.pem"), key: pki("trusted-leaf-key.pem") },
    (req, res) => {
      const url = new URL(req.url ?? "/", DOH_URL);
      const name = (url.searchParams.get("name") ?? "").toLowerCase().replace(/\.$/, "");
      if (req.method !== "GET" || url.pathname !== "/resolve" || url.searchParams.get("type") !== "TXT") {
        res.writeHead(400, { "content-type": "application/json" }).end('{"Status":1}');
        return;
      }
      asked.push(name);
      if (broken.has(name)) {
        res.writeHead(200, { "content-type": "application/x-javascript; charset=UTF-8" }).end('{"Status":2}');
        return;
      }
      const texts = records.get(name) ?? [];
      const answer = texts.length
        ? {
            Status: 0,
            Answer: texts.map((text) => ({ name: `${name}.`, type: 16, TTL: 300, data: quoted(text) })),
          }
        : { Status: 3 };
      res
        .writeHead(200, { "content-type": "application/x-javascript; charset=UTF-8" })
        .end(JSON.stringify(answer));
    },
  );
  server.on("tlsClientError", () => {});
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    connectTo: `${DOH_HOST}:443:127.0.0.1:${port}`,
    port,
    asked,
    publish(name, text) {
      const key = name.toLowerCase();
      records.set(key, [...(records.get(key) ?? []), text]);
    },
    withdraw(name) {
      records.delete(name.toLowerCase());
    },
    breakName(name, isBroken) {
      if (isBroken) broken.add(name.toLowerCase());
      else broken.delete(name.toLowerCase());
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
