// The consent page of a client ID metadata document client never fetches the document again: it
// shows and records the client /oauth/authorize resolved (in oidc-provider's own request, under spec
// 8's limits), kept with the interaction in the shared database. A replica that never saw the
// document, or one whose copy is past its cache (300 s here), answers /consent from that. Strangers
// asking for made-up document URLs on the same host (each a 404) spend at most 20 of the host's 30
// fetches an hour: the real client, whose document was valid within the hour, still authorizes and
// resumes, on any replica, and a URL that failed is not fetched again within the hour.
import { randomBytes } from "node:crypto";
import { sha256Hex } from "@latch/shared/crypto/hash";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { CIMD_FAILED_FETCHES_PER_HOST } from "../../src/oauth/cimd-fetch.ts";
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
/** Every document URL the test origin was asked for. */
const fetched: string[] = [];

beforeAll(async () => {
  a = await startHosted();
  b = await startHosted({ replicaOf: a });
  a.egress.setHandler((req, res) => {
    const url = `https://${req.headers.host}${req.url}`;
    fetched.push(url);
    // A stranger's made-up paths on the real client's host: no document there.
    if (req.url?.startsWith("/filler/")) {
      res.statusCode = 404;
      res.end("not found");
      return;
    }
    const name = "Target agent";
    // No Cache-Control: oidc-provider keeps the document its 300 s minimum.
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ client_id: url, client_name: name, redirect_uris: [REDIRECT] }));
  });
});
afterAll(async () => {
  // Other files count this host's failed fetches too, on a PostgreSQL database kept between runs.
  await forgetHost();
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

/** Forgets the host's counted fetches, failed ones included (a PostgreSQL database kept between runs). */
async function forgetHost(): Promise<void> {
  await forgetDocumentFetches(HOST);
  const { db } = await testDatabase();
  await db
    .deleteFrom("rate_limit_hits")
    .where("bucket", "=", `${CIMD_FAILED_FETCHES_PER_HOST.name}:${HOST}`)
    .execute();
}

function authorizeFrom(h: HostedHarness, address: string, clientId: string) {
  return fromAddress(h.app, address).inject({
    method: "GET",
    url: `/oauth/authorize?${new URLSearchParams({ client_id: clientId, redirect_uri: REDIRECT, response_type: "code", code_challenge: "x".repeat(43), code_challenge_method: "S256" })}`,
  });
}

describe("the consent page of a client metadata document client", () => {
  it("answers from what /oauth/authorize resolved, on any replica, past the cache, with strangers' 404s on its host", async () => {
    // A window of our own: the host's 30 per hour start from zero.
    a.clock.advance(3_600_000 + 60_000);
    await forgetHost();
    const signedIn = await readyOperator(a);
    const address = testAddress();
    const onA = browserOn(a, signedIn, address);
    const target = documentUrl("target");
    const uid = consentUid(await openAuthorize(onA, target, REDIRECT));
    const shown = await onA.request("GET", `/consent/details?uid=${uid}`);
    expect(shown.statusCode, shown.body).toBe(200);
    expect(shown.json().client).toMatchObject({ name: "Target agent", metadata_host: HOST });

    // 29 made-up documents of the same host, from 3 addresses (10 per hour each): the first 20
    // fail and are counted; the host's last 10 are not theirs to spend.
    const askers = [0, 1, 2].map(() => testAddress());
    const fillers: string[] = [];
    for (let i = 0; i < 29; i++) {
      const filler = documentUrl("filler");
      fillers.push(filler);
      const opened = await openAuthorize(browserOn(a, new Browser(a.app), askers[i % 3]!), filler, REDIRECT);
      expect(opened.statusCode, opened.body.slice(0, 300)).toBe(i < 20 ? 400 : 429);
      if (i >= 20) expect(opened.body).toMatch(/failed client metadata document fetches from one host/);
    }
    expect(fetched.filter((url) => url.includes("/filler/"))).toHaveLength(20);
    const limited = await authorizeFrom(b, testAddress(), documentUrl("filler"));
    expect(limited.statusCode, limited.body.slice(0, 300)).toBe(429);
    expect(limited.body).toContain("(rate_limited)");
    expect(Number(limited.headers["retry-after"])).toBeGreaterThan(0);
    // A URL that failed is not fetched again within the hour, on either replica.
    const again = await authorizeFrom(b, testAddress(), fillers[0]!);
    expect(again.statusCode, again.body.slice(0, 300)).toBe(429);
    expect(fetched.filter((url) => url === fillers[0])).toHaveLength(1);

    // The real client's document was valid within the hour: replica B, which never fetched it,
    // fetches it for a new authorization all the same.
    const onB = browserOn(b, onA, address);
    const elsewhere = await openAuthorize(
      browserOn(b, await readyOperator(b), testAddress()),
      target,
      REDIRECT,
    );
    expect(elsewhere.statusCode, elsewhere.body.slice(0, 300)).toBe(303);

    // Replica B's consent page shows the client from what replica A's /oauth/authorize resolved.
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

    // The resume is oidc-provider's own request: past replica A's cache the document is due again,
    // and it is fetched from the places strangers' failures cannot spend. The agent gets its code.
    const resumed = await onA.request("GET", pathOf(decided.json().location));
    expect(resumed.statusCode, resumed.body.slice(0, 300)).toBe(303);
    const redirect = new URL(String(resumed.headers.location));
    expect(`${redirect.origin}${redirect.pathname}`).toBe(REDIRECT);
    expect(redirect.searchParams.get("code")).toBeTruthy();
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
