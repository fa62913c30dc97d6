// A fault of ours (the database) on the call path is answered as an unanswered call's is: where the
// approval stands and whether the request may have left, never a bare "the tool failed; try again
// later" that would have the agent send again a request that reached the API. Naming a one-call
// approval's ticket failed: nothing was sent, the approval goes back. Storing what a token exchange
// rotated failed after the proxy answered: the request went out, the agent must not retry blindly.
import { type ExecuteResponse, TokenKind } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import { describe, expect, it } from "vitest";
import type { AuditEvent } from "../audit/audit.repo.ts";
import { DatabaseError } from "../db/database-error.ts";
import type { EgressClient } from "../egress/egress-client.ts";
import type { TicketFence } from "../egress/ticket-fence.ts";
import type { TicketMinter } from "../egress/tickets.ts";
import type { CallableItem } from "../items/callable-item.ts";
import type { ItemTokensRepo } from "../items/item-tokens.repo.ts";
import { createCallsService } from "./calls.service.ts";

const SPOTIFY_HOSTS = ["api.spotify.com", "accounts.spotify.com"];
const stored = (name: string, inject: string, allowedHosts: string[], username: string | null = null) =>
  ({
    id: `itm_${name}`,
    name,
    allowedHosts,
    inject,
    username,
    sealingKeyId: "k",
    sealedValue: new Uint8Array([1]),
  }) satisfies CallableItem;
const apiKey = stored("API_KEY", "bearer", ["api.example.com"]);
const spotify = stored("SPOTIFY", "client_credentials", SPOTIFY_HOSTS, "cid");
const spotifyRefresh = stored("SPOTIFY_REFRESH", "refresh", SPOTIFY_HOSTS);
const byName = new Map([apiKey, spotify, spotifyRefresh].map((i) => [i.name, i]));
const scope = { organisationId: "org", environment: "production", actor: "agent:a" };

const fence: TicketFence = { pending: 0, isStoreShared: async () => false, fence: async () => "taken" };
const lostConnection = () => new DatabaseError("57P01", "update grants");

async function run(options: {
  item: CallableItem;
  host: string;
  path: string;
  execute: () => Promise<ExecuteResponse>;
  locked?: Partial<ItemTokensRepo>;
}) {
  const events: AuditEvent[] = [];
  let releases = 0;
  let sent = 0;
  const calls = createCallsService({
    findItemByName: async (_o, _e, name) => byName.get(name),
    findItemsByHost: async () => [],
    recordEvent: async (event) => {
      events.push(event);
    },
    minter: {
      mintCallTicket: () => ({ payload: new Uint8Array(), signature: new Uint8Array(), keyId: "k" }),
    } as unknown as TicketMinter,
    egress: {
      execute: async () => {
        sent += 1;
        return options.execute();
      },
    } as unknown as EgressClient,
    fence,
    inItemTokenLock: async (_id, fn) =>
      fn({
        findAccessToken: async () => undefined,
        findSealedValue: async () => ({ sealedValue: new Uint8Array([2]), sealingKeyId: "k" }),
        ...options.locked,
      } as unknown as ItemTokensRepo),
  });
  const error = await calls
    .executeCall(
      scope,
      { method: "POST", path: options.path, item_name: options.item.name },
      { item: options.item, host: options.host, path: options.path },
      {
        release: async () => {
          releases += 1;
        },
        isOneCall: true,
        ticket: { id: "tkt_faults_named", expiresAt: new Date(Date.now() + 60_000) },
        settle: async () => {},
      },
    )
    .then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
  return { error, releases, sent: () => sent, actions: events.map((e) => [e.action, e.reason]) };
}

describe("a database fault on the call path", () => {
  it("storing the tokens an exchange rotated, after the proxy answered: the request may have reached the API", async () => {
    const { error, releases, sent, actions } = await run({
      item: spotify,
      host: "api.spotify.com",
      path: "/v1/me/player/queue",
      execute: async () =>
        ({
          reachedOrigin: true,
          originStatus: 204,
          body: Buffer.from(""),
          headers: [],
          bodyTruncated: false,
          rotatedCredentials: [
            {
              kind: TokenKind.TOKEN_KIND_REFRESH,
              credential: {
                itemName: "SPOTIFY_REFRESH",
                keyId: "k",
                sealedValue: Buffer.from([3]),
                username: "",
              },
            },
          ],
        }) as unknown as ExecuteResponse,
      locked: {
        holdIfUnchanged: async () => {
          throw lostConnection();
        },
      },
    });
    expect(sent()).toBe(1);
    expect(releases).toBe(0);
    expect(actions).toEqual([["http_request_failed", "internal"]]);
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).extra).toMatchObject({ approval: "spent", request: "may_have_reached_api" });
    expect(JSON.stringify((error as AppError).toBody())).not.toContain("57P01");
  });
});
