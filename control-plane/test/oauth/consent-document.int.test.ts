// The consent page of a client ID metadata document client never fetches the document again: it
// shows and records the client /oauth/authorize resolved (in oidc-provider's own request, under spec
// 8's limits), kept with the interaction in the shared database. A replica that never saw the
// document, or one whose copy is past its cache (300 s here), answers /consent from that, even when
// the document host's hourly limit is full; only the resume, oidc-provider's own request again, may
// be refused, and then with the limit's 429 and Retry-After (spec 7), never a 500.
import { randomBytes } from "node:crypto";
import { sha256Hex } from "@latch/shared/crypto/hash";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { testDatabase } from "../database.ts";
import { Browser, type HostedHarness, readyOperator, startHosted } from "../hosted.ts";
import {
  consentUid,
  forgetDocumentFetches,
  fromAddress,
  openAuthorize,
  pathOf,
  testAddress,
} from "./oauth-flow.ts";

let a: HostedHarness;
let b: HostedHarness;
const HOST = "api.latch.test";
const REDIRECT = "https://agent.example/callback";

beforeAll(async () => {
  a = await startHosted();
  b = await startHosted({ replicaOf: a });
  a.egress.setHandler((req, res) => {
    const url = `https://${req.headers.host}${req.url}`;
    const name = req.url?.startsWith("/target/") ? "Target agent" : "Filler";
    // No Cache-Control: oidc-provider keeps the document its 300 s minimum.
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ client_id: url, client_name: name, redirect_uris: [REDIRECT] }));
  });
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});
afterEach(() => {
  vi.useRealTimers();
});

const documentUrl = (folder: string) => `https://${HOST}/${folder}/${randomBytes(6).toString("hex")}.json`;

/** The same operator's browser on `h`, asking from `address`. */
function browserOn(h: HostedHarness, signedIn: Browser, address: string): Browser {
  const browser = new Browser(h.app, undefined, address);
  for (const [name, value] of signedIn.cookies) browser.cookies.set(name, value);
  return browser;
}

describe("the consent page of a client metadata document client", () => {
  it("answers from what /oauth/authorize resolved, on any replica, past the cache, with the host's limit full", async () => {
    // A window of our own: the host's 30 per hour start from zero.
    a.clock.advance(3_600_000 + 60_000);
    await forgetDocumentFetches(HOST);
    const signedIn = await readyOperator(a);
    const address = testAddress();
    const onA = browserOn(a, signedIn, address);
    const target = documentUrl("target");
    const uid = consentUid(await openAuthorize(onA, target, REDIRECT));
    const shown = await onA.request("GET", `/consent/details?uid=${uid}`);
    expect(shown.statusCode, shown.body).toBe(200);
    expect(shown.json().client).toMatchObject({ name: "Target agent", metadata_host: HOST });

    // 29 more documents of the same host, from addresses of their own: the host's 30 are spent.
    const askers = [0, 1, 2].map(() => testAddress());
    for (let i = 0; i < 29; i++) {
      const opened = await openAuthorize(
        browserOn(a, new Browser(a.app), askers[i % 3]!),
        documentUrl("filler"),
        REDIRECT,
      );
      expect(opened.statusCode, opened.body.slice(0, 300)).toBe(303);
    }
    const limited = await fromAddress(a.app, testAddress()).inject({
      method: "GET",
      url: `/oauth/authorize?${new URLSearchParams({ client_id: documentUrl("filler"), redirect_uri: REDIRECT, response_type: "code", code_challenge: "x".repeat(43), code_challenge_method: "S256" })}`,
    });
    expect(limited.statusCode, limited.body.slice(0, 300)).toBe(429);

    // Replica B never fetched the document: its consent page shows the client all the same.
    const onB = browserOn(b, onA, address);
    const onOther = await onB.request("GET", `/consent/details?uid=${uid}`);
    expect(onOther.statusCode, onOther.body).toBe(200);
    expect(onOther.json().client).toMatchObject({ name: "Target agent", metadata_host: HOST });

    // Past replica A's 300 s cache, inside the interaction's 600 s: the page and the answer work.
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 360_000);
    const later = await onA.request("GET", `/consent/details?uid=${uid}`);
    expect(later.statusCode, later.body).toBe(200);
    expect(later.json().client.name).toBe("Target agent");
    const organisationId = later.json().organisations[0].id as string;
    const decided = await onA.request(
      "POST",
      "/consent",
      { uid, decision: "approve", organisation_id: organisationId },
      { accept: "application/json" },
    );
    expect(decided.statusCode, decided.body).toBe(200);
    // The agent is recorded under the name the operator was shown.
    const clients = (await onA.request("GET", "/api/access")).json().clients as { name: string }[];
    expect(clients.map((c) => c.name)).toContain("Target agent");

    // The resume is oidc-provider's own request: the document is due again there, and the host's
    // limit refuses it as a limit (spec 7), saying when to come back.
    const resumed = await onA.request("GET", pathOf(decided.json().location));
    expect(resumed.statusCode, resumed.body.slice(0, 300)).toBe(429);
    expect(resumed.body).toContain("(rate_limited)");
    expect(Number(resumed.headers["retry-after"])).toBeGreaterThan(0);
  }, 60_000);

  it("refuses an interaction whose client was never kept as expired (404), never resolving it", async () => {
    a.clock.advance(3_600_000 + 60_000);
    const op = browserOn(a, await readyOperator(a), testAddress());
    const uid = consentUid(await openAuthorize(op, documentUrl("target"), REDIRECT));
    const { db } = await testDatabase();
    await db
      .deleteFrom("oauth_artifacts")
      .where("model", "=", "InteractionClient")
      .where("id_hash", "=", sha256Hex(uid))
      .execute();
    const shown = await op.request("GET", `/consent/details?uid=${uid}`);
    expect(shown.statusCode, shown.body).toBe(404);
    expect(shown.json().error.message).toMatch(/expired/);
  });
});
