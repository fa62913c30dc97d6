// Organisations never share upstream connections (Ticket.organisation_id): one organisation's agent
// holding every connection it may open to an origin (calls the origin answers late) must not make
// another organisation's call to that origin queue until its deadline. Through the real ticket
// checks, destination and upstream paths, over real TLS on loopback.
import { generateKeyPairSync } from "node:crypto";
import type { CallSpec } from "@latch/proto/egress";
import { deriveTicketKeyId, rawEd25519PublicKey } from "@latch/shared/tickets/ticket-signature";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { createTicketMinter } from "../../../control-plane/src/egress/tickets.ts";
import { type RunningOrigin, readTestCa, startOrigin } from "../../test/origin.ts";
import { parseCidrList } from "../destination/classify.ts";
import { parseConnectTo } from "../destination/connect-to.ts";
import { createDestinationResolver } from "../destination/resolve.ts";
import { createMetrics } from "../metrics/metrics.ts";
import { createMemoryReplayStore } from "../tickets/replay-store.ts";
import { createTicketChecker, createTicketSpender } from "../tickets/verify.ts";
import { createUpstream } from "../upstream/call.ts";
import { createExecute, type ExecuteDeps } from "./execute.ts";

const HOST = "api.latch.test";
/** The connections one organisation may open to one origin (upstream/pool.ts). */
const CONNECTIONS_PER_ORIGIN = 16;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

function callTo(path: string, timeoutMs: number): CallSpec {
  return {
    credential: { itemName: "API_KEY", keyId: "k1", sealedValue: Buffer.from([1]), username: "" },
    inject: "bearer",
    host: HOST,
    allowedHosts: [HOST],
    method: "GET",
    path,
    body: Buffer.alloc(0),
    contentType: "",
    timeoutMs,
    headers: [],
    redact: [],
    exchange: undefined,
  };
}

async function setup(origin: RunningOrigin) {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  const publicKeyRaw = rawEd25519PublicKey(publicKey);
  const keyId = deriveTicketKeyId(publicKeyRaw);
  const minter = createTicketMinter({
    key: { keyId, privateKey, publicKeyRaw },
    issuer: "test",
    audience: "latch-egress",
  });
  const upstream = createUpstream({ extraCa: readTestCa() });
  cleanups.push(() => upstream.close());
  const deps = {
    checkTicket: createTicketChecker({
      trustedKeys: new Map([[keyId, publicKey]]),
      audience: "latch-egress",
    }),
    spendTicket: createTicketSpender({ replayStore: createMemoryReplayStore() }),
    // The sealing keyring is not what this test is about: every credential opens to one value.
    keyring: {
      current: { keyId: "k1", publicKey: new Uint8Array() },
      open: () => "sk_organisations_canary",
    },
    resolver: createDestinationResolver({
      connectTo: parseConnectTo(`${HOST}:443:127.0.0.1:${origin.port}`),
      allowCidrs: parseCidrList("127.0.0.1/32"),
    }),
    upstream,
    metrics: createMetrics(),
    logger: pino({ level: "silent" }),
  } as unknown as ExecuteDeps;
  const execute = createExecute(deps);
  return (organisationId: string, path: string, timeoutMs: number) =>
    execute(minter.mintCallTicket(callTo(path, timeoutMs), { organisationId, ttlMs: timeoutMs + 5_000 }));
}

describe("Execute with organisations calling one origin", () => {
  it("answers another organisation's call promptly while one holds all its connections", async () => {
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const origin = await startOrigin((req, res) => {
      if (req.url === "/slow") void released.then(() => res.end("late"));
      else res.end("prompt");
    });
    cleanups.push(() => origin.close());
    const execute = await setup(origin);

    // Organisation A: every connection it may open held by the origin, and more calls queued.
    const held = Array.from({ length: CONNECTIONS_PER_ORIGIN + 4 }, () => execute("org_a", "/slow", 20_000));
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(origin.requests.filter((r) => r.url === "/slow")).toHaveLength(CONNECTIONS_PER_ORIGIN);

    // Organisation B's call is sent at once on a connection of its own.
    const started = performance.now();
    const answer = await execute("org_b", "/v1/things", 2_000);
    const elapsed = performance.now() - started;
    expect(answer.error).toBeUndefined();
    expect(Buffer.from(answer.body).toString()).toBe("prompt");
    expect(elapsed).toBeLessThan(1_000);
    expect(origin.connections).toBe(CONNECTIONS_PER_ORIGIN + 1);

    // A ticket of no organisation (from a control plane before the field) has its own pool too.
    expect(Buffer.from((await execute("", "/v1/things", 2_000)).body).toString()).toBe("prompt");

    release();
    for (const response of await Promise.all(held)) {
      expect(Buffer.from(response.body).toString()).toBe("late");
    }
    // Organisation A never had more than its own bound of connections.
    expect(origin.connections).toBe(CONNECTIONS_PER_ORIGIN + 2);
  });
});
