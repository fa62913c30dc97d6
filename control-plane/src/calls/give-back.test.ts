// Who gives a spent one-call approval back (DECISIONS "Approvals", "Faults and isolation"):
// executeCall alone, and only when nothing left the service, the proxy answered reached_origin
// false, or the proxy did not answer and fencing its ticket won (now, or later once a fence could
// be asked). A ticket a proxy took keeps the approval spent; every unanswered call is audited.
import type { ExecuteResponse } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import { describe, expect, it } from "vitest";
import type { AuditEvent } from "../audit/audit.repo.ts";
import type { EgressClient } from "../egress/egress-client.ts";
import type { FenceResult, LateFence, TicketFence } from "../egress/ticket-fence.ts";
import type { TicketMinter } from "../egress/tickets.ts";
import { createCallsService } from "./calls.service.ts";

const item = {
  id: "itm_1",
  name: "API_KEY",
  allowedHosts: ["api.example.com"],
  inject: "bearer",
  username: null,
  sealingKeyId: "k",
  sealedValue: new Uint8Array([1]),
};
const located = { item, host: "api.example.com", path: "/v1/x" };
const scope = { organisationId: "org", environment: "staging", actor: "agent:a" };

const answered = (reachedOrigin: boolean): ExecuteResponse =>
  ({
    reachedOrigin,
    originStatus: reachedOrigin ? 200 : 0,
    body: Buffer.from("{}"),
    headers: [],
    bodyTruncated: false,
    error: reachedOrigin ? undefined : { code: "private_range", message: "refused" },
  }) as unknown as ExecuteResponse;

const unavailable = async (): Promise<ExecuteResponse> => {
  throw new AppError("egress_unavailable", "the egress proxy is not reachable");
};

/** A fence that answers `now`, and hands the late outcome to whoever holds `settle`. */
function fakeFence(now: FenceResult) {
  const fenced: string[] = [];
  let late: ((outcome: LateFence) => void) | undefined;
  const fence: TicketFence = {
    pending: 0,
    isStoreShared: async () => false,
    fence: async (_ticket, later) => {
      fenced.push("asked");
      late = later;
      return now;
    },
  };
  return { fence, fenced, settle: (outcome: LateFence) => late?.(outcome) };
}

async function run(options: {
  mint?: () => never;
  execute: () => Promise<ExecuteResponse>;
  fence?: TicketFence;
  isOneCall?: boolean;
  /** The database refuses the give-back. */
  releaseFails?: boolean;
}) {
  const events: AuditEvent[] = [];
  const giveBackFailures: unknown[] = [];
  let releases = 0;
  const calls = createCallsService({
    findItemByName: async () => undefined,
    findItemsByHost: async () => [],
    recordEvent: async (event) => {
      events.push(event);
    },
    minter: {
      mintCallTicket:
        options.mint ?? (() => ({ payload: new Uint8Array(), signature: new Uint8Array(), keyId: "k" })),
    } as unknown as TicketMinter,
    egress: { execute: options.execute } as unknown as EgressClient,
    fence: options.fence ?? fakeFence("taken").fence,
    onGiveBackFailure: (error) => giveBackFailures.push(error),
  });
  const outcome = await calls
    .executeCall(scope, { method: "DELETE", path: "/v1/x", item_name: "API_KEY" }, located, {
      release: async () => {
        releases += 1;
        if (options.releaseFails) throw new Error("connection terminated");
      },
      isOneCall: options.isOneCall ?? true,
    })
    .then(
      (value) => ({ value, error: undefined }),
      (error: unknown) => ({ value: undefined, error: error as AppError }),
    );
  return {
    outcome,
    releases: () => releases,
    events,
    giveBackFailures,
    actions: () => events.map((e) => e.action),
  };
}

describe("giving a spent approval back", () => {
  it("happens when the proxy answers that nothing reached the origin", async () => {
    const { releases, actions } = await run({ execute: async () => answered(false) });
    expect(releases()).toBe(1);
    expect(actions()).toEqual(["http_request_refused"]);
  });

  it("refused by the database when nothing reached the origin: the refusal is still answered and audited as not given back", async () => {
    const { outcome, releases, events, giveBackFailures } = await run({
      execute: async () => answered(false),
      releaseFails: true,
    });
    expect(releases()).toBe(1);
    expect(outcome.error).toBeUndefined();
    expect(outcome.value?.reachedOrigin).toBe(false);
    expect(events.map((e) => [e.action, e.reason, e.detail?.approval])).toEqual([
      ["http_request_refused", "private_range", "not_given_back"],
    ]);
    expect(giveBackFailures).toHaveLength(1);
  });

  it("refused by the database before the ticket left: the call's own error is still the answer", async () => {
    const { outcome, releases, giveBackFailures } = await run({
      mint: () => {
        throw new AppError("egress_unavailable", "no signing key");
      },
      execute: async () => answered(true),
      releaseFails: true,
    });
    expect(releases()).toBe(1);
    expect(outcome.error?.message).toBe("no signing key");
    expect(giveBackFailures).toHaveLength(1);
  });

  it("never happens once the origin answered", async () => {
    const { releases, actions } = await run({ execute: async () => answered(true) });
    expect(releases()).toBe(0);
    expect(actions()).toEqual(["http_request"]);
  });

  it("happens when the proxy did not answer and the fence won: no proxy ran the ticket or ever will", async () => {
    const { fence, fenced } = fakeFence("fenced");
    const { outcome, releases, events } = await run({ execute: unavailable, fence });
    expect(fenced).toEqual(["asked"]);
    expect(releases()).toBe(1);
    expect(events.map((e) => [e.action, e.reason, e.detail?.fence])).toEqual([
      ["call_not_sent", "egress_unavailable", "won"],
    ]);
    expect(outcome.error?.code).toBe("egress_unavailable");
    expect(outcome.error?.extra.approval).toBe("kept");
  });

  it("never happens when the fence lost: a proxy took the ticket and may have reached the origin", async () => {
    const { outcome, releases, events } = await run({
      execute: unavailable,
      fence: fakeFence("taken").fence,
    });
    expect(releases()).toBe(0);
    expect(events.map((e) => [e.action, e.detail?.fence])).toEqual([["call_outcome_unknown", "lost"]]);
    expect(outcome.error?.extra.approval).toBe("spent");
  });

  it("never happens when no store can tell any more", async () => {
    const { outcome, releases, events } = await run({
      execute: unavailable,
      fence: fakeFence("unknown").fence,
    });
    expect(releases()).toBe(0);
    expect(events.map((e) => [e.action, e.detail?.fence])).toEqual([["call_outcome_unknown", "unknown"]]);
    expect(outcome.error?.extra.approval).toBe("spent");
  });

  it("is held while nobody can be asked, and happens later once the fence wins", async () => {
    const pending = fakeFence("pending");
    const { outcome, releases, actions, events } = await run({ execute: unavailable, fence: pending.fence });
    expect(releases()).toBe(0);
    expect(outcome.error?.extra.approval).toBe("held");
    expect(actions()).toEqual(["call_outcome_unknown"]);
    pending.settle("fenced");
    await new Promise((resolve) => setImmediate(resolve));
    expect(releases()).toBe(1);
    expect(events.map((e) => [e.action, e.detail?.fence])).toEqual([
      ["call_outcome_unknown", "pending"],
      ["call_not_sent", "late"],
    ]);
  });

  it("fails as a write: the fence won but the database refused, so the call says the approval is lost", async () => {
    const { outcome, releases, events, giveBackFailures } = await run({
      execute: unavailable,
      fence: fakeFence("fenced").fence,
      releaseFails: true,
    });
    expect(releases()).toBe(1);
    expect(giveBackFailures).toHaveLength(1);
    // The audit row is still written, and says the approval was not given back.
    expect(events.map((e) => [e.action, e.detail?.fence, e.detail?.approval])).toEqual([
      ["call_not_sent", "won", "not_given_back"],
    ]);
    expect(outcome.error?.code).toBe("egress_unavailable");
    expect(outcome.error?.extra.approval).toBe("lost");
  });

  it("fails later as a write without taking the process down: logged and audited", async () => {
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown) => rejections.push(reason);
    process.on("unhandledRejection", onRejection);
    try {
      const pending = fakeFence("pending");
      const { releases, events, giveBackFailures } = await run({
        execute: unavailable,
        fence: pending.fence,
        releaseFails: true,
      });
      pending.settle("fenced");
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(releases()).toBe(1);
      expect(giveBackFailures).toHaveLength(1);
      expect(events.map((e) => [e.action, e.detail?.fence, e.detail?.approval])).toEqual([
        ["call_outcome_unknown", "pending", undefined],
        ["call_not_sent", "late", "not_given_back"],
      ]);
      expect(rejections).toEqual([]);
    } finally {
      process.off("unhandledRejection", onRejection);
    }
  });

  it("never happens later when the late fence lost or could not be asked in time", async () => {
    for (const late of ["taken", "unknown"] as const) {
      const pending = fakeFence("pending");
      const { releases, actions } = await run({ execute: unavailable, fence: pending.fence });
      pending.settle(late);
      await new Promise((resolve) => setImmediate(resolve));
      expect(releases()).toBe(0);
      expect(actions()).toEqual(["call_outcome_unknown"]);
    }
  });

  it("says a standing or session approval is kept whatever the fence says, and whether the request may have left", async () => {
    const told = {
      fenced: "not_sent",
      taken: "may_have_reached_api",
      unknown: "may_have_reached_api",
      pending: "not_known_yet",
    } as const;
    for (const [fenceResult, request] of Object.entries(told)) {
      const { outcome } = await run({
        execute: unavailable,
        fence: fakeFence(fenceResult as keyof typeof told).fence,
        isOneCall: false,
      });
      expect(outcome.error?.extra).toMatchObject({ approval: "kept", request });
    }
  });

  it("happens when the call failed before its ticket left, with nothing fenced", async () => {
    const { fence, fenced } = fakeFence("taken");
    const { outcome, releases, actions } = await run({
      mint: () => {
        throw new Error("no signing key");
      },
      execute: async () => answered(true),
      fence,
    });
    expect(outcome.error).toBeDefined();
    expect(releases()).toBe(1);
    expect(actions()).toEqual([]);
    expect(fenced).toEqual([]);
  });
});
