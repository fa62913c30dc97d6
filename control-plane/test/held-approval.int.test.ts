// A retry while a one-call approval is held (DECISIONS "No approval is lost to a fault"): the first
// try's proxy did not answer and its fence waits, so the approval is spent and names its call's
// ticket. A retry of the same call is that call's, answered "held" with its grant, and opens no
// second request: an operator approving a second one would let the call go twice once the first
// approval comes back. A different call, or the same one after its outcome was written, asks anew.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGrantsRepo } from "../src/grants/grants.repo.ts";
import { connectAgent, type HostedHarness, listenHosted, operatorWithClient, toolAnswer } from "./hosted.ts";

let h: HostedHarness;
let url: string;
let originCalls = 0;

beforeAll(async () => {
  ({ h, url } = await listenHosted((_req, res) => {
    originCalls += 1;
    res.writeHead(200, { "content-type": "application/json" });
    res.end("{}");
  }));
}, 60_000);
afterAll(async () => {
  await h.close();
});

const PAYMENT = {
  item_name: "API_KEY",
  host: "api.latch.test",
  method: "POST",
  path: "/v1/payments?idempotent=no",
  body: { amount: 100 },
};

describe("a retry while a one-call approval is held", () => {
  it("answers held with the first grant, opens no second request, and mails nobody", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: "sk_live_held_canary_4242",
      items: [{ name: "API_KEY" }],
      clientName: "payments agent",
    });
    const agent = await connectAgent(url, token);
    try {
      const asked = toolAnswer(await agent.callTool({ name: "http_request", arguments: PAYMENT }));
      expect(asked.status).toBe("pending");
      const grantId = asked.grant_id!;
      const approved = await op.request("POST", `/api/grants/${grantId}/approve`, { policy: "prompt" });
      expect(approved.statusCode, approved.body).toBe(200);
      // The first try as a proxy that never answered leaves it: spent, its ticket named, the fence
      // pending (calls.service.ts answers "held" and does not settle).
      const grants = createGrantsRepo(h.plane.database.db);
      expect(await grants.updateGrantConsumed(grantId, new Date())).toBe(true);
      await grants.updateGrantCallTicket(grantId, "tkt_held_first_try", new Date(Date.now() + 11_500), true);
      const mailsBefore = h.inbox.mails.length;

      const retried = await agent.callTool({ name: "http_request", arguments: PAYMENT });
      const retry = toolAnswer(retried) as Record<string, unknown>;
      expect(retried.isError).toBe(true);
      expect(retry).toMatchObject({
        grant_id: grantId,
        approval: "held",
        approval_kept: false,
        request: "not_known_yet",
        error: { code: "egress_unavailable" },
        next: { tool: "http_request", arguments: PAYMENT },
      });
      expect(String(retry.hint)).toMatch(/held/);
      expect(originCalls).toBe(0);
      const listed = (await op.request("GET", "/api/grants")).json().grants as { grant_id: string }[];
      expect(listed.map((g) => g.grant_id)).toEqual([grantId]);
      expect(h.inbox.mails.length).toBe(mailsBefore);

      // Another call (another body) is another request, held or not.
      const other = toolAnswer(
        await agent.callTool({ name: "http_request", arguments: { ...PAYMENT, body: { amount: 200 } } }),
      );
      expect(other.status).toBe("pending");
      expect(other.grant_id).not.toBe(grantId);

      // Once the first try's outcome is written (the fence lost: it may have left), the same call
      // asks the operator again.
      await grants.updateGrantCallSettled(grantId, "tkt_held_first_try");
      const again = toolAnswer(await agent.callTool({ name: "http_request", arguments: PAYMENT }));
      expect(again.status).toBe("pending");
      expect(again.grant_id).not.toBe(grantId);
    } finally {
      await agent.close();
    }
  });
});
