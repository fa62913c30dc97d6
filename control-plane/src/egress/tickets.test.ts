// A ticket names the organisation it acts for (Ticket.organisation_id), under the signature: the
// egress proxy keeps each organisation's upstream connections apart by it.
import { generateKeyPairSync, verify } from "node:crypto";
import { type CallSpec, Ticket } from "@latch/proto/egress";
import {
  deriveTicketKeyId,
  rawEd25519PublicKey,
  ticketSigningInput,
} from "@latch/shared/tickets/ticket-signature";
import { describe, expect, it } from "vitest";
import { createTicketMinter } from "./tickets.ts";

function setup() {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  const publicKeyRaw = rawEd25519PublicKey(publicKey);
  const key = { keyId: deriveTicketKeyId(publicKeyRaw), privateKey, publicKeyRaw };
  return { publicKey, minter: createTicketMinter({ key, issuer: "test", audience: "latch-egress" }) };
}

const call = {
  credential: { itemName: "API_KEY", keyId: "k", sealedValue: Buffer.from("sealed"), username: "" },
  inject: "bearer",
  host: "api.example.com",
  allowedHosts: ["api.example.com"],
  method: "GET",
  path: "/v1/ping",
  body: Buffer.alloc(0),
  contentType: "",
  timeoutMs: 10_000,
  headers: [],
  redact: [],
  exchange: undefined,
} satisfies CallSpec;

const document = {
  host: "client.example.com",
  path: "/oauth/client.json",
  timeoutMs: 3_000,
  maxBytes: 5_000,
};
const push = {
  host: "push.example.net",
  path: "/wpush/1",
  headers: [],
  body: Buffer.alloc(1),
  timeoutMs: 5_000,
};
const credential = call.credential;

describe("the organisation a ticket acts for", () => {
  it("is carried by every kind of ticket minted for one", () => {
    const { minter } = setup();
    const owner = { organisationId: "org_1" };
    const minted = [
      minter.mintCallTicket(call, owner),
      minter.mintCallTicket(call, { ...owner, ttlMs: 5_000, id: "fixed-id" }),
      minter.mintResolveTicket({ credential }, owner),
      minter.mintDocumentTicket(document, owner),
      minter.mintPushTicket(push, owner),
      minter.mintRewrapTicket({ values: [credential] }, owner),
    ];
    for (const signed of minted) expect(Ticket.decode(signed.payload).organisationId).toBe("org_1");
  });

  it("is empty for a ticket of no organisation (a client metadata document)", () => {
    const { minter } = setup();
    expect(Ticket.decode(minter.mintDocumentTicket(document).payload).organisationId).toBe("");
    expect(Ticket.decode(minter.mintCallTicket(call).payload).organisationId).toBe("");
  });

  it("is covered by the signature: a ticket moved to another organisation no longer verifies", () => {
    const { minter, publicKey } = setup();
    const signed = minter.mintCallTicket(call, { organisationId: "org_1" });
    const isValid = (payload: Uint8Array) =>
      verify(null, ticketSigningInput(payload), publicKey, signed.signature);
    expect(isValid(signed.payload)).toBe(true);
    const moved = Ticket.encode({ ...Ticket.decode(signed.payload), organisationId: "org_2" }).finish();
    expect(isValid(moved)).toBe(false);
  });
});
