// Limits hold across two control-plane instances on one PostgreSQL (run when DATABASE_URL is set):
// email code sends, wrong-code voiding and the authenticator lockout are counted in the database.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  Browser,
  connectAgent,
  type HostedHarness,
  lastCodeFor,
  readyOperator,
  startHosted,
  toolAnswer,
  uniqueEmail,
} from "./hosted.ts";

describe.skipIf(!process.env.DATABASE_URL)("two replicas on one PostgreSQL", () => {
  let a: HostedHarness;
  let b: HostedHarness;
  beforeAll(async () => {
    a = await startHosted();
    b = await startHosted({ replicaOf: a });
  }, 60_000);
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it("counts five sends per email across both, and a code sent by one verifies on the other", async () => {
    const email = uniqueEmail("replica");
    const onA = new Browser(a.app);
    const onB = new Browser(b.app);
    const sends = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        (i % 2 ? onA : onB).request("POST", "/api/auth/otp/send", { email }),
      ),
    );
    expect(sends.filter((r) => r.statusCode === 200)).toHaveLength(5);
    expect(sends.filter((r) => r.statusCode === 429)).toHaveLength(3);
    const verified = await onA.request("POST", "/api/auth/otp/verify", {
      email,
      otp: lastCodeFor(a.inbox, email),
    });
    expect(verified.statusCode).toBe(200);
    // Single use across replicas.
    expect(
      (await onB.request("POST", "/api/auth/otp/verify", { email, otp: lastCodeFor(a.inbox, email) }))
        .statusCode,
    ).toBe(401);
  });

  it("voids a code after five wrong attempts spread over both", async () => {
    const email = uniqueEmail("replica-wrong");
    const onA = new Browser(a.app);
    const onB = new Browser(b.app);
    await onA.request("POST", "/api/auth/otp/send", { email });
    const good = lastCodeFor(a.inbox, email);
    const wrong = good === "00000000" ? "11111111" : "00000000";
    const answers = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        (i % 2 ? onA : onB).request("POST", "/api/auth/otp/verify", { email, otp: wrong }),
      ),
    );
    expect(answers.map((r) => r.json().error.attempts_remaining).sort()).toEqual([0, 1, 2, 3, 4]);
    expect((await onB.request("POST", "/api/auth/otp/verify", { email, otp: good })).statusCode).toBe(401);
  });
});

describe.skipIf(!process.env.DATABASE_URL)("the vault on two replicas", () => {
  let a: HostedHarness;
  let b: HostedHarness;
  let urlA: string;
  let urlB: string;
  beforeAll(async () => {
    a = await startHosted();
    b = await startHosted({ replicaOf: a });
    urlA = await a.app.listen({ host: "127.0.0.1", port: 0 });
    urlB = await b.app.listen({ host: "127.0.0.1", port: 0 });
    a.egress.setHandler((_req, res) => res.end("ok"));
  }, 60_000);
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  const agent = (url: string, token: string) => connectAgent(url, token, "replica-agent");

  it("sends one request upstream for 20 simultaneous calls on one prompt grant, spread over both", async () => {
    const op = await readyOperator(a);
    await op.request("POST", "/api/items", {
      name: "SHARED_KEY",
      value: "sk_replica_value_0123456789",
      environment: "staging",
      allowed_hosts: ["api.latch.test"],
    });
    const token = (await op.request("POST", "/api/clients/model", { environment: "staging" })).json().token;
    const onA = await agent(urlA, token);
    const onB = await agent(urlB, token);
    const args = { method: "GET", path: "/v1/x", item_name: "SHARED_KEY" };
    const payload = toolAnswer;
    const pending = payload(await onA.callTool({ name: "http_request", arguments: args }));
    await op.request("POST", "/api/grants/approve-by-code", { code: pending.approval_code });
    const before = a.egress.origin.requests.length;
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        (i % 2 ? onA : onB).callTool({ name: "http_request", arguments: args }).then(payload),
      ),
    );
    expect(answers.filter((x) => x.origin_status === 200)).toHaveLength(1);
    expect(a.egress.origin.requests.length - before).toBe(1);
    await onA.close();
    await onB.close();
  });

  it("answers the 31st approval request in an hour with 429 on either replica", async () => {
    const op = await readyOperator(a);
    await op.request("POST", "/api/items", {
      name: "LIMITED_KEY",
      value: "sk_replica_value_0123456789",
      environment: "staging",
      allowed_hosts: ["api.latch.test"],
    });
    const onB = new Browser(b.app);
    for (const [k, v] of op.cookies) onB.cookies.set(k, v);
    const statuses = await Promise.all(
      Array.from({ length: 31 }, (_, i) =>
        (i % 2 ? op : onB)
          .request("POST", "/api/grants/request", {
            item_name: "LIMITED_KEY",
            agent_id: `agent-${i}`,
            environment: "staging",
          })
          .then((r) => r.statusCode),
      ),
    );
    expect(statuses.filter((s) => s === 201)).toHaveLength(30);
    expect(statuses.filter((s) => s === 429)).toHaveLength(1);
  });
});
