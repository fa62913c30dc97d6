// A call goes with the credentials the organisation's policy judged (DECISIONS "Policies"): the
// token plan is made again when the call is sent, and a sibling stored in between (a user's
// account connected a moment after the check) sends nothing and gives a spent approval back.
import { AppError } from "@latch/shared/errors";
import { describe, expect, it } from "vitest";
import type { EgressClient } from "../egress/egress-client.ts";
import type { TicketMinter } from "../egress/tickets.ts";
import type { CallableItem } from "../items/callable-item.ts";
import { createCallsService } from "./calls.service.ts";

const HOSTS = ["api.spotify.com", "accounts.spotify.com"];
const stored = (name: string, inject: string): CallableItem => ({
  id: `itm_${name}`,
  name,
  allowedHosts: HOSTS,
  inject,
  username: "cid",
  sealingKeyId: "k",
  sealedValue: new Uint8Array([1]),
});
const app = stored("SPOTIFY", "client_credentials");
const refresh = stored("SPOTIFY_REFRESH", "refresh");

async function callMe(judgedItems: string[]) {
  let executed = 0;
  let releases = 0;
  const calls = createCallsService({
    findItemByName: async (_o, _e, name) => (name === refresh.name ? refresh : undefined),
    findItemsByHost: async () => [],
    recordEvent: async () => {},
    minter: {
      mintCallTicket: () => ({ payload: new Uint8Array(), signature: new Uint8Array(), keyId: "k" }),
    } as unknown as TicketMinter,
    egress: {
      execute: async () => {
        executed += 1;
        throw new AppError("egress_unavailable", "not in this test");
      },
    } as unknown as EgressClient,
    inItemTokenLock: async () => {
      executed += 1;
      throw new AppError("egress_unavailable", "not in this test");
    },
  });
  const outcome = await calls
    .executeCall(
      { organisationId: "org", environment: "staging", actor: "agent:a", judgedItems },
      { method: "GET", host: "api.spotify.com", path: "/v1/me", item_name: "SPOTIFY" },
      { item: app, host: "api.spotify.com", path: "/v1/me" },
      {
        release: async () => {
          releases += 1;
        },
        isOneCall: true,
      },
    )
    .catch((error: unknown) => error);
  return { outcome, executed, releases };
}

describe("a call and the credentials its policy judged", () => {
  it("a refresh token stored after the check: nothing is sent, the approval is given back", async () => {
    const { outcome, executed, releases } = await callMe(["SPOTIFY"]);
    expect(outcome).toBeInstanceOf(AppError);
    expect((outcome as AppError).code).toBe("stale_version");
    expect((outcome as AppError).message).toMatch(
      /SPOTIFY_REFRESH was stored while this call was being checked/,
    );
    expect(executed).toBe(0);
    expect(releases).toBe(1);
  });

  it("judged with the refresh token: the call goes on to the exchange", async () => {
    const { outcome, executed } = await callMe(["SPOTIFY", "SPOTIFY_REFRESH"]);
    expect((outcome as AppError).message).toBe("not in this test");
    expect(executed).toBe(1);
  });
});
