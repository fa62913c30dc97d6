// Where the control plane fences (DECISIONS "Faults and isolation"): in its own database when the
// proxies report that very store, else by asking a proxy; a fence nobody can answer is asked again
// every second until the proxies would have forgotten the ticket, then it stays spent.
import { FenceOutcome, type GetInfoResponse, type SignedTicket, Ticket } from "@latch/proto/egress";
import { describe, expect, it } from "vitest";
import type { SpentTicketsRepo } from "./spent-tickets.repo.ts";
import { createTicketFence, type LateFence } from "./ticket-fence.ts";

const NOW = 1_800_000_000_000;

function ticket(id: string, expiresAtMs = NOW + 3_500): SignedTicket {
  const payload = Ticket.encode({
    id,
    issuer: "t",
    audience: "latch-egress",
    issuedAtMs: NOW,
    expiresAtMs,
    call: undefined,
    resolve: undefined,
    document: undefined,
    push: undefined,
    rewrap: undefined,
  }).finish();
  return { payload: Buffer.from(payload), signature: Buffer.alloc(64), keyId: "k" };
}

function fakeStore(storeId: string) {
  const spent = new Set<string>();
  let isDown = false;
  const repo: SpentTicketsRepo = {
    async insertFence(id) {
      if (isDown) throw new Error("database down");
      if (spent.has(id)) return false;
      spent.add(id);
      return true;
    },
    findStoreId: async () => storeId,
  };
  return { repo, spent, setDown: (down: boolean) => (isDown = down) };
}

function fakeProxies(answer: () => FenceOutcome, replayStoreId: string, replicas = 1) {
  const asked: string[] = [];
  let isUp = true;
  return {
    asked,
    setUp: (up: boolean) => (isUp = up),
    egress: {
      replicaStates: () => Array.from({ length: replicas }, () => "serving" as const),
      async fence(signed: SignedTicket) {
        if (!isUp) throw new Error("unavailable");
        asked.push(Ticket.decode(signed.payload).id);
        return answer();
      },
      async getInfo() {
        if (!isUp) throw new Error("unavailable");
        return { replayStoreId } as GetInfoResponse;
      },
    },
  };
}

describe("fencing from the control plane", () => {
  it("writes the shared table itself when the proxies spend ids there: no proxy needs to answer", async () => {
    const store = fakeStore("store:abc");
    const proxies = fakeProxies(() => FenceOutcome.FENCE_OUTCOME_FENCED, "store:abc");
    const fence = createTicketFence({ egress: proxies.egress, spentTickets: store.repo, now: () => NOW });
    // Learns the proxies' store while they answer; then every proxy goes down.
    expect(await fence.fence(ticket("t-aaaaaaaaaaaaaaaa"), () => {})).toBe("fenced");
    proxies.setUp(false);
    expect(await fence.fence(ticket("t-bbbbbbbbbbbbbbbb"), () => {})).toBe("fenced");
    store.spent.add("t-cccccccccccccccc"); // a proxy claimed this one
    expect(await fence.fence(ticket("t-cccccccccccccccc"), () => {})).toBe("taken");
    expect(proxies.asked).toEqual([]);
  });

  it("asks a proxy when the proxies' store is not this database (one proxy, its memory)", async () => {
    const store = fakeStore("store:abc");
    const proxies = fakeProxies(() => FenceOutcome.FENCE_OUTCOME_TAKEN, "");
    const fence = createTicketFence({ egress: proxies.egress, spentTickets: store.repo, now: () => NOW });
    expect(await fence.fence(ticket("t-dddddddddddddddd"), () => {})).toBe("taken");
    expect(proxies.asked).toEqual(["t-dddddddddddddddd"]);
    expect(store.spent.size).toBe(0);
  });

  it("keeps asking while nobody answers, and says how it ended", async () => {
    let clock = NOW;
    const proxies = fakeProxies(() => FenceOutcome.FENCE_OUTCOME_FENCED, "");
    proxies.setUp(false);
    const fence = createTicketFence({ egress: proxies.egress, now: () => clock });
    const late: LateFence[] = [];
    expect(await fence.fence(ticket("t-eeeeeeeeeeeeeeee"), (o) => late.push(o))).toBe("pending");
    expect(fence.pending).toBe(1);
    proxies.setUp(true);
    for (let i = 0; i < 30 && late.length === 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(late).toEqual(["fenced"]);
    expect(fence.pending).toBe(0);

    // Nobody answers before the horizon: it stays spent, and the caller hears "unknown".
    proxies.setUp(false);
    const gaveUp: LateFence[] = [];
    expect(await fence.fence(ticket("t-ffffffffffffffff"), (o) => gaveUp.push(o))).toBe("pending");
    clock = NOW + 3_500 + 5_001;
    for (let i = 0; i < 30 && gaveUp.length === 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(gaveUp).toEqual(["unknown"]);
  });

  it("concludes nothing past the horizon, even where the table would accept the insert", async () => {
    const store = fakeStore("store:abc");
    const proxies = fakeProxies(() => FenceOutcome.FENCE_OUTCOME_FENCED, "store:abc");
    const fence = createTicketFence({
      egress: proxies.egress,
      spentTickets: store.repo,
      // The proxies keep spent ids in the shared table a minute past expiry + skew; the fence
      // stops 15 s short of that.
      now: () => NOW + 3_500 + 5_000 + 45_001,
    });
    expect(await fence.fence(ticket("t-gggggggggggggggg"), () => {})).toBe("unknown");
    expect(store.spent.size).toBe(0);
  });

  it("in the shared table, still concludes after the ticket expired, and waits out a database blip there", async () => {
    let clock = NOW + 3_500 + 5_001;
    const store = fakeStore("store:abc");
    const proxies = fakeProxies(() => FenceOutcome.FENCE_OUTCOME_UNKNOWN, "store:abc");
    const fence = createTicketFence({ egress: proxies.egress, spentTickets: store.repo, now: () => clock });
    expect(await fence.fence(ticket("t-hhhhhhhhhhhhhhhh"), () => {})).toBe("fenced");
    store.spent.add("t-iiiiiiiiiiiiiiii");
    expect(await fence.fence(ticket("t-iiiiiiiiiiiiiiii"), () => {})).toBe("taken");
    // The database does not answer for a while past the ticket's expiry: no proxy is asked (it
    // could only say UNKNOWN now); the fence waits, and wins once the database is back.
    store.setDown(true);
    const late: LateFence[] = [];
    expect(await fence.fence(ticket("t-jjjjjjjjjjjjjjjj"), (o) => late.push(o))).toBe("pending");
    clock += 20_000;
    store.setDown(false);
    for (let i = 0; i < 30 && late.length === 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(late).toEqual(["fenced"]);
    expect(proxies.asked).toEqual([]);
  });

  it("with the proxies' memory stores, past the ticket's expiry is unknown at once", async () => {
    const store = fakeStore("store:abc");
    const proxies = fakeProxies(() => FenceOutcome.FENCE_OUTCOME_FENCED, "");
    const fence = createTicketFence({
      egress: proxies.egress,
      spentTickets: store.repo,
      now: () => NOW + 3_500 + 5_001,
    });
    expect(await fence.fence(ticket("t-kkkkkkkkkkkkkkkk"), () => {})).toBe("unknown");
    expect(proxies.asked).toEqual([]);
  });

  it("with several proxies each on its own memory, asks none (one may never have seen the ticket): unknown", async () => {
    const store = fakeStore("store:abc");
    const proxies = fakeProxies(() => FenceOutcome.FENCE_OUTCOME_FENCED, "", 2);
    const fence = createTicketFence({ egress: proxies.egress, spentTickets: store.repo, now: () => NOW });
    expect(await fence.fence(ticket("t-llllllllllllllll"), () => {})).toBe("unknown");
    expect(proxies.asked).toEqual([]);
    expect(store.spent.size).toBe(0);
  });
});
