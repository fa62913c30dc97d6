// The access snapshot's grants (spec 4.3 "Access", public/docs/approvals.md "What is in force"):
// the newest grants and every approval still in force. An agent's stream of new requests (30 an
// hour, spec 8) must not push an older standing approval out of the list an operator reads to see
// who may reach what.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HostedHarness, operatorWithClient, startHosted } from "../../test/hosted.ts";

let h: HostedHarness;

beforeAll(async () => {
  h = await startHosted();
}, 60_000);
afterAll(async () => {
  await h.close();
});

/** POST /api/grants/request with the model client's bearer: a pending grant (or the covering one). */
async function requestGrant(token: string, itemName: string, path: string) {
  const answer = await h.app.inject({
    method: "POST",
    url: "/api/grants/request",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    payload: JSON.stringify({ item_name: itemName, host: "api.latch.test", method: "GET", path }),
  });
  expect([200, 201], answer.body).toContain(answer.statusCode);
  return answer.json().grant as { grant_id: string; status: string };
}

describe("GET /api/access", () => {
  it("lists a standing approval in force after more than 200 newer requests", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: "sk_live_access_snapshot_7c21",
      items: [{ name: "KEPT_KEY" }, { name: "NOISY_KEY" }],
      clientName: "access agent",
    });
    const standing = await requestGrant(token, "KEPT_KEY", "/v1/kept");
    const approved = await op.request("POST", `/api/grants/${standing.grant_id}/approve`, {
      policy: "item_standing",
      scope: "credential",
    });
    expect(approved.statusCode, approved.body).toBe(200);

    // 200 newer requests, 30 an hour (the limit of spec 8), each a new pending grant.
    for (let n = 0; n < 200; n++) {
      if (n % 30 === 0) h.clock.advance(61 * 60_000);
      expect((await requestGrant(token, "NOISY_KEY", `/v1/noise/${n}`)).status).toBe("pending");
    }

    const snapshot = await op.request("GET", "/api/access");
    expect(snapshot.statusCode, snapshot.body).toBe(200);
    const grants = snapshot.json().grants as { grant_id: string; status: string; created_at: string }[];
    expect(grants.find((grant) => grant.grant_id === standing.grant_id)).toMatchObject({
      status: "active",
      policy: "item_standing",
      item_name: "KEPT_KEY",
      item_id: expect.stringMatching(/^itm_/),
    });
    // Still the newest first, each grant once.
    const created = grants.map((grant) => grant.created_at);
    expect(created).toEqual([...created].sort().reverse());
    expect(new Set(grants.map((grant) => grant.grant_id)).size).toBe(grants.length);
    expect(grants.length).toBe(201);
  }, 120_000);
});
