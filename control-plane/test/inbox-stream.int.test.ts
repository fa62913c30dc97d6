// The live inbox (DECISIONS "Approvals that reach the operator"): GET /api/inbox/stream sends an
// event within 1 s of a request or a decision, only to the operator's organisation, and a dropped
// stream that reconnects with Last-Event-ID (to another replica, too) misses nothing.
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  connectAgent,
  type HostedHarness,
  listenHosted,
  operatorWithClient,
  startHosted,
  toolAnswer,
} from "./hosted.ts";
import { openEventStream } from "./sse.ts";
import { joinAs } from "./teams.ts";

const SECRET = "sk_live_inbox_stream_canary_52c9";
let h: HostedHarness;
let url: string;
let replica: HostedHarness;
let replicaUrl: string;

beforeAll(async () => {
  ({ h, url } = await listenHosted((_req, res) => res.end("ok")));
  replica = await startHosted({ replicaOf: h });
  replicaUrl = await replica.app.listen({ host: "127.0.0.1", port: 0 });
}, 60_000);
afterAll(async () => {
  await replica.close();
  await h.close();
});

async function setUp() {
  const { op, clientId, token } = await operatorWithClient(h, {
    secret: SECRET,
    items: [{ name: "API_KEY" }],
    clientName: "stream agent",
  });
  return { op, clientId, agent: await connectAgent(url, token) };
}

const ask = (agent: Client, path: string) =>
  agent
    .callTool({
      name: "http_request",
      arguments: { item_name: "API_KEY", method: "POST", path, body: { n: 1 } },
    })
    .then(toolAnswer);

describe("GET /api/inbox/stream", () => {
  it("sends approval_requested, approval_decided and need_created within 1 s, without a secret or the approval code", async () => {
    const { op, clientId, agent } = await setUp();
    const stream = await openEventStream(`${url}/api/inbox/stream`, op);
    expect(stream.status).toBe(200);
    const ready = await stream.next("ready");
    expect(Number(ready.id)).toBeGreaterThan(0);

    const asked = await ask(agent, "/v1/live");
    const answeredAt = performance.now();
    const requested = await stream.next("approval_requested", 1_000);
    expect(requested.at - answeredAt).toBeLessThan(1_000);
    expect(requested.data).toMatchObject({
      grant_id: asked.grant_id,
      agent: { id: clientId, name: "stream agent" },
      item_name: "API_KEY",
      host: "api.latch.test",
      method: "POST",
      path: "/v1/live",
    });
    expect(Number(requested.id)).toBeGreaterThan(Number(ready.id));

    const approving = performance.now();
    await op.request("POST", `/api/grants/${asked.grant_id}/approve`, { policy: "prompt" });
    const decided = await stream.next("approval_decided", 1_000);
    expect(decided.at - approving).toBeLessThan(1_000);
    expect(decided.data).toMatchObject({ grant_id: asked.grant_id, decision: "approved", policy: "prompt" });

    const miss = toolAnswer(
      await agent.callTool({ name: "find_items", arguments: { host: "missing.latch.test" } }),
    );
    const created = await stream.next("need_created", 1_000);
    expect(created.data).toMatchObject({ need_id: miss.need_id, host: "missing.latch.test", kind: "secret" });
    await op.request("POST", `/api/need-items/${miss.need_id}/deny`);
    expect((await stream.next("need_closed", 1_000)).data).toMatchObject({
      need_id: miss.need_id,
      status: "denied",
    });

    const wire = JSON.stringify(stream.events);
    expect(wire).not.toContain(SECRET);
    expect(wire).not.toContain(asked.approval_code);
    stream.close();
    await agent.close();
  });

  it("sends another organisation's stream nothing", async () => {
    const mine = await setUp();
    const theirs = await setUp();
    const stream = await openEventStream(`${url}/api/inbox/stream`, theirs.op);
    await stream.next("ready");
    const own = await openEventStream(`${url}/api/inbox/stream`, mine.op);
    await own.next("ready");
    await ask(mine.agent, "/v1/not-yours");
    await own.next("approval_requested", 1_000);
    // Two more polls of the ledger: the other organisation's stream has had every chance to see it.
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect(stream.events.map((e) => e.type)).toEqual(["ready"]);
    stream.close();
    own.close();
    await mine.agent.close();
    await theirs.agent.close();
  });

  it("resumes with Last-Event-ID on another replica and misses nothing, repeats nothing", async () => {
    const { op, agent } = await setUp();
    const first = await openEventStream(`${url}/api/inbox/stream`, op);
    await first.next("ready");
    const one = await ask(agent, "/v1/one");
    const seen = await first.next("approval_requested", 1_000);
    expect(seen.data.grant_id).toBe(one.grant_id);
    first.close();

    // While no stream is open: two requests and a decision.
    const two = await ask(agent, "/v1/two");
    const three = await ask(agent, "/v1/three");
    await op.request("POST", `/api/grants/${two.grant_id}/revoke`);

    const resumed = await openEventStream(`${replicaUrl}/api/inbox/stream`, op, { lastEventId: seen.id });
    await resumed.next("ready");
    const replayed = [await resumed.next(), await resumed.next(), await resumed.next()];
    expect(replayed.map((e) => [e.type, e.data.grant_id])).toEqual([
      ["approval_requested", two.grant_id],
      ["approval_requested", three.grant_id],
      ["approval_decided", two.grant_id],
    ]);
    expect(replayed[2]?.data.decision).toBe("denied");
    const ids = replayed.map((e) => Number(e.id));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(ids[0]).toBeGreaterThan(Number(seen.id));
    // And it follows on: a request made through the first replica reaches this stream.
    const four = await ask(agent, "/v1/four");
    expect((await resumed.next("approval_requested", 1_000)).data.grant_id).toBe(four.grant_id);
    resumed.close();
    await agent.close();
  });

  it("a replica shutting down ends its streams at once; resumed on another, nothing is missed", async () => {
    const { op, agent } = await setUp();
    const leaving = await startHosted({ replicaOf: h });
    const leavingUrl = await leaving.app.listen({ host: "127.0.0.1", port: 0 });
    const stream = await openEventStream(`${leavingUrl}/api/inbox/stream`, op);
    await stream.next("ready");
    const before = await ask(agent, "/v1/before-restart");
    const seen = await stream.next("approval_requested", 1_000);
    expect(seen.data.grant_id).toBe(before.grant_id);

    // The open stream must not hold the shutdown up (a hijacked response Fastify cannot see).
    const started = Date.now();
    await leaving.close();
    expect(Date.now() - started).toBeLessThan(5_000);
    await expect.poll(() => stream.isEnded, { timeout: 2_000, interval: 50 }).toBe(true);

    // Asked while no replica streams to this operator, then resumed on a surviving replica.
    const during = await ask(agent, "/v1/during-restart");
    const resumed = await openEventStream(`${replicaUrl}/api/inbox/stream`, op, { lastEventId: seen.id });
    await resumed.next("ready");
    const next = await resumed.next("approval_requested", 1_000);
    expect(next.data.grant_id).toBe(during.grant_id);
    expect(resumed.events.filter((e) => e.data?.grant_id === before.grant_id)).toEqual([]);
    resumed.close();
    await agent.close();
  }, 30_000);

  it("one session opening many streams at once gets 8, the rest 429; a closed one frees its place", async () => {
    const { op, agent } = await setUp();
    const streams = await Promise.all(
      Array.from({ length: 12 }, () => openEventStream(`${url}/api/inbox/stream`, op)),
    );
    const open = streams.filter((s) => s.status === 200);
    expect(open).toHaveLength(8);
    expect(streams.filter((s) => s.status === 429)).toHaveLength(4);
    open[0]!.close();
    await expect
      .poll(
        async () => {
          const again = await openEventStream(`${url}/api/inbox/stream`, op);
          again.close();
          return again.status;
        },
        { timeout: 5_000, interval: 100 },
      )
      .toBe(200);
    for (const stream of open) stream.close();
    await agent.close();
  });

  it("a stream that dropped before any event resumes from its ready id", async () => {
    const { op, agent } = await setUp();
    const first = await openEventStream(`${url}/api/inbox/stream`, op);
    const ready = await first.next("ready");
    first.close();
    const missed = await ask(agent, "/v1/while-away");
    const resumed = await openEventStream(`${url}/api/inbox/stream`, op, { lastEventId: ready.id });
    await resumed.next("ready");
    expect((await resumed.next("approval_requested", 1_000)).data.grant_id).toBe(missed.grant_id);
    resumed.close();
    await agent.close();
  });

  it("reads an id from the future (another organisation's, or made up) as now", async () => {
    const { op, agent } = await setUp();
    const stream = await openEventStream(`${url}/api/inbox/stream`, op, { lastEventId: "999999999" });
    const ready = await stream.next("ready");
    expect(Number(ready.id)).toBeLessThan(999_999_999);
    const asked = await ask(agent, "/v1/after-future");
    expect((await stream.next("approval_requested", 1_000)).data.grant_id).toBe(asked.grant_id);
    stream.close();
    await agent.close();
  });

  it("ends for a member removed from the organisation, at the session's next check", async () => {
    const { op, agent } = await setUp();
    const approver = await joinAs(h, op, "approver", "stream-approver");
    const stream = await openEventStream(`${url}/api/inbox/stream`, approver.browser);
    await stream.next("ready");
    await ask(agent, "/v1/before-removal");
    await stream.next("approval_requested", 1_000);
    const removed = await op.request("DELETE", `/api/orgs/members/${approver.operatorId}`);
    expect(removed.statusCode, removed.body).toBe(200);
    await expect.poll(() => stream.isEnded, { timeout: 15_000, interval: 100 }).toBe(true);
    // Opened again, it follows the organisation the session acts in now, never the one it left.
    const reopened = await openEventStream(`${url}/api/inbox/stream`, approver.browser);
    if (reopened.status === 200) {
      await reopened.next("ready");
      await ask(agent, "/v1/after-removal");
      await new Promise((resolve) => setTimeout(resolve, 700));
      expect(reopened.events.map((e) => e.type)).toEqual(["ready"]);
    }
    reopened.close();
    await agent.close();
  }, 30_000);
});
