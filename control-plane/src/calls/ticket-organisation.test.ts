// An agent's call goes out on a ticket that names its organisation (Ticket.organisation_id), which
// the egress proxy keeps upstream connections apart by: one organisation's slow calls never queue
// another's.
import { generateKeyPairSync } from "node:crypto";
import { type ExecuteResponse, type SignedTicket, Ticket } from "@latch/proto/egress";
import { deriveTicketKeyId, rawEd25519PublicKey } from "@latch/shared/tickets/ticket-signature";
import { describe, expect, it } from "vitest";
import type { EgressClient } from "../egress/egress-client.ts";
import { createTicketMinter } from "../egress/tickets.ts";
import { createCallsService } from "./calls.service.ts";

const HOST = "api.example.com";

describe("executeCall's ticket", () => {
  it("names the organisation the call is made for", async () => {
    const { privateKey, publicKey } = generateKeyPairSync("ed25519");
    const publicKeyRaw = rawEd25519PublicKey(publicKey);
    const minter = createTicketMinter({
      key: { keyId: deriveTicketKeyId(publicKeyRaw), privateKey, publicKeyRaw },
      issuer: "test",
      audience: "latch-egress",
    });
    const sent: SignedTicket[] = [];
    const egress = {
      execute: async (ticket: SignedTicket): Promise<ExecuteResponse> => {
        sent.push(ticket);
        return {
          reachedOrigin: true,
          originStatus: 200,
          body: Buffer.from("{}"),
          headers: [],
        } as unknown as ExecuteResponse;
      },
    } as unknown as EgressClient;
    const calls = createCallsService({
      findItemByName: async () => undefined,
      findItemsByHost: async () => [],
      recordEvent: async () => {},
      minter,
      egress,
    });
    const item = {
      id: "itm_1",
      name: "API_KEY",
      allowedHosts: [HOST],
      inject: "bearer",
      username: null,
      sealingKeyId: "k",
      sealedValue: new Uint8Array([1]),
    };
    await calls.executeCall(
      { organisationId: "org_7f3a", environment: "staging", actor: "agent:a" },
      { method: "GET", path: "/v1/me" },
      { item, host: HOST, path: "/v1/me" },
      { release: async () => {} },
    );
    expect(sent).toHaveLength(1);
    const ticket = Ticket.decode(sent[0]!.payload);
    expect(ticket.call?.host).toBe(HOST);
    expect(ticket.organisationId).toBe("org_7f3a");
  });
});
