// Who gives a spent one-call approval back (DECISIONS "Approvals"): executeCall alone, and only
// when nothing left the service or the proxy answered reached_origin false. A proxy that never
// answered keeps it spent (the request may have gone out), and that attempt is audited.
import type { ExecuteResponse } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import { describe, expect, it } from "vitest";
import type { AuditEvent } from "../audit/audit.repo.ts";
import type { EgressClient } from "../egress/egress-client.ts";
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

async function run(options: { mint?: () => never; execute: () => Promise<ExecuteResponse> }) {
  const events: AuditEvent[] = [];
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
  });
  const outcome = await calls
    .executeCall(scope, { method: "DELETE", path: "/v1/x", item_name: "API_KEY" }, located, {
      release: async () => {
        releases += 1;
      },
    })
    .then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
  return { outcome, releases, actions: events.map((e) => e.action) };
}

describe("giving a spent approval back", () => {
  it("happens when the proxy answers that nothing reached the origin", async () => {
    const { releases, actions } = await run({ execute: async () => answered(false) });
    expect(releases).toBe(1);
    expect(actions).toEqual(["http_request_refused"]);
  });

  it("never happens once the origin answered", async () => {
    const { releases, actions } = await run({ execute: async () => answered(true) });
    expect(releases).toBe(0);
    expect(actions).toEqual(["http_request"]);
  });

  it("never happens when the proxy did not answer: the request may have gone out; the attempt is audited", async () => {
    const { outcome, releases, actions } = await run({
      execute: async () => {
        throw new AppError("egress_unavailable", "the egress proxy is not reachable");
      },
    });
    expect("error" in outcome).toBe(true);
    expect(releases).toBe(0);
    expect(actions).toEqual(["http_request_failed"]);
  });

  it("happens when the call failed before its ticket left", async () => {
    const { outcome, releases, actions } = await run({
      mint: () => {
        throw new Error("no signing key");
      },
      execute: async () => answered(true),
    });
    expect("error" in outcome).toBe(true);
    expect(releases).toBe(1);
    expect(actions).toEqual([]);
  });
});
