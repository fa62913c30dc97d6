// The hosted core loop end to end: an operator stores a credential and issues a model token; the
// official MCP SDK client calls the hosted /mcp with it; approvals by code, standing folder grants,
// revocation, trusted resolve and the hourly limit (spec 3.1, 3.4, 4.1-4.3, 5, 8).
import { createHash, randomBytes } from "node:crypto";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  Browser,
  connectAgent,
  type HostedHarness,
  listenHosted,
  operatorWithClient,
  readyOperator,
  toolAnswer,
} from "./hosted.ts";

const SECRET = "sk_live_hostedloop_canary_77aa";
let h: HostedHarness;
let url: string;

beforeAll(async () => {
  ({ h, url } = await listenHosted((req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ auth: req.headers.authorization ?? null, path: req.url }));
  }));
}, 60_000);
afterAll(async () => {
  await h.close();
});

async function setUp(extraItems: Record<string, unknown>[] = []) {
  return operatorWithClient(h, {
    secret: SECRET,
    items: [{ name: "API_KEY", folder_name: "apis" }, ...extraItems],
    clientName: "test agent",
  });
}

const agentWith = (token: string) => connectAgent(url, token);

const payloadOf = toolAnswer;
const call = (agent: Client, item = "API_KEY") =>
  agent
    .callTool({ name: "http_request", arguments: { method: "GET", path: "/v1/data", item_name: item } })
    .then(payloadOf);

describe("the hosted MCP endpoint", () => {
  it("issues a model client: the avm_ token once, with the MCP address; only its hash is stored", async () => {
    const op = await readyOperator(h);
    const issued = await op.request("POST", "/api/clients/model", {
      name: "issued agent",
      environment: "staging",
    });
    expect(issued.statusCode).toBe(201);
    const client = issued.json();
    expect(client.token).toMatch(/^avm_/);
    expect(client.mcp_url).toBe("http://localhost:8787/mcp");
    const listed = (await op.request("GET", "/api/access")).json();
    expect(JSON.stringify(listed)).not.toContain(client.token);
    const rows = await h.plane.database.db.selectFrom("clients").selectAll().execute();
    expect(JSON.stringify(rows)).not.toContain(client.token);
  });

  it("answers 401 with WWW-Authenticate to any unauthenticated method, and 403 to a trusted token", async () => {
    for (const method of ["initialize", "ping", "tools/list", "tools/call"]) {
      const response = await fetch(`${url}/mcp`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method }),
      });
      expect(response.status).toBe(401);
      const challenge = response.headers.get("www-authenticate")!;
      expect(challenge).toContain(
        'resource_metadata="http://localhost:8787/.well-known/oauth-protected-resource/mcp"',
      );
      expect(challenge).toContain('scope="mcp"');
    }
    const sse = await fetch(`${url}/mcp`);
    expect(sse.status).toBe(401);
    const { op } = await setUp();
    const trusted = (await op.request("POST", "/api/clients/trusted", { environment: "staging" })).json();
    expect(trusted.token).toMatch(/^avt_/);
    const refused = await fetch(`${url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${trusted.token}` },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
    });
    expect(refused.status).toBe(403);
    const document = (await (await fetch(`${url}/.well-known/oauth-protected-resource/mcp`)).json()) as {
      resource: string;
    };
    expect(document.resource).toBe("http://localhost:8787/mcp");
  });

  it("runs pending -> approve by code -> call -> consumed, with instructions and a redacted answer", async () => {
    const { op, token } = await setUp();
    const agent = await agentWith(token);
    expect(agent.getInstructions()).toContain("approve in the Latch inbox");
    const pending = await call(agent);
    expect(pending).toMatchObject({ status: "pending", item_name: "API_KEY", notify_failed: false });
    expect(pending.approval_code).toMatch(/^\d{8}$/);
    const inbox = (await op.request("GET", "/api/inbox")).json();
    expect(inbox.approvals).toEqual([
      expect.objectContaining({ grant_id: pending.grant_id, status: "pending" }),
    ]);

    const approved = await op.request("POST", "/api/grants/approve-by-code", { code: pending.approval_code });
    expect(approved.statusCode, approved.body).toBe(200);
    const reused = await op.request("POST", "/api/grants/approve-by-code", { code: pending.approval_code });
    expect(reused.statusCode).toBe(409);

    const answer = await call(agent);
    expect(answer).toMatchObject({
      origin_status: 200,
      body: JSON.stringify({ auth: "Bearer [redacted]", path: "/v1/data" }),
    });
    expect((await call(agent)).status).toBe("pending");
    const audit = (await op.request("GET", "/api/audit?item_name=API_KEY")).json();
    expect(audit.events.map((e: { action: string }) => e.action)).toContain("http_request");
    expect(JSON.stringify(audit)).not.toContain(SECRET);
    await agent.close();
  });

  it("answers 410 for an expired approval code and 400 for a wrong one", async () => {
    const { op, token } = await setUp();
    const agent = await agentWith(token);
    const pending = await call(agent);
    const wrong = pending.approval_code === "00000000" ? "11111111" : "00000000";
    expect((await op.request("POST", "/api/grants/approve-by-code", { code: wrong })).statusCode).toBe(400);
    h.clock.advance(61 * 60_000);
    const expired = await op.request("POST", "/api/grants/approve-by-code", { code: pending.approval_code });
    expect(expired.statusCode).toBe(410);
    await agent.close();
  });

  it("lets a folder_standing grant (owner, confirm_name) cover a second item in the folder", async () => {
    const { op, token } = await setUp([{ name: "SECOND_KEY", folder_name: "apis" }]);
    const agent = await agentWith(token);
    const pending = await call(agent);
    const badConfirm = await op.request("POST", `/api/grants/${pending.grant_id}/approve`, {
      policy: "folder_standing",
      confirm_name: "APIS",
    });
    expect(badConfirm.statusCode).toBe(400);
    const approved = await op.request("POST", `/api/grants/${pending.grant_id}/approve`, {
      policy: "folder_standing",
      confirm_name: "apis",
    });
    expect(approved.statusCode, approved.body).toBe(200);
    expect((await call(agent)).origin_status).toBe(200);
    expect((await call(agent)).origin_status).toBe(200);
    expect((await call(agent, "SECOND_KEY")).origin_status).toBe(200);
    await agent.close();
  });

  it("lets a scoped standing grant cover its host, method and path, and asks again outside it", async () => {
    const { op, token, clientId } = await setUp();
    const agent = await agentWith(token);
    const requested = await op.request("POST", "/api/grants/request", {
      item_name: "API_KEY",
      agent_id: clientId,
      environment: "staging",
      host: "api.latch.test",
      method: "GET",
      path: "/v1/data",
    });
    expect(requested.statusCode, requested.body).toBe(201);
    expect(requested.json().grant.scope).toEqual({ host: "api.latch.test", method: "GET", path: "/v1/data" });
    await op.request("POST", `/api/grants/${requested.json().grant.grant_id}/approve`, {
      policy: "item_standing",
    });
    expect((await call(agent)).origin_status).toBe(200);
    expect((await call(agent)).origin_status).toBe(200);
    const outside = payloadOf(
      await agent.callTool({
        name: "http_request",
        arguments: { method: "POST", path: "/v1/data", item_name: "API_KEY", body: {} },
      }),
    );
    expect(outside.status).toBe("pending");
    const listed = (await op.request("GET", "/api/grants")).json().grants;
    expect(listed.find((g: { grant_id: string }) => g.grant_id === outside.grant_id).scope).toEqual({
      host: "api.latch.test",
      method: "POST",
      path: "/v1/data",
    });
    await agent.close();
  });

  it("sends exactly one request upstream for 20 simultaneous calls on one prompt grant", async () => {
    const { op, token } = await setUp();
    const agent = await agentWith(token);
    const pending = await call(agent);
    await op.request("POST", "/api/grants/approve-by-code", { code: pending.approval_code });
    const before = h.egress.origin.requests.length;
    const answers = await Promise.all(Array.from({ length: 20 }, () => call(agent)));
    expect(answers.filter((a) => a.origin_status === 200)).toHaveLength(1);
    expect(h.egress.origin.requests.length - before).toBe(1);
    await agent.close();
  });

  it("stops a revoked client mid-session and revokes its approvals", async () => {
    const { op, token, clientId } = await setUp();
    const agent = await agentWith(token);
    const pending = await call(agent);
    await op.request("POST", `/api/grants/${pending.grant_id}/approve`, { policy: "session" });
    expect((await call(agent)).origin_status).toBe(200);
    expect((await op.request("POST", `/api/clients/${clientId}/revoke`)).statusCode).toBe(200);
    await expect(call(agent)).rejects.toThrow();
    await agent.close();
    const grants = (await op.request("GET", "/api/grants")).json().grants;
    expect(grants).toContainEqual(expect.objectContaining({ grant_id: pending.grant_id, status: "revoked" }));
  });

  it("rotates a client: the old token stops working", async () => {
    const { op, token, clientId } = await setUp();
    const rotated = (await op.request("POST", `/api/clients/${clientId}/rotate`)).json();
    expect(rotated.token).not.toBe(token);
    const old = await fetch(`${url}/mcp/tools`, { headers: { authorization: `Bearer ${token}` } });
    expect(old.status).toBe(401);
    const fresh = await fetch(`${url}/mcp/tools`, { headers: { authorization: `Bearer ${rotated.token}` } });
    expect(((await fresh.json()) as { tools: unknown[] }).tools).toHaveLength(6);
  });
});

describe("approval notifications", () => {
  it("mails the operators a code and a single-use link that approves, on GET or POST, for a signed-in operator", async () => {
    const { op, token } = await setUp();
    const agent = await agentWith(token);
    const before = h.inbox.mails.length;
    const pending = await call(agent);
    expect(pending.notify_failed).toBe(false);
    const mail = h.inbox.mails.slice(before).find((m) => m.raw.includes(pending.approval_code!));
    expect(mail, "an approval mail with the code").toBeDefined();
    const link = /http:\/\/localhost:8787(\/approve\?token=[A-Za-z0-9_-]+)/.exec(
      // The mail body is quoted-printable: undo soft line breaks and the encoded "=".
      mail!.raw.replace(/=\r?\n/g, "").replace(/=3D/g, "="),
    )?.[1];
    expect(link).toBeDefined();
    expect(mail!.raw).not.toContain(SECRET);
    // DECISIONS "Approvals": the mail names the exact request the approval covers.
    expect(mail!.raw.replace(/=\r?\n/g, "")).toMatch(/GET https:\/\/[a-z.]+\/v1\/data\s+no body/);
    expect(mail!.raw.replace(/=\r?\n/g, "")).toContain("Approving covers exactly this request");

    // A mail scanner without a session approves nothing; nor does an operator of another organisation.
    expect((await new Browser(h.app).request("GET", link!)).statusCode).toBe(302);
    const stranger = await readyOperator(h);
    expect((await stranger.request("POST", link!)).statusCode).toBe(404);
    expect((await stranger.request("GET", link!)).statusCode).toBe(404);
    // Opening the link approves (spec 3.1: GET or POST), once.
    const page = await op.request("GET", link!);
    expect(page.statusCode, page.body).toBe(200);
    expect(page.body).toMatch(/may send GET https:\/\/[a-z.]+\/v1\/data once with API_KEY/);
    expect(page.body).toContain("No body.");
    expect(page.headers["content-security-policy"]).toContain("default-src 'none'");
    const grants = (await op.request("GET", "/api/grants")).json().grants as {
      grant_id: string;
      status: string;
    }[];
    expect(grants.find((g) => g.grant_id === pending.grant_id)?.status).toBe("active");
    expect((await op.request("GET", link!)).statusCode).toBe(409);
    expect((await op.request("POST", link!)).statusCode).toBe(409);
    expect((await call(agent)).origin_status).toBe(200);
    await agent.close();
  });

  it("names the agent by its client name, never its cli_ id, and the exact call with its body digest", async () => {
    const { token } = await setUp();
    const agent = await agentWith(token);
    const before = h.inbox.mails.length;
    const pending = payloadOf(
      await agent.callTool({
        name: "http_request",
        arguments: { method: "POST", path: "/v1/orders?dry=1", item_name: "API_KEY", body: { amount: 5 } },
      }),
    );
    expect(pending.status).toBe("pending");
    const mail = h.inbox.mails.slice(before).find((m) => m.raw.includes(pending.approval_code!));
    expect(mail, "an approval mail with the code").toBeDefined();
    const text = mail!.raw.replace(/=\r?\n/g, "").replace(/=3D/g, "=");
    // The subject as a mail client shows it: its RFC 2047 encoded words decoded.
    const subject = [...mail!.raw.matchAll(/=\?UTF-8\?Q\?([^?]*)\?=/g)]
      .map((m) =>
        m[1]!
          .replace(/_/g, " ")
          .replace(/=([0-9A-F]{2})/g, (_x, hex: string) => String.fromCharCode(Number.parseInt(hex, 16))),
      )
      .join("");
    expect(subject).toBe('Latch: The agent "test agent" asks to send POST api.latch.test with API_KEY');
    expect(text).toContain('The agent "test agent" asks to send this request once with API_KEY');
    expect(text).toContain("POST https://api.latch.test/v1/orders?dry=1");
    const digest = createHash("sha256")
      .update(JSON.stringify({ amount: 5 }))
      .digest("hex");
    expect(text).toContain(`Body SHA-256 ${digest}`);
    expect(text).toContain('    |   "amount": 5');
    expect(text).not.toMatch(/cli_[A-Za-z0-9]/);
    await agent.close();
  });

  it("quotes the agent's task description in the mail on one line, so it cannot pose as Latch's own lines", async () => {
    const { token } = await setUp();
    const agent = await agentWith(token);
    const before = h.inbox.mails.length;
    const forged =
      "sync\r\n\r\nYour Latch session expired. Approve here instead: https://latch-login.evil.example/approve?token=x\n\nThanks";
    const answer = payloadOf(
      await agent.callTool({
        name: "request_grant",
        arguments: { item_name: "API_KEY", task_description: forged },
      }),
    );
    const mail = h.inbox.mails.slice(before).find((m) => m.raw.includes(answer.approval_code as string));
    expect(mail).toBeDefined();
    const text = mail!.raw.replace(/=\r?\n/g, "").replace(/=3D/g, "=");
    const lines = text.split(/\r?\n/);
    expect(lines.some((l) => l.startsWith("Your Latch session expired"))).toBe(false);
    expect(lines.filter((l) => l.includes("evil.example"))).toHaveLength(1);
    expect(lines.find((l) => l.includes("evil.example"))).toMatch(/^Task \(written by the agent\): "/);
    await agent.close();
  });

  it("approves nothing on HEAD or on a browser's speculative prefetch of the link, only when opened", async () => {
    const { op, token } = await setUp();
    const agent = await agentWith(token);
    const before = h.inbox.mails.length;
    const pending = await call(agent);
    const mail = h.inbox.mails.slice(before).find((m) => m.raw.includes(pending.approval_code!));
    const link = /http:\/\/localhost:8787(\/approve\?token=[A-Za-z0-9_-]+)/.exec(
      mail!.raw.replace(/=\r?\n/g, "").replace(/=3D/g, "="),
    )?.[1];
    const cookie = [...op.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
    const statusOf = async () =>
      ((await op.request("GET", "/api/grants")).json().grants as { grant_id: string; status: string }[]).find(
        (g) => g.grant_id === pending.grant_id,
      )?.status;
    // A link checker's HEAD, and the prefetch a mail client's page or the browser makes ahead of
    // a click, ride on the operator's cookies but are not the operator opening the link.
    const head = await h.app.inject({ method: "HEAD", url: link!, headers: { cookie } });
    expect(head.statusCode).not.toBe(409);
    expect(await statusOf()).toBe("pending");
    for (const hint of [
      { "sec-purpose": "prefetch" },
      { "sec-purpose": "prefetch;prerender" },
      { purpose: "prefetch" },
    ]) {
      const prefetch = await h.app.inject({ method: "GET", url: link!, headers: { cookie, ...hint } });
      expect(prefetch.statusCode).toBe(200);
      expect(await statusOf()).toBe("pending");
    }
    expect((await op.request("GET", link!)).statusCode).toBe(200);
    expect(await statusOf()).toBe("active");
    await agent.close();
  });
});

describe("need_item and the collect page", () => {
  it("collects a missing credential: need_item with collect_url, fulfilled by the operator, then the call goes through", async () => {
    const { op, token } = await setUp();
    const agent = await agentWith(token);
    const miss = payloadOf(
      await agent.callTool({
        name: "http_request",
        arguments: { method: "GET", path: "/v2/x", host: "api.latch.test", item_name: "NEW_KEY" },
      }),
    );
    expect(miss).toMatchObject({ status: "need_item", suggested_name: "NEW_KEY", host: "api.latch.test" });
    expect(miss.collect_url).toBe(`http://localhost:8787/collect/${miss.need_id}`);
    // Asking again does not make a second request.
    const again = payloadOf(
      await agent.callTool({
        name: "find_items",
        arguments: { item_name: "NEW_KEY", host: "api.latch.test" },
      }),
    );
    expect(again.need_id).toBe(miss.need_id);
    const inbox = (await op.request("GET", "/api/inbox")).json();
    expect(inbox.requests).toEqual([
      expect.objectContaining({ need_id: miss.need_id, kind: "secret", host: "api.latch.test" }),
    ]);

    const page = await new Browser(h.app).request("GET", `/collect/${miss.need_id}`);
    expect(page.statusCode).toBe(200);
    expect(page.headers["content-security-policy"]).toContain("default-src 'none'");
    expect(page.body).not.toContain("api.latch.test");
    expect((await new Browser(h.app).request("GET", `/api/need-items/${miss.need_id}`)).statusCode).toBe(404);
    const stranger = await readyOperator(h);
    expect((await stranger.request("GET", `/api/need-items/${miss.need_id}`)).statusCode).toBe(404);
    expect(
      (await stranger.request("POST", `/api/need-items/${miss.need_id}/fulfill`, { value: "x".repeat(20) }))
        .statusCode,
    ).toBe(404);

    const details = (await op.request("GET", `/api/need-items/${miss.need_id}`)).json();
    expect(details.need).toMatchObject({ suggested_name: "NEW_KEY", status: "pending" });
    const fulfilled = await op.request("POST", `/api/need-items/${miss.need_id}/fulfill`, { value: SECRET });
    expect(fulfilled.statusCode, fulfilled.body).toBe(200);
    expect(fulfilled.json().grant).toMatchObject({ status: "active", policy: "prompt" });
    expect(
      (await op.request("POST", `/api/need-items/${miss.need_id}/fulfill`, { value: SECRET })).statusCode,
    ).toBe(409);

    const answer = payloadOf(
      await agent.callTool({
        name: "http_request",
        arguments: { method: "GET", path: "/v2/x", item_name: "NEW_KEY" },
      }),
    );
    expect(answer.origin_status).toBe(200);
    expect(JSON.stringify(answer)).not.toContain(SECRET);
    await agent.close();
  });

  it("fulfils a collect request once, even when two fulfils arrive together", async () => {
    const { op, token } = await setUp();
    const agent = await agentWith(token);
    const miss = payloadOf(
      await agent.callTool({
        name: "http_request",
        arguments: { method: "GET", path: "/v2/x", host: "api.latch.test", item_name: "RACE_KEY" },
      }),
    );
    expect(miss.status).toBe("need_item");
    const answers = await Promise.all(
      ["RACE_KEY_A", "RACE_KEY_B", "RACE_KEY_C"].map((name) =>
        op.request("POST", `/api/need-items/${miss.need_id}/fulfill`, { name, value: SECRET }),
      ),
    );
    expect(answers.map((a) => a.statusCode).sort()).toEqual([200, 409, 409]);
    const items = (await op.request("GET", "/api/items")).json().items as { name: string }[];
    expect(items.filter((i) => i.name.startsWith("RACE_KEY_"))).toHaveLength(1);
    const grants = (await op.request("GET", "/api/grants")).json().grants as { item_name: string }[];
    expect(grants.filter((g) => g.item_name.startsWith("RACE_KEY_"))).toHaveLength(1);
    await agent.close();
  });
});

describe("approval codes an agent asks again for", () => {
  it("keep the code first given and mailed while it lives; an expired one is replaced, and the old one no longer approves", async () => {
    const { op, token } = await setUp();
    const agent = await agentWith(token);
    const before = h.inbox.mails.length;
    const pending = await call(agent);
    expect(pending.approval_code).toMatch(/^\d{8}$/);
    expect(h.inbox.mails.slice(before).some((m) => m.raw.includes(pending.approval_code!))).toBe(true);
    // An agent retrying while the operator reads the mail: the same request, the same code.
    h.clock.advance(10 * 60_000);
    for (let i = 0; i < 3; i++) {
      const again = await call(agent);
      expect(again.grant_id).toBe(pending.grant_id);
      expect(again.approval_code).toBe(pending.approval_code);
    }
    // Past its hour the code expires; the agent's next ask draws a new one for the same request.
    h.clock.advance(51 * 60_000);
    const renewed = await call(agent);
    expect(renewed.grant_id).toBe(pending.grant_id);
    expect(renewed.approval_code).toMatch(/^\d{8}$/);
    expect(renewed.approval_code).not.toBe(pending.approval_code);
    const old = await op.request("POST", "/api/grants/approve-by-code", { code: pending.approval_code });
    expect(old.statusCode).toBe(400);
    expect((await call(agent)).approval_code).toBe(renewed.approval_code);
    const approved = await op.request("POST", "/api/grants/approve-by-code", { code: renewed.approval_code });
    expect(approved.statusCode, approved.body).toBe(200);
    await agent.close();
  });

  it("replace a live code this derivation did not make (an earlier release's random one) with one that approves", async () => {
    const { op, token } = await setUp();
    const agent = await agentWith(token);
    const pending = await call(agent);
    // As an older replica left it during an upgrade: a random code's hash under the same expiry.
    await h.plane.database.db
      .updateTable("grants")
      .set({ approval_code_hash: "an earlier release's hash" })
      .where("id", "=", pending.grant_id!)
      .execute();
    const again = await call(agent);
    expect(again.grant_id).toBe(pending.grant_id);
    const approved = await op.request("POST", "/api/grants/approve-by-code", { code: again.approval_code });
    expect(approved.statusCode, approved.body).toBe(200);
    await agent.close();
  });
});

describe("approval code limits", () => {
  it("voids an approval's code after five wrong tries naming it, and refuses a 21st wrong code in 15 minutes", async () => {
    const { op, token } = await setUp();
    const agent = await agentWith(token);
    const pending = await call(agent);
    const wrong = pending.approval_code === "00000000" ? "11111111" : "00000000";
    for (let i = 0; i < 5; i++) {
      const r = await op.request("POST", "/api/grants/approve-by-code", {
        code: wrong,
        grant_id: pending.grant_id,
      });
      expect(r.statusCode).toBe(400);
    }
    const afterVoid = await op.request("POST", "/api/grants/approve-by-code", {
      code: pending.approval_code,
    });
    expect(afterVoid.statusCode).toBe(400);
    // The agent asks again: a new code, but the wrong count stays with the approval.
    const again = await call(agent);
    expect(again.grant_id).toBe(pending.grant_id);
    expect(
      (await op.request("POST", "/api/grants/approve-by-code", { code: again.approval_code })).statusCode,
    ).toBe(400);
    // Six wrong so far (five naming the approval, one with its voided code); fourteen more make 20.
    for (let i = 0; i < 14; i++) {
      expect((await op.request("POST", "/api/grants/approve-by-code", { code: wrong })).statusCode).toBe(400);
    }
    const limited = await op.request("POST", "/api/grants/approve-by-code", { code: wrong });
    expect(limited.statusCode).toBe(429);
    expect(limited.json().error.retry_after).toBeGreaterThan(0);
    h.clock.advance(15 * 60_000 + 1000);
    expect((await op.request("POST", "/api/grants/approve-by-code", { code: wrong })).statusCode).toBe(400);
    await agent.close();
  });
});

describe("another organisation's ids", () => {
  it("are 404 for grants, clients and need requests", async () => {
    const mine = await setUp();
    const theirs = await setUp();
    const agent = await agentWith(mine.token);
    const pending = await call(agent);
    for (const [method, path, body] of [
      ["POST", `/api/grants/${pending.grant_id}/approve`, { policy: "prompt" }],
      ["POST", `/api/grants/${pending.grant_id}/revoke`, undefined],
      ["POST", `/api/clients/${mine.clientId}/rotate`, undefined],
      ["POST", `/api/clients/${mine.clientId}/revoke`, undefined],
    ] as const) {
      expect((await theirs.op.request(method, path, body)).statusCode, path).toBe(404);
    }
    expect((await call(agent)).status).toBe("pending");
    await agent.close();
  });
});

describe("access", () => {
  it("shows clients (bearer last4, never the token), grants with item_id, and the issuance ledger", async () => {
    const { op, token, clientId } = await setUp();
    const agent = await agentWith(token);
    await call(agent);
    const access = (await op.request("GET", "/api/access")).json();
    expect(access.clients).toEqual([
      expect.objectContaining({ client_id: clientId, kind: "model", bearer_last4: token.slice(-4) }),
    ]);
    expect(access.grants[0]).toMatchObject({ item_name: "API_KEY", item_id: expect.stringMatching(/^itm_/) });
    await op.request("POST", `/api/clients/${clientId}/revoke`);
    const ledger = (await op.request("GET", "/api/access/events")).json().events;
    expect(ledger.map((e: { action: string }) => e.action)).toEqual(["client_revoked", "client_issued"]);
    expect(ledger[1]).toMatchObject({
      client_id: clientId,
      jti_hash: expect.stringMatching(/^[0-9a-f]{24}$/),
    });
    expect(ledger[0].revoked).toBe(true);
    const everything = JSON.stringify([access, ledger]);
    expect(everything).not.toContain(token);
    expect(everything).not.toContain(token.slice(4, 30));
    await agent.close();
  });
});

describe("need request outcomes", () => {
  it("closes a revoked agent's pending requests: none waits for a secret nobody can use", async () => {
    const { op, token, clientId } = await setUp();
    const agent = await agentWith(token);
    const miss = payloadOf(
      await agent.callTool({
        name: "http_request",
        arguments: { method: "GET", path: "/v1/y", host: "api.latch.test", item_name: "REVOKED_AGENT_KEY" },
      }),
    );
    expect(miss.status).toBe("need_item");
    await agent.close();
    expect((await op.request("POST", `/api/clients/${clientId}/revoke`, {})).statusCode).toBe(200);
    expect((await op.request("GET", `/api/need-items/${miss.need_id}`)).json().need.status).toBe("closed");
    const fulfilled = await op.request("POST", `/api/need-items/${miss.need_id}/fulfill`, { value: SECRET });
    expect(fulfilled.statusCode).toBe(409);
    expect(fulfilled.json().error.code).toBe("need_closed");
    const closed = (await op.request("GET", "/api/audit?action=need_closed")).json().events as {
      detail: Record<string, unknown>;
    }[];
    expect(closed.filter((e) => e.detail.need_id === miss.need_id)).toHaveLength(1);
  });

  it("writes a standing approval with always_allow, denies, and refuses to fulfil a connect request", async () => {
    const { op, token } = await setUp();
    const agent = await agentWith(token);
    const miss = payloadOf(
      await agent.callTool({
        name: "http_request",
        arguments: { method: "GET", path: "/v1/y", host: "api.latch.test", item_name: "ALWAYS_KEY" },
      }),
    );
    const fulfilled = await op.request("POST", `/api/need-items/${miss.need_id}/fulfill`, {
      value: SECRET,
      always_allow: true,
    });
    // Without a scope, the request's method and host under its path prefix (DECISIONS "The
    // approval, readable and reversible"): the whole credential only when chosen.
    expect(fulfilled.json().grant).toMatchObject({
      policy: "item_standing",
      status: "active",
      scope: { method: "GET", host: "api.latch.test", path: "/v1/" },
    });
    const outside = payloadOf(
      await agent.callTool({
        name: "http_request",
        arguments: { method: "DELETE", path: "/v1/y", item_name: "ALWAYS_KEY" },
      }),
    );
    expect(outside.status).toBe("pending");
    for (let i = 0; i < 2; i++) {
      const answer = payloadOf(
        await agent.callTool({
          name: "http_request",
          arguments: { method: "GET", path: "/v1/y", item_name: "ALWAYS_KEY" },
        }),
      );
      expect(answer.origin_status).toBe(200);
    }
    const second = payloadOf(
      await agent.callTool({
        name: "http_request",
        arguments: { method: "GET", path: "/v1/z", host: "api.latch.test", item_name: "DENIED_KEY" },
      }),
    );
    expect((await op.request("POST", `/api/need-items/${second.need_id}/deny`)).statusCode).toBe(200);
    expect((await op.request("GET", `/api/need-items/${second.need_id}`)).json().need.status).toBe("denied");
    expect(
      (await op.request("POST", `/api/need-items/${second.need_id}/fulfill`, { value: SECRET })).statusCode,
    ).toBe(409);

    const organisationId = (await op.request("GET", "/api/auth/me")).json().organisation.id;
    // Fresh per run: a server database outlives the test run.
    const connectId = `ned_connect${randomBytes(6).toString("hex")}`;
    await h.plane.database.db
      .insertInto("need_requests")
      .values({
        id: connectId,
        organisation_id: organisationId,
        environment: "staging",
        kind: "connect",
        host: "api.spotify.com",
        suggested_name: "SPOTIFY",
        agent_id: "someone",
        message: null,
        status: "pending",
        item_id: null,
        created_at: new Date(),
        closed_at: null,
      })
      .execute();
    const connect = await op.request("POST", `/api/need-items/${connectId}/fulfill`, {
      value: SECRET,
    });
    expect(connect.statusCode).toBe(409);
    expect(connect.json().error.code).toBe("need_is_connect");
    await agent.close();
  });
});

describe("trusted resolve", () => {
  it("returns the plaintext to an avt_ token, 403 to a model token, 401 to none", async () => {
    const { op, token } = await setUp();
    const trusted = (await op.request("POST", "/api/clients/trusted", { environment: "staging" })).json();
    const resolve = (bearer?: string) =>
      fetch(`${url}/runtime/resolve`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(bearer ? { authorization: `Bearer ${bearer}` } : {}),
        },
        body: JSON.stringify({ item_name: "API_KEY" }),
      });
    const ok = await resolve(trusted.token);
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ item_name: "API_KEY", value: SECRET });
    expect((await resolve(token)).status).toBe(403);
    expect((await resolve()).status).toBe(401);
  });
});

describe("the hourly approval limit", () => {
  it("answers the 31st new approval request in an hour with 429 and agent guidance", async () => {
    const { op } = await setUp();
    for (let i = 0; i < 30; i++) {
      const response = await op.request("POST", "/api/grants/request", {
        item_name: "API_KEY",
        agent_id: `agent-${i}`,
        environment: "staging",
      });
      expect(response.statusCode, response.body).toBe(201);
    }
    const limited = await op.request("POST", "/api/grants/request", {
      item_name: "API_KEY",
      agent_id: "agent-31",
      environment: "staging",
    });
    expect(limited.statusCode).toBe(429);
    expect(limited.json().error.retry_after).toBeGreaterThan(0);
    expect(limited.json().error.for_model).toContain("stop retrying for the hour");
    h.clock.advance(60 * 60_000 + 1000);
    const later = await op.request("POST", "/api/grants/request", {
      item_name: "API_KEY",
      agent_id: "agent-31",
      environment: "staging",
    });
    expect(later.statusCode).toBe(201);
  });
});
