// A ticket refused as issued before its proxy started (ticket_predates_proxy: a memory-store proxy
// restarted while the call waited) went to no process that could run it: executeCall gives the
// approval back as on the other not-sent paths, audits call_not_sent with that reason, asks no
// fence, and answers not_sent. The real proxy and tiers: control-plane/test/proxy-restart-not-sent.
import type { ExecuteResponse } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import { describe, expect, it } from "vitest";
import type { AuditEvent } from "../audit/audit.repo.ts";
import type { EgressClient } from "../egress/egress-client.ts";
import type { TicketFence } from "../egress/ticket-fence.ts";
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

async function refusedAsPredating(options: { isOneCall: boolean; releaseFails?: boolean }) {
  const events: AuditEvent[] = [];
  const fenced: string[] = [];
  let releases = 0;
  let settles = 0;
  const fence: TicketFence = {
    pending: 0,
    isStoreShared: async () => false,
    fence: async () => {
      fenced.push("asked");
      return "unknown";
    },
  };
  const calls = createCallsService({
    findItemByName: async () => undefined,
    findItemsByHost: async () => [],
    recordEvent: async (event) => {
      events.push(event);
    },
    minter: {
      mintCallTicket: () => ({ payload: new Uint8Array(), signature: new Uint8Array(), keyId: "k" }),
    } as unknown as TicketMinter,
    egress: {
      execute: async (): Promise<ExecuteResponse> => {
        throw new AppError(
          "ticket_predates_proxy",
          "the call ticket was issued before this egress proxy started",
        );
      },
    } as unknown as EgressClient,
    fence,
    onGiveBackFailure: () => {},
  });
  const error = await calls
    .executeCall(
      { organisationId: "org", environment: "staging", actor: "agent:a" },
      { method: "DELETE", path: "/v1/x?id=7", item_name: "API_KEY" },
      { item, host: "api.example.com", path: "/v1/x?id=7" },
      {
        release: async () => {
          releases += 1;
          if (options.releaseFails) throw new Error("connection terminated");
        },
        isOneCall: options.isOneCall,
        settle: async () => {
          settles += 1;
        },
      },
    )
    .then(
      () => undefined,
      (caught: unknown) => caught as AppError,
    );
  return { error, events, fenced, releases, settles };
}

describe("a ticket refused as issued before its proxy started", () => {
  it("gives a one-call approval back, audits call_not_sent, asks no fence, and answers not_sent", async () => {
    const { error, events, fenced, releases, settles } = await refusedAsPredating({ isOneCall: true });
    expect(releases).toBe(1);
    expect(fenced).toEqual([]);
    // Given back: the grant forgot its ticket with the give-back, nothing is left to settle.
    expect(settles).toBe(0);
    expect(events.map((e) => [e.action, e.reason, e.detail])).toEqual([
      ["call_not_sent", "ticket_predates_proxy", { method: "DELETE", path: "/v1/x" }],
    ]);
    expect(error?.code).toBe("ticket_predates_proxy");
    expect(error?.extra).toMatchObject({ approval: "kept", request: "not_sent" });
  });

  it("says the approval is lost when the database refuses the give-back, and settles the call", async () => {
    const { error, events, fenced, settles } = await refusedAsPredating({
      isOneCall: true,
      releaseFails: true,
    });
    expect(fenced).toEqual([]);
    expect(settles).toBe(1);
    expect(events.map((e) => [e.action, e.detail?.approval])).toEqual([["call_not_sent", "not_given_back"]]);
    expect(error?.extra).toMatchObject({ approval: "lost", request: "not_sent" });
  });

  it("keeps a standing approval and says the request was not sent", async () => {
    const { error, fenced } = await refusedAsPredating({ isOneCall: false });
    expect(fenced).toEqual([]);
    expect(error?.extra).toMatchObject({ approval: "kept", request: "not_sent" });
  });
});
