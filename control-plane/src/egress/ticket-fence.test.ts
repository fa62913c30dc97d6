// Where the control plane fences (DECISIONS "Faults and isolation"): in its own database when the
// proxies report that very store, else by asking a proxy; a fence nobody can answer is asked again
// every second until the proxies would have forgotten the ticket, then it stays spent.
import { FenceOutcome, type GetInfoResponse, type SignedTicket, Ticket } from "@latch/proto/egress";
import { describe, expect, it } from "vitest";
import type { SpentTicketsRepo } from "./spent-tickets.repo.ts";
import { createTicketFence, type LateFence } from "./ticket-fence.ts";

const NOW = 1_800_000_000_000;

function ticket(id: string, expiresAtMs = NOW + 3_500, issuedAtMs = NOW): SignedTicket {
  const payload = Ticket.encode({
    id,
    issuer: "t",
    audience: "latch-egress",
    issuedAtMs,
    expiresAtMs,
    call: undefined,
    resolve: undefined,
    document: undefined,
    push: undefined,
    rewrap: undefined,
    organisationId: "",
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

/**
 * A rotation of replicas by address, each with the store it reports (undefined: it does not
 * answer); `fence` reaches whichever replica round robin picks.
 */
function fakeFleet(answer: () => FenceOutcome, stores: Record<string, string | undefined>) {
  const asked: string[] = [];
  const infoAsked: string[] = [];
  let isUp = true;
  return {
    asked,
    infoAsked,
    stores,
    setUp: (up: boolean) => (isUp = up),
    egress: {
      replicaStates: () => Object.keys(stores).map(() => "serving" as const),
      replicas: () => Object.keys(stores).map((address) => ({ address, state: "serving" as const })),
      async getInfoOf(address: string) {
        infoAsked.push(address);
        const replayStoreId = stores[address];
        if (!isUp || replayStoreId === undefined) throw new Error("unavailable");
        return { replayStoreId, replicaId: address } as GetInfoResponse;
      },
      /** Whichever replica round robin picks (here the last): no way to learn the whole fleet's store. */
      async getInfo() {
        const replayStoreId = Object.values(stores).at(-1);
        if (!isUp || replayStoreId === undefined) throw new Error("unavailable");
        return { replayStoreId } as GetInfoResponse;
      },
      async fence(signed: SignedTicket) {
        if (!isUp) throw new Error("unavailable");
        asked.push(Ticket.decode(signed.payload).id);
        return answer();
      },
    },
  };
}

function fakeProxies(answer: () => FenceOutcome, replayStoreId: string, replicas = 1) {
  const stores: Record<string, string> = {};
  for (let i = 1; i <= replicas; i++) stores[`10.0.0.${i}:8443`] = replayStoreId;
  return fakeFleet(answer, stores);
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
    let clock = NOW;
    const store = fakeStore("store:abc");
    const proxies = fakeProxies(() => FenceOutcome.FENCE_OUTCOME_UNKNOWN, "store:abc");
    const fence = createTicketFence({ egress: proxies.egress, spentTickets: store.repo, now: () => clock });
    expect(await fence.isStoreShared()).toBe(true);
    clock = NOW + 3_500 + 5_001;
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

// A rolling switch from the proxies' memory stores to the shared table (DECISIONS "Faults and
// isolation"): for a while some replicas spend ids in memory and some in the table, and a ticket a
// memory replica ran is in no table. The table speaks for the fleet only when every replica says so.
describe("fencing while the replicas do not all spend ids in the shared table", () => {
  it("with one replica on its memory and one on the table, fences nothing (the memory one may have run it)", async () => {
    const store = fakeStore("store:abc");
    const fleet = fakeFleet(() => FenceOutcome.FENCE_OUTCOME_FENCED, {
      "10.0.0.1:8443": "",
      "10.0.0.2:8443": "store:abc",
    });
    const fence = createTicketFence({ egress: fleet.egress, spentTickets: store.repo, now: () => NOW });
    expect(await fence.fence(ticket("t-mmmmmmmmmmmmmmmm"), () => {})).toBe("unknown");
    // Each replica asked by its address; no Fence RPC, nothing written to the table.
    expect(fleet.infoAsked.sort()).toEqual(["10.0.0.1:8443", "10.0.0.2:8443"]);
    expect(fleet.asked).toEqual([]);
    expect(store.spent.size).toBe(0);
    expect(await fence.isStoreShared()).toBe(false);
  });

  it("a replica that does not answer counts as not sharing the table", async () => {
    const store = fakeStore("store:abc");
    const fleet = fakeFleet(() => FenceOutcome.FENCE_OUTCOME_FENCED, {
      "10.0.0.1:8443": undefined,
      "10.0.0.2:8443": "store:abc",
    });
    const fence = createTicketFence({ egress: fleet.egress, spentTickets: store.repo, now: () => NOW });
    expect(await fence.fence(ticket("t-nnnnnnnnnnnnnnnn"), () => {})).toBe("unknown");
    expect(fleet.asked).toEqual([]);
    expect(store.spent.size).toBe(0);
    // Not known (rather than "not shared") for the recovery of abandoned calls, which asks later.
    expect(await fence.isStoreShared()).toBeUndefined();
  });

  it("asks again when the set of replicas changes, within the cache's minute", async () => {
    const store = fakeStore("store:abc");
    const fleet = fakeFleet(() => FenceOutcome.FENCE_OUTCOME_FENCED, { "10.0.0.1:8443": "store:abc" });
    const fence = createTicketFence({ egress: fleet.egress, spentTickets: store.repo, now: () => NOW });
    expect(await fence.fence(ticket("t-oooooooooooooooo"), () => {})).toBe("fenced");
    // A replica on its memory joins the rotation (a rollback, or the switch's first step).
    fleet.stores["10.0.0.2:8443"] = "";
    expect(await fence.fence(ticket("t-pppppppppppppppp"), () => {})).toBe("unknown");
    expect(store.spent.has("t-pppppppppppppppp")).toBe(false);
    expect(fleet.asked).toEqual([]);
  });

  it("once the switch is over, a ticket issued before it is still not fenced; one issued after is", async () => {
    let clock = NOW;
    const store = fakeStore("store:abc");
    const fleet = fakeFleet(() => FenceOutcome.FENCE_OUTCOME_FENCED, {
      "10.0.0.1:8443": "",
      "10.0.0.2:8443": "store:abc",
    });
    const fence = createTicketFence({ egress: fleet.egress, spentTickets: store.repo, now: () => clock });
    expect(await fence.isStoreShared()).toBe(false);
    // The memory replica ran this ticket, then left the rotation; only the table's replica is left,
    // and it would say FENCED of a ticket it never saw.
    const before = ticket("t-qqqqqqqqqqqqqqqq", NOW + 3_500, NOW);
    delete fleet.stores["10.0.0.1:8443"];
    clock = NOW + 1_000;
    expect(await fence.fence(before, () => {})).toBe("unknown");
    expect(fleet.asked).toEqual([]);
    expect(store.spent.size).toBe(0);
    const after = ticket("t-rrrrrrrrrrrrrrrr", NOW + 4_500, NOW + 1_000);
    expect(await fence.fence(after, () => {})).toBe("fenced");
    expect(store.spent.has("t-rrrrrrrrrrrrrrrr")).toBe(true);
  });
  it("past half its minute, looks at the fleet again in the background: a call never waits on a silent replica", async () => {
    let clock = NOW;
    const store = fakeStore("store:abc");
    const fleet = fakeProxies(() => FenceOutcome.FENCE_OUTCOME_FENCED, "store:abc", 2);
    // From the second look on, one replica holds its answer until released (a silent link).
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const egress = {
      ...fleet.egress,
      async getInfoOf(address: string) {
        if (fleet.infoAsked.length >= 2 && address === "10.0.0.2:8443") await held;
        return fleet.egress.getInfoOf(address);
      },
    };
    const fence = createTicketFence({ egress, spentTickets: store.repo, now: () => clock });
    expect(await fence.isStoreShared()).toBe(true);
    expect(fleet.infoAsked).toHaveLength(2);
    clock = NOW + 31_000;
    const inTime = (answer: Promise<boolean | undefined>) =>
      Promise.race([answer, new Promise((resolve) => setTimeout(() => resolve("waited"), 200))]);
    // Answered from the view it has while the next look waits on the silent replica; asked once.
    expect(await inTime(fence.isStoreShared())).toBe(true);
    expect(await inTime(fence.isStoreShared())).toBe(true);
    expect(fleet.infoAsked).toHaveLength(3);
    // Past the minute the view is too old to speak: the caller waits for the look under way.
    clock = NOW + 61_000;
    const late = fence.isStoreShared();
    expect(await inTime(late)).toBe("waited");
    release();
    expect(await late).toBe(true);
    expect(fleet.infoAsked).toHaveLength(4);
  });
  it("a slow look at an older fleet, ending after a newer look found a memory replica, never makes the fleet shared again", async () => {
    let clock = NOW;
    const store = fakeStore("store:abc");
    const fleet = fakeFleet(() => FenceOutcome.FENCE_OUTCOME_FENCED, {
      "10.0.0.1:8443": "store:abc",
      "10.0.0.2:8443": "store:abc",
    });
    let release: () => void = () => {};
    let isHeld = false;
    const egress = {
      ...fleet.egress,
      async getInfoOf(address: string) {
        if (isHeld && address === "10.0.0.2:8443") {
          isHeld = false;
          await new Promise<void>((resolve) => {
            release = resolve;
          });
        }
        return fleet.egress.getInfoOf(address);
      },
    };
    const fence = createTicketFence({ egress, spentTickets: store.repo, now: () => clock });
    expect(await fence.isStoreShared()).toBe(true);
    // Past half the minute: the background look of the two replicas starts, and one holds it.
    clock = NOW + 35_000;
    isHeld = true;
    expect(await fence.isStoreShared()).toBe(true);
    // A replica on its own memory joins: the look of the new fleet finds it not shared.
    fleet.stores["10.0.0.3:8443"] = "";
    clock = NOW + 36_000;
    expect(await fence.isStoreShared()).toBe(false);
    // The older look ends last: it speaks of the fleet before the memory replica joined.
    release();
    await new Promise((resolve) => setTimeout(resolve, 10));
    // A ticket issued now may go to the memory replica, which runs it and then leaves.
    clock = NOW + 38_000;
    const issued = ticket("t-ssssssssssssssss", clock + 3_500, clock);
    delete fleet.stores["10.0.0.3:8443"];
    clock = NOW + 38_500;
    expect(await fence.fence(issued, () => {})).toBe("unknown");
    expect(store.spent.has("t-ssssssssssssssss")).toBe(false);
  });
});

// Proxies each on its own memory (DECISIONS "Faults and isolation": fence won, no proxy can ever
// run the ticket). A lone replica's FENCED speaks for its own memory only: it is the fleet's answer
// only for a ticket issued since that replica has been the rotation's one address.
describe("fencing where the fleet of memory replicas shrank to one", () => {
  const A = "10.0.0.1:8443";
  const B = "10.0.0.2:8443";

  it("a ticket issued while two replicas served is never fenced by the one left; one issued after is", async () => {
    let clock = NOW;
    const fleet = fakeFleet(() => FenceOutcome.FENCE_OUTCOME_FENCED, { [A]: "", [B]: "" });
    const fence = createTicketFence({ egress: fleet.egress, now: () => clock });
    expect(await fence.fence(ticket("t-aaaaaaaaaaaaaaa1"), () => {})).toBe("unknown");
    // Issued now, sent to A: A spends it and sends the request, leaves the service name and is
    // killed before answering. B alone is left, and its memory never saw the ticket.
    const sentByA = ticket("t-aaaaaaaaaaaaaaa2", clock + 31_500, clock);
    delete fleet.stores[A];
    clock += 10_000;
    expect(await fence.fence(sentByA, () => {})).toBe("unknown");
    expect(fleet.asked).toEqual([]);
    // A ticket issued since B has been alone can only have gone to B: B's answer is the fleet's.
    const sinceAlone = ticket("t-aaaaaaaaaaaaaaa3", clock + 31_500, clock);
    clock += 1_000;
    expect(await fence.fence(sinceAlone, () => {})).toBe("fenced");
    expect(fleet.asked).toEqual(["t-aaaaaaaaaaaaaaa3"]);
  });

  it("notices a replica that joined and left between two fences", async () => {
    let clock = NOW;
    const fleet = fakeFleet(() => FenceOutcome.FENCE_OUTCOME_FENCED, { [B]: "" });
    const fence = createTicketFence({ egress: fleet.egress, now: () => clock });
    // B has been alone since this control plane started: its answer stands.
    expect(await fence.fence(ticket("t-bbbbbbbbbbbbbbb1"), () => {})).toBe("fenced");
    // A joins (a scale-up), takes this ticket and runs it, then leaves (a scale-down): no fence
    // was asked meanwhile, and the rotation is B alone again, as it was at the last fence.
    clock += 1_000;
    fleet.stores[A] = "";
    const sentByA = ticket("t-bbbbbbbbbbbbbbb2", clock + 31_500, clock);
    await new Promise((resolve) => setTimeout(resolve, 700));
    clock += 1_500;
    delete fleet.stores[A];
    await new Promise((resolve) => setTimeout(resolve, 700));
    clock += 500;
    expect(await fence.fence(sentByA, () => {})).toBe("unknown");
    expect(fleet.asked).toEqual(["t-bbbbbbbbbbbbbbb1"]);
  });

  it("the replicas first listed took every ticket before: a start with none listed yet fences as before", async () => {
    let clock = NOW;
    const fleet = fakeFleet(() => FenceOutcome.FENCE_OUTCOME_FENCED, {});
    const fence = createTicketFence({ egress: fleet.egress, now: () => clock });
    // Issued while the rotation still connects; sent once B is listed, to B alone.
    const early = ticket("t-cccccccccccccccc", clock + 31_500, clock);
    clock += 300;
    fleet.stores[B] = "";
    clock += 1_000;
    expect(await fence.fence(early, () => {})).toBe("fenced");
    // None listed any more, then B again (it may be another process at that address): not since.
    delete fleet.stores[B];
    await new Promise((resolve) => setTimeout(resolve, 700));
    clock += 1_000;
    fleet.stores[B] = "";
    const before = ticket("t-dddddddddddddddd", clock + 31_500, clock - 2_000);
    expect(await fence.fence(before, () => {})).toBe("unknown");
  });
});
