// The proxy's answer to a fence (DECISIONS "Faults and isolation"): the same spend a proxy makes
// right before it sends, so that whichever came first wins; and UNKNOWN, writing nothing, whenever
// this store cannot know what happened to the ticket (its process started after the ticket was
// issued, or the spend would have been forgotten by now).
import { generateKeyPairSync } from "node:crypto";
import { FenceOutcome } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import { deriveTicketKeyId, rawEd25519PublicKey } from "@latch/shared/tickets/ticket-signature";
import { describe, expect, it } from "vitest";
import { createTicketMinter } from "../../../control-plane/src/egress/tickets.ts";
import { createTicketFencer } from "./fence.ts";
import { createMemoryReplayStore } from "./replay-store.ts";
import { createTicketChecker, createTicketSpender } from "./verify.ts";

const call = {
  credential: { itemName: "API_KEY", keyId: "sk_x", sealedValue: Buffer.from("sealed"), username: "" },
  inject: "bearer",
  host: "api.latch.test",
  allowedHosts: ["api.latch.test"],
  method: "GET",
  path: "/v1/ping",
  body: Buffer.alloc(0),
  contentType: "",
  timeoutMs: 2_000,
  headers: [],
  redact: [],
};

function setup() {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  const publicKeyRaw = rawEd25519PublicKey(publicKey);
  const key = { keyId: deriveTicketKeyId(publicKeyRaw), privateKey, publicKeyRaw };
  let clock = 1_800_000_000_000;
  const now = () => clock;
  // The process (and its memory store) started a minute before the tickets are minted.
  const replayStore = createMemoryReplayStore(now);
  clock += 60_000;
  const minter = createTicketMinter({ key, issuer: "test", audience: "latch-egress", now, ttlMs: 3_500 });
  const checkTicket = createTicketChecker({
    trustedKeys: new Map([[key.keyId, publicKey]]),
    audience: "latch-egress",
    now,
  });
  const spend = createTicketSpender({ replayStore, now });
  const fence = createTicketFencer({ checkTicket, replayStore, now });
  return { minter, spend, fence, checkTicket, advance: (ms: number) => (clock += ms), now };
}

describe("fencing a ticket at the proxy", () => {
  it("wins before the proxy claimed it, and the proxy then refuses the ticket: nothing is sent", async () => {
    const { minter, spend, fence, checkTicket } = setup();
    const signed = minter.mintCallTicket(call);
    expect(await fence(signed)).toBe(FenceOutcome.FENCE_OUTCOME_FENCED);
    const ticket = await checkTicket(signed);
    await expect(spend(ticket)).rejects.toMatchObject({ code: "ticket_replayed" });
  });

  it("loses after the proxy claimed it (the request may have gone out)", async () => {
    const { minter, spend, fence, checkTicket } = setup();
    const signed = minter.mintCallTicket(call);
    await spend(await checkTicket(signed));
    expect(await fence(signed)).toBe(FenceOutcome.FENCE_OUTCOME_TAKEN);
  });

  it("still wins after the ticket expired, while the store remembers spends that old", async () => {
    const { minter, fence, advance } = setup();
    const signed = minter.mintCallTicket(call);
    advance(3_500 + 4_000);
    expect(await fence(signed)).toBe(FenceOutcome.FENCE_OUTCOME_FENCED);
  });

  it("cannot tell past the horizon where a spend could have been swept: writes nothing", async () => {
    const { minter, fence, advance } = setup();
    const signed = minter.mintCallTicket(call);
    advance(3_500 + 5_001);
    expect(await fence(signed)).toBe(FenceOutcome.FENCE_OUTCOME_UNKNOWN);
  });

  it("cannot tell for a ticket issued before its process started (a restart emptied the memory)", async () => {
    const { privateKey, publicKey } = generateKeyPairSync("ed25519");
    const publicKeyRaw = rawEd25519PublicKey(publicKey);
    const key = { keyId: deriveTicketKeyId(publicKeyRaw), privateKey, publicKeyRaw };
    const clock = 1_800_000_000_000;
    const minter = createTicketMinter({ key, issuer: "test", audience: "latch-egress", now: () => clock });
    const signed = minter.mintCallTicket(call);
    // The proxy restarted a second after the ticket was issued.
    const replayStore = createMemoryReplayStore(() => clock + 1_000);
    const checkTicket = createTicketChecker({
      trustedKeys: new Map([[key.keyId, publicKey]]),
      audience: "latch-egress",
      now: () => clock + 2_000,
    });
    const fence = createTicketFencer({ checkTicket, replayStore, now: () => clock + 2_000 });
    expect(await fence(signed)).toBe(FenceOutcome.FENCE_OUTCOME_UNKNOWN);
    expect(await replayStore.spend("probe-id-000000000000", clock + 10_000)).toBe(true);
  });

  it("refuses a ticket that is not the control plane's: nobody else may burn an id", async () => {
    const { minter, fence } = setup();
    const signed = minter.mintCallTicket(call);
    const forged = { ...signed, signature: Buffer.alloc(64) };
    await expect(fence(forged)).rejects.toBeInstanceOf(AppError);
  });
});

describe("the claim right before sending", () => {
  it("refuses a ticket that expired while it waited (a stalled process), spending nothing", async () => {
    const { minter, spend, checkTicket, advance } = setup();
    const signed = minter.mintCallTicket(call);
    const ticket = await checkTicket(signed);
    advance(3_500 + 5_001);
    await expect(spend(ticket)).rejects.toMatchObject({ code: "ticket_expired" });
  });
});
