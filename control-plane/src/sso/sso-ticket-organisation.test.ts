// Single sign-on's fetches go out as the organisation's own (Ticket.organisation_id): the discovery
// document (at a sign-in and when an owner saves the connection), the JWKS, and the DNS TXT lookups
// that prove a domain. The real ticket minter; a recording stand-in for the proxy answers them.
import { generateKeyPairSync } from "node:crypto";
import { type FetchDocumentResponse, type SignedTicket, Ticket } from "@latch/proto/egress";
import { deriveTicketKeyId, rawEd25519PublicKey } from "@latch/shared/tickets/ticket-signature";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { describe, expect, it } from "vitest";
import { createTicketMinter } from "../egress/tickets.ts";
import { createTxtLookup } from "./domain-records.ts";
import { type ConnectionKeys, createRelyingParty } from "./oidc-relying-party.ts";

const ISSUER = "https://idp.example.com";

function minter() {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  const publicKeyRaw = rawEd25519PublicKey(publicKey);
  const key = { keyId: deriveTicketKeyId(publicKeyRaw), privateKey, publicKeyRaw };
  return createTicketMinter({ key, issuer: "test", audience: "latch-egress" });
}

/** Each ticket sent, as the proxy would read it: the path it fetches and whom it is for. */
function sentOf(tickets: SignedTicket[]) {
  return tickets.map((signed) => {
    const ticket = Ticket.decode(signed.payload);
    return { path: ticket.document?.path ?? ticket.call?.path, organisationId: ticket.organisationId };
  });
}

function document(body: unknown): FetchDocumentResponse {
  return {
    reachedOrigin: true,
    originStatus: 200,
    body: Buffer.from(JSON.stringify(body)),
    contentType: "application/json",
    cacheControl: "",
    error: undefined,
    durationMs: 1,
  };
}

const discovery = {
  issuer: ISSUER,
  authorization_endpoint: `${ISSUER}/authorize`,
  token_endpoint: `${ISSUER}/token`,
  jwks_uri: `${ISSUER}/jwks`,
  response_types_supported: ["code"],
  id_token_signing_alg_values_supported: ["ES256"],
};

describe("the organisation of single sign-on's tickets", () => {
  it("names the connection's organisation on discovery, JWKS and the code exchange", async () => {
    const { privateKey, publicKey } = await generateKeyPair("ES256");
    const jwks = { keys: [{ ...(await exportJWK(publicKey)), kid: "k1", alg: "ES256", use: "sig" }] };
    const idToken = await new SignJWT({ nonce: "n0nce", email: "ada@example.com" })
      .setProtectedHeader({ alg: "ES256", kid: "k1" })
      .setIssuer(ISSUER)
      .setAudience("latch-client")
      .setSubject("ada")
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(privateKey);
    const tickets: SignedTicket[] = [];
    const relyingParty = createRelyingParty({
      minter: minter(),
      now: () => new Date(),
      egress: {
        fetchDocument: async (ticket) => {
          tickets.push(ticket);
          const path = Ticket.decode(ticket.payload).document?.path;
          return document(path === "/jwks" ? jwks : discovery);
        },
        execute: async (ticket) => {
          tickets.push(ticket);
          return {
            reachedOrigin: true,
            originStatus: 200,
            body: Buffer.alloc(0),
            bodyTruncated: false,
            headers: [],
            error: undefined,
            durationMs: 1,
            rotatedCredentials: [],
            idToken,
          };
        },
      },
    });
    const keys: ConnectionKeys = {
      issuer: ISSUER,
      clientId: "latch-client",
      clientSecret: {
        itemName: "SSO client secret",
        keyId: "k",
        sealedValue: Buffer.from("s"),
        username: "",
      },
      organisationId: "org_sso",
    };
    const claims = await relyingParty.finish(
      keys,
      new URL(`https://latch.example/sso/callback?code=c0de&state=st4te&iss=${encodeURIComponent(ISSUER)}`),
      {
        state: "st4te",
        nonce: "n0nce",
        verifier: { itemName: "PKCE verifier", keyId: "k", sealedValue: Buffer.from("v"), username: "" },
      },
    );
    expect(claims.sub).toBe("ada");
    expect(sentOf(tickets)).toEqual([
      { path: "/.well-known/openid-configuration", organisationId: "org_sso" },
      { path: "/token", organisationId: "org_sso" },
      { path: "/jwks", organisationId: "org_sso" },
    ]);
  });

  it("names the organisation saving a connection on its discovery, and keeps the document by issuer", async () => {
    const tickets: SignedTicket[] = [];
    const relyingParty = createRelyingParty({
      minter: minter(),
      now: () => new Date(),
      egress: {
        fetchDocument: async (ticket) => {
          tickets.push(ticket);
          return document(discovery);
        },
        execute: () => Promise.reject(new Error("no exchange here")),
      },
    });
    await relyingParty.serverMetadata(ISSUER, "org_saving");
    // Another organisation naming the same issuer reads the cached document: nothing is fetched.
    await relyingParty.serverMetadata(ISSUER, "org_other");
    expect(sentOf(tickets)).toEqual([
      { path: "/.well-known/openid-configuration", organisationId: "org_saving" },
    ]);
  });

  it("names the organisation proving a domain on its DNS TXT lookup", async () => {
    const tickets: SignedTicket[] = [];
    const lookUpTxt = createTxtLookup({
      minter: minter(),
      dnsUrl: "https://dns.example.net/resolve",
      egress: {
        fetchDocument: async (ticket) => {
          tickets.push(ticket);
          return document({
            Status: 0,
            Answer: [{ type: 16, data: '"latch-verification=t0k"' }],
          });
        },
      },
    });
    expect(await lookUpTxt("_latch-verification.example.com", "org_domains")).toEqual([
      "latch-verification=t0k",
    ]);
    expect(sentOf(tickets)).toEqual([
      { path: "/resolve?name=_latch-verification.example.com&type=TXT", organisationId: "org_domains" },
    ]);
  });
});
