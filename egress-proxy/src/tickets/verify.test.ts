import { generateKeyPairSync } from "node:crypto";
import { Ticket } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import { deriveTicketKeyId, rawEd25519PublicKey } from "@latch/shared/tickets/ticket-signature";
import { describe, expect, it } from "vitest";
import { createTicketMinter } from "../../../control-plane/src/egress/tickets.ts";
import { createMemoryReplayStore, type ReplayStore } from "./replay-store.ts";
import { createTicketChecker, createTicketSpender, createTicketVerifier } from "./verify.ts";

function newKey() {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  const publicKeyRaw = rawEd25519PublicKey(publicKey);
  return { keyId: deriveTicketKeyId(publicKeyRaw), privateKey, publicKeyRaw, publicKey };
}

const call = {
  credential: { itemName: "API_KEY", keyId: "sk_x", sealedValue: Buffer.from("sealed"), username: "" },
  inject: "bearer",
  host: "api.latch.test",
  allowedHosts: ["api.latch.test"],
  method: "GET",
  path: "/v1/ping",
  body: Buffer.alloc(0),
  contentType: "",
  timeoutMs: 10_000,
  headers: [],
  redact: [],
};

function setup(options: { now?: () => number; audience?: string } = {}) {
  const key = newKey();
  let clock = 1_800_000_000_000;
  const now = options.now ?? (() => clock);
  const minter = createTicketMinter({ key, issuer: "test", audience: "latch-egress", now });
  const verify = createTicketVerifier({
    trustedKeys: new Map([[key.keyId, key.publicKey]]),
    audience: options.audience ?? "latch-egress",
    replayStore: createMemoryReplayStore(now),
    now,
  });
  return { key, minter, verify, advance: (ms: number) => (clock += ms) };
}

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return "accepted";
  } catch (error) {
    return error instanceof AppError ? error.code : `unexpected: ${String(error)}`;
  }
}

describe("call ticket verification", () => {
  it("accepts a fresh ticket once and returns its call", async () => {
    const { minter, verify } = setup();
    const ticket = await verify(minter.mintCallTicket(call));
    expect(ticket.call?.host).toBe("api.latch.test");
    expect(ticket.call?.path).toBe("/v1/ping");
  });

  it("refuses a replayed ticket", async () => {
    const { minter, verify } = setup();
    const signed = minter.mintCallTicket(call);
    await verify(signed);
    expect(await codeOf(verify(signed))).toBe("ticket_replayed");
  });

  it("refuses an expired ticket", async () => {
    const { minter, verify, advance } = setup();
    const signed = minter.mintCallTicket(call, { ttlMs: 10_000 });
    advance(16_000); // past the expiry plus the 5 s skew allowance
    expect(await codeOf(verify(signed))).toBe("ticket_expired");
  });

  it("refuses a ticket signed by an unknown key", async () => {
    const { verify } = setup();
    const other = setup();
    expect(await codeOf(verify(other.minter.mintCallTicket(call)))).toBe("ticket_signature");
  });

  it("refuses a forged signature under a trusted key id", async () => {
    const { minter, verify, key } = setup();
    const forger = newKey();
    const signed = createTicketMinter({
      key: { ...forger, keyId: key.keyId },
      issuer: "x",
      audience: "latch-egress",
    }).mintCallTicket(call);
    expect(await codeOf(verify(signed))).toBe("ticket_signature");
    // and a genuine ticket is not burnt by the forgery attempt
    await expect(verify(minter.mintCallTicket(call))).resolves.toBeDefined();
  });

  it("refuses a payload changed after signing (host swapped)", async () => {
    const { minter, verify } = setup();
    const signed = minter.mintCallTicket(call);
    const ticket = Ticket.decode(signed.payload);
    const tampered = Ticket.encode({
      ...ticket,
      call: { ...call, host: "evil.example", allowedHosts: ["evil.example"] },
    }).finish();
    expect(await codeOf(verify({ ...signed, payload: Buffer.from(tampered) }))).toBe("ticket_signature");
  });

  it("refuses a ticket for another audience", async () => {
    const { minter, verify } = setup({ audience: "latch-egress-eu" });
    expect(await codeOf(verify(minter.mintCallTicket(call)))).toBe("ticket_audience");
  });

  it("refuses a ticket that claims to live longer than the maximum", async () => {
    const { minter, verify } = setup();
    expect(await codeOf(verify(minter.mintCallTicket(call, { ttlMs: 60 * 60 * 1000 })))).toBe(
      "ticket_invalid",
    );
  });

  it("refuses a missing or empty ticket", async () => {
    const { verify } = setup();
    expect(await codeOf(verify(undefined))).toBe("ticket_invalid");
    expect(await codeOf(verify({ payload: Buffer.alloc(0), signature: Buffer.alloc(0), keyId: "" }))).toBe(
      "ticket_invalid",
    );
  });

  it.each([
    ["empty", 0],
    ["truncated", 63],
    ["overlong", 65],
  ])("refuses an %s signature and does not burn the ticket", async (_name, length) => {
    const { minter, verify } = setup();
    const signed = minter.mintCallTicket(call);
    const signature = Buffer.alloc(length);
    Buffer.from(signed.signature).copy(signature);
    expect(await codeOf(verify({ ...signed, signature }))).toBe("ticket_signature");
    await expect(verify(signed)).resolves.toBeDefined();
  });

  it("accepts a ticket presented several times at once exactly once", async () => {
    const { minter, verify } = setup();
    const signed = minter.mintCallTicket(call);
    const codes = await Promise.all(Array.from({ length: 8 }, () => codeOf(verify(signed))));
    expect(codes.filter((code) => code === "accepted")).toHaveLength(1);
    expect(codes.filter((code) => code === "ticket_replayed")).toHaveLength(7);
  });

  it("refuses a ticket whose spend waited on a stalled store past its expiry: spent, never sent late", async () => {
    const key = newKey();
    let clock = 1_800_000_000_000;
    const now = () => clock;
    const minter = createTicketMinter({ key, issuer: "test", audience: "latch-egress", now });
    // The shared store stalls: the insert lands, but answers 7 s later, past expiry plus skew.
    const memory = createMemoryReplayStore(now);
    const stalled: ReplayStore = {
      ...memory,
      async spend(id, expiresAtMs) {
        const isSpent = await memory.spend(id, expiresAtMs);
        clock += 7_000;
        return isSpent;
      },
    };
    const verify = createTicketVerifier({
      trustedKeys: new Map([[key.keyId, key.publicKey]]),
      audience: "latch-egress",
      replayStore: stalled,
      now,
    });
    const signed = minter.mintCallTicket(call, { ttlMs: 1_000 });
    expect(await codeOf(verify(signed))).toBe("ticket_expired");
    // Spent: a replica handed it again refuses it before its spend.
    expect(await memory.spend(Ticket.decode(signed.payload).id, clock)).toBe(false);
    // A fresh ticket through the same stalled store is refused the same way, never accepted late.
    expect(await codeOf(verify(minter.mintCallTicket(call, { ttlMs: 1_000 })))).toBe("ticket_expired");
  });

  it("keeps a spend that answered in time", async () => {
    const { minter, verify } = setup();
    const signed = minter.mintCallTicket(call);
    await verify(signed);
    expect(await codeOf(verify(signed))).toBe("ticket_replayed");
  });

  it("after a restart on a memory store, refuses a ticket the previous process spent, and takes new ones", async () => {
    const key = newKey();
    let clock = 1_800_000_000_000;
    const now = () => clock;
    const minter = createTicketMinter({ key, issuer: "test", audience: "latch-egress", now });
    const trustedKeys = new Map([[key.keyId, key.publicKey]]);
    const processOn = (replayStore: ReplayStore) => {
      const check = createTicketChecker({ trustedKeys, audience: "latch-egress", replayStore, now });
      const spend = createTicketSpender({ replayStore, now });
      return async (signed: ReturnType<typeof minter.mintCallTicket>) => spend(await check(signed));
    };
    const first = processOn(createMemoryReplayStore(now));
    const spent = minter.mintCallTicket(call, { ttlMs: 30_000 });
    expect(await codeOf(first(spent))).toBe("accepted");
    // Two seconds later the process runs again, its memory empty.
    clock += 2_000;
    const restartedStore = createMemoryReplayStore(now);
    const restarted = processOn(restartedStore);
    // Its own code, not a replay's: the control plane knows it sent the ticket to no other process.
    expect(await codeOf(restarted(spent))).toBe("ticket_predates_proxy");
    await expect(restarted(spent)).rejects.toMatchObject({ extra: { callNotStarted: true } });
    // Nothing was spent on the way: the refusal is the check's.
    expect(await restartedStore.spend(Ticket.decode(spent.payload).id, clock + 30_000)).toBe(true);
    // A ticket issued once the process started is taken once; one of the same millisecond too.
    expect(await codeOf(restarted(minter.mintCallTicket(call)))).toBe("accepted");
    clock += 1;
    const fresh = minter.mintCallTicket(call);
    expect(await codeOf(restarted(fresh))).toBe("accepted");
    expect(await codeOf(restarted(fresh))).toBe("ticket_replayed");
    // The fence's own check lets the old ticket through: it answers UNKNOWN for it itself.
    const check = createTicketChecker({
      trustedKeys,
      audience: "latch-egress",
      replayStore: restartedStore,
      now,
    });
    expect((await check(spent, { isFence: true })).id).toBe(Ticket.decode(spent.payload).id);
    // The shared table knows every spend: nothing is refused for when its process started.
    const issuedBefore = minter.mintCallTicket(call);
    clock += 1_000;
    const shared: ReplayStore = { ...createMemoryReplayStore(now), kind: "shared", knowsSpendsSinceMs: 0 };
    expect(await codeOf(processOn(shared)(issuedBefore))).toBe("accepted");
  });
});
