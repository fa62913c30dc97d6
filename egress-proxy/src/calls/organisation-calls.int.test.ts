// The cap on one organisation's calls in flight in a proxy replica, through the real proxy (gRPC on
// loopback, ticket checks, destination and upstream paths, real TLS origin) and the control plane's
// own egress client: past the cap a call is refused before its ticket is spent, as not started
// (egress_unavailable after one retry, the replica kept in the rotation), nothing reaches the origin,
// and another organisation is still served.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CallSpec } from "@latch/proto/egress";
import { sealValue } from "@latch/shared/crypto/seal";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { createEgressClient } from "../../../control-plane/src/egress/egress-client.ts";
import { loadOrCreateTicketKey } from "../../../control-plane/src/egress/ticket-key.ts";
import { createTicketMinter } from "../../../control-plane/src/egress/tickets.ts";
import { readTestCas, startOrigin } from "../../test/origin.ts";
import { loadEgressConfig } from "../config.ts";
import { startEgressProxy } from "../egress-proxy.ts";

const HOST = "api.latch.test";
const CAP = 2;

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setup() {
  let release = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const origin = await startOrigin((req, res) => {
    if (req.url === "/slow") void released.then(() => res.end("late"));
    else res.end("prompt");
  });
  cleanups.push(() => origin.close());
  const dataDir = mkdtempSync(join(tmpdir(), "latch-org-cap-"));
  const extraCa = join(dataDir, "test-cas.pem");
  writeFileSync(extraCa, readTestCas());
  const ticketKey = loadOrCreateTicketKey(dataDir);
  const config = loadEgressConfig({
    NODE_ENV: "test",
    DATA_DIR: dataDir,
    EGRESS_LISTEN: "127.0.0.1:0",
    EGRESS_CONNECT_TO: `${HOST}:443:127.0.0.1:${origin.port}`,
    EGRESS_ALLOW_CIDRS: "127.0.0.1/32",
    EGRESS_EXTRA_CA: extraCa,
  });
  const proxy = await startEgressProxy(config, pino({ level: "silent" }), { maxCallsPerOrganisation: CAP });
  cleanups.push(() => proxy.close());
  const client = createEgressClient({ address: `127.0.0.1:${proxy.port}` });
  cleanups.push(() => client.close());
  const minter = createTicketMinter({ key: ticketKey, issuer: "test", audience: config.EGRESS_AUDIENCE });
  const sealed = await sealValue(proxy.sealingKey, "sk_org_cap_canary");
  const callTo = (path: string): CallSpec => ({
    credential: {
      itemName: "TEST_KEY",
      keyId: sealed.keyId,
      sealedValue: Buffer.from(sealed.sealed),
      username: "",
    },
    inject: "bearer",
    host: HOST,
    allowedHosts: [HOST],
    method: "GET",
    path,
    body: Buffer.alloc(0),
    contentType: "",
    timeoutMs: 20_000,
    headers: [],
    redact: [],
    exchange: undefined,
  });
  const ticketOf = (organisationId: string, path: string) =>
    minter.mintCallTicket(callTo(path), { organisationId, ttlMs: 60_000 });
  return { origin, proxy, client, minter, release, ticketOf };
}

describe("the cap on one organisation's calls in flight", () => {
  it("refuses the organisation's next call unspent and unsent, and serves another organisation", async () => {
    const { origin, proxy, client, minter, release, ticketOf } = await setup();

    // Organisation A: as many calls in flight as a replica takes from it.
    const held = Array.from({ length: CAP }, () => client.execute(ticketOf("org_a", "/slow"), 20_000));
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(origin.requests.filter((r) => r.url === "/slow")).toHaveLength(CAP);

    // Its next call is refused at once, as a call not started: the client tried once more and
    // then answers egress_unavailable; the origin never heard of it.
    const over = ticketOf("org_a", "/slow");
    const started = performance.now();
    await expect(client.execute(over, 20_000)).rejects.toMatchObject({ code: "egress_unavailable" });
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(origin.requests.filter((r) => r.url === "/slow")).toHaveLength(CAP);
    expect(proxy.metrics.render()).toMatch(/organisation_calls_in_flight"?\}? 2\b/);
    // Every kind of ticket that dials counts in the one budget: A's document fetch waits too.
    await expect(
      client.fetchDocument(
        minter.mintDocumentTicket(
          { host: HOST, path: "/doc", timeoutMs: 5_000, maxBytes: 0 },
          { organisationId: "org_a" },
        ),
        5_000,
      ),
    ).rejects.toMatchObject({ code: "egress_unavailable" });
    // The replica stays in the rotation: one tenant's burst is not a drain.
    expect(client.replicaStates()).toEqual(["serving"]);

    // Organisation B, and tickets of no organisation, are served at once.
    for (const organisationId of ["org_b", ""]) {
      const answer = await client.execute(ticketOf(organisationId, "/v1/things"), 5_000);
      expect(answer.error).toBeUndefined();
      expect(Buffer.from(answer.body).toString()).toBe("prompt");
    }

    release();
    for (const answer of await Promise.all(held)) expect(Buffer.from(answer.body).toString()).toBe("late");
    // The refused ticket was never spent: once A's calls ended, the very same ticket runs.
    const retried = await client.execute(over, 20_000);
    expect(retried.error).toBeUndefined();
    expect(Buffer.from(retried.body).toString()).toBe("late");
  });
});
