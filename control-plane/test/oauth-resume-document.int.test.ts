// The resume of an authorization after /consent (GET /oauth/authorize/:uid, oidc-provider's own
// request) resolves the client again. For a client ID metadata document client it must be the
// document the operator was shown and consented to: never fetched again (on another replica, or past
// the cache), so that a document changed, gone or refused since cannot fail an authorization whose
// consent is already recorded, nor spend spec 8's counts a second time.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Browser, type HostedHarness, readyOperator, startHosted } from "./hosted.ts";
import { consentUid, forgetDocumentFetches, openAuthorize, pathOf, testAddress } from "./oauth/oauth-flow.ts";

let a: HostedHarness;
let b: HostedHarness;
const HOST = "docs.latch.test";
const REDIRECT = "https://agent.example/callback";
/** Every document URL the test origin was asked for. */
const fetched: string[] = [];
/** What the document host answers now. */
let serving: "consented" | "changed" | "gone" = "consented";

beforeAll(async () => {
  a = await startHosted();
  b = await startHosted({ replicaOf: a });
  a.egress.setHandler((req, res) => {
    const url = `https://${req.headers.host}${req.url}`;
    fetched.push(url);
    if (serving === "gone") {
      res.statusCode = 404;
      res.end("not found");
      return;
    }
    res.setHeader("content-type", "application/json");
    const document =
      serving === "consented"
        ? { client_id: url, client_name: "Consented agent", redirect_uris: [REDIRECT] }
        : // A scheme that is not reverse-domain: refused by spec 5 rule 2.
          { client_id: url, client_name: "Changed agent", redirect_uris: ["x-evil://agent.example/cb"] };
    res.end(JSON.stringify(document));
  });
});
afterAll(async () => {
  await forgetDocumentFetches(HOST);
  await b?.close();
  await a?.close();
});

/** The same operator's browser on `h`, asking from `address`. */
function browserOn(h: HostedHarness, signedIn: Browser, address: string): Browser {
  const browser = new Browser(h.app, undefined, address);
  for (const [name, value] of signedIn.cookies) browser.cookies.set(name, value);
  return browser;
}

describe("the resume of a client metadata document client's authorization", () => {
  for (const change of ["changed", "gone"] as const) {
    it(`uses the document consented to, not fetched again, when it has ${change === "changed" ? "changed" : "gone"} since`, async () => {
      a.clock.advance(3_600_000 + 60_000);
      await forgetDocumentFetches(HOST);
      serving = "consented";
      const address = testAddress();
      const onA = browserOn(a, await readyOperator(a), address);
      const documentUrl = `https://${HOST}/resume/${randomBytes(6).toString("hex")}.json`;
      const uid = consentUid(await openAuthorize(onA, documentUrl, REDIRECT));
      const shown = await onA.request("GET", `/consent/details?uid=${uid}`);
      expect(shown.statusCode, shown.body).toBe(200);
      expect(shown.json().client.name).toBe("Consented agent");
      const decided = await onA.request(
        "POST",
        "/consent",
        { uid, decision: "approve", organisation_id: shown.json().organisations[0].id },
        { accept: "application/json" },
      );
      expect(decided.statusCode, decided.body).toBe(200);
      expect(fetched.filter((url) => url === documentUrl)).toHaveLength(1);

      // The host answers otherwise now; the browser resumes on replica B, which never saw it.
      serving = change;
      const resumed = await browserOn(b, onA, address).request("GET", pathOf(decided.json().location));
      expect(resumed.statusCode, resumed.body.slice(0, 400)).toBe(303);
      const redirect = new URL(String(resumed.headers.location));
      expect(`${redirect.origin}${redirect.pathname}`).toBe(REDIRECT);
      const code = redirect.searchParams.get("code");
      expect(code).toBeTruthy();
      expect(fetched.filter((url) => url === documentUrl)).toHaveLength(1);
    }, 60_000);
  }
});
