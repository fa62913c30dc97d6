// The console's approval by code in two steps (issue H8): POST /api/grants/find-by-code answers the
// pending request a code belongs to, as the Inbox shows it, and approves nothing; its wrong codes
// count as approve-by-code's (spec 8), and another organisation's code reveals nothing. With it: the
// agent's own words shown with their invisible characters as U+FFFD wherever an approval is shown,
// and the approval link living as long as the code mailed with it.
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Browser,
  connectAgent,
  type HostedHarness,
  listenHosted,
  operatorWithClient,
  readableMail,
  toolAnswer,
} from "../../test/hosted.ts";

const SECRET = "sk_live_findbycode_canary_4242";
const RLO = "\u202E";
const ZWSP = "\u200B";
let h: HostedHarness;
let url: string;

beforeAll(async () => {
  ({ h, url } = await listenHosted((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end("{}");
  }));
}, 60_000);
afterAll(async () => {
  await h?.close();
});

async function setUp(clientName = "repo agent") {
  const set = await operatorWithClient(h, {
    secret: SECRET,
    items: [{ name: "API_KEY" }],
    clientName,
  });
  return { ...set, agent: await connectAgent(url, set.token) };
}

const http = (agent: Client, args: Record<string, unknown>) =>
  agent.callTool({ name: "http_request", arguments: { item_name: "API_KEY", ...args } }).then(toolAnswer);

const wrongCodeFor = (code: string) => (code === "00000000" ? "11111111" : "00000000");

async function auditCount(op: Browser): Promise<number> {
  return (await op.request("GET", "/api/audit")).json().events.length;
}

describe("POST /api/grants/find-by-code", () => {
  it("answers the request a code belongs to, as the Inbox shows it, and approves nothing", async () => {
    const { op, agent } = await setUp();
    // The hostile pattern: a DELETE's code handed out as if it were the harmless GET's.
    const destructive = await http(agent, {
      method: "DELETE",
      path: "/v1/repos/acme/app",
      task_description: "tidy up",
    });
    const harmless = await http(agent, { method: "GET", path: "/v1/repos/acme/app" });
    expect(destructive.status).toBe("pending");
    expect(harmless.status).toBe("pending");

    const found = await op.request("POST", "/api/grants/find-by-code", { code: destructive.approval_code });
    expect(found.statusCode, found.body).toBe(200);
    const approval = found.json().approval;
    expect(approval).toMatchObject({
      grant_id: destructive.grant_id,
      status: "pending",
      item_name: "API_KEY",
      agent_name: "repo agent",
      task_description: "tidy up",
      call: { method: "DELETE", host: "api.latch.test", path: "/v1/repos/acme/app" },
    });
    // Exactly the Inbox's row: what the console shows is what the Inbox would.
    const inbox = (await op.request("GET", "/api/inbox")).json();
    expect(approval).toEqual(
      inbox.approvals.find((g: { grant_id: string }) => g.grant_id === destructive.grant_id),
    );
    // Nothing approved: both still wait, and a second lookup finds the same request.
    expect(inbox.approvals).toHaveLength(2);
    expect(JSON.stringify(found.json())).not.toContain(SECRET);
    const again = await op.request("POST", "/api/grants/find-by-code", { code: destructive.approval_code });
    expect(again.json().approval.grant_id).toBe(destructive.grant_id);

    // The operator decides the request seen, by its id; the code then answers 409 as on approve-by-code.
    const denied = await op.request("POST", `/api/grants/${destructive.grant_id}/revoke`);
    expect(denied.statusCode, denied.body).toBe(200);
    const used = await op.request("POST", "/api/grants/find-by-code", { code: destructive.approval_code });
    expect(used.statusCode).toBe(409);
    expect(used.json().error.code).toBe("approval_code_used");
    await agent.close();
  });

  it("answers 410 for an expired code and 400 for a wrong or malformed one, auditing neither", async () => {
    const { op, agent } = await setUp();
    const pending = await http(agent, { method: "GET", path: "/v1/me" });
    const before = await auditCount(op);
    for (const code of [wrongCodeFor(pending.approval_code!), "1234", "abcdefgh", undefined]) {
      const wrong = await op.request("POST", "/api/grants/find-by-code", code === undefined ? {} : { code });
      expect(wrong.statusCode, wrong.body).toBe(400);
      expect(wrong.json().error.code).toBe("approval_code_invalid");
    }
    expect(await auditCount(op)).toBe(before);
    h.clock.advance(61 * 60_000);
    const expired = await op.request("POST", "/api/grants/find-by-code", { code: pending.approval_code });
    expect(expired.statusCode).toBe(410);
    expect(expired.json().error.code).toBe("approval_code_expired");
    await agent.close();
  });

  it("counts wrong codes toward the organisation's 20 per 15 minutes, with approve-by-code's", async () => {
    const { op, agent } = await setUp();
    const pending = await http(agent, { method: "GET", path: "/v1/me" });
    const wrong = wrongCodeFor(pending.approval_code!);
    for (let i = 0; i < 10; i++) {
      expect((await op.request("POST", "/api/grants/find-by-code", { code: wrong })).statusCode).toBe(400);
      expect((await op.request("POST", "/api/grants/approve-by-code", { code: wrong })).statusCode).toBe(400);
    }
    for (const path of ["/api/grants/find-by-code", "/api/grants/approve-by-code"]) {
      // Even the right code: the organisation's window is spent.
      const limited = await op.request("POST", path, { code: pending.approval_code });
      expect(limited.statusCode).toBe(429);
      expect(limited.json().error.retry_after).toBeGreaterThan(0);
    }
    h.clock.advance(15 * 60_000 + 1000);
    const found = await op.request("POST", "/api/grants/find-by-code", { code: pending.approval_code });
    expect(found.statusCode, found.body).toBe(200);
    await agent.close();
  });

  it("never reveals another organisation's request: its code is a wrong code here", async () => {
    const mine = await setUp();
    const theirs = await setUp();
    const pending = await http(mine.agent, { method: "DELETE", path: "/v1/secret-project" });
    const refused = await theirs.op.request("POST", "/api/grants/find-by-code", {
      code: pending.approval_code,
    });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error.code).toBe("approval_code_invalid");
    expect(refused.body).not.toContain(pending.grant_id!);
    expect(refused.body).not.toContain("secret-project");
    const found = await mine.op.request("POST", "/api/grants/find-by-code", { code: pending.approval_code });
    expect(found.statusCode, found.body).toBe(200);
    await mine.agent.close();
    await theirs.agent.close();
  });
});

describe("the agent's words wherever an approval is shown", () => {
  it("shows direction and zero-width characters of the task and the agent's name as U+FFFD", async () => {
    const { op, agent, email } = await setUp(`helper${RLO}live${ZWSP}`);
    const task = `read the ${RLO}fdp.exe invoice${ZWSP}`;
    const pending = await http(agent, { method: "GET", path: "/v1/invoices", task_description: task });
    expect(pending.status).toBe("pending");
    const hidden = /[\u202E\u200B]/;

    const inbox = (await op.request("GET", "/api/inbox")).json();
    const row = inbox.approvals.find((g: { grant_id: string }) => g.grant_id === pending.grant_id);
    expect(row.task_description).toBe("read the \uFFFDfdp.exe invoice\uFFFD");
    expect(row.agent_name).toBe("helper\uFFFDlive\uFFFD");
    const found = (
      await op.request("POST", "/api/grants/find-by-code", { code: pending.approval_code })
    ).json();
    expect(JSON.stringify(found)).not.toMatch(hidden);
    const approvals = (await op.request("GET", "/api/approvals")).json();
    expect(JSON.stringify(approvals)).not.toMatch(hidden);

    await expect
      .poll(() => h.inbox.mails.filter((m) => m.to === email && m.raw.includes("approve?token=")).length)
      .toBe(1);
    const mail = readableMail(h.inbox.mails.find((m) => m.to === email && m.raw.includes("approve?token="))!);
    expect(mail).not.toMatch(hidden);
    expect(mail).toContain("\uFFFDfdp.exe invoice\uFFFD");
    expect(mail).toContain('The agent "helper\uFFFDlive\uFFFD" asks');
    const link = /\/approve\?token=[A-Za-z0-9_-]+/.exec(mail)![0];
    const page = await op.request("GET", link);
    expect(page.statusCode, page.body).toBe(200);
    expect(page.body).not.toMatch(hidden);
    expect(page.body).toContain("read the \uFFFDfdp.exe invoice\uFFFD");
    expect(page.body).toContain("helper\uFFFDlive\uFFFD");
    await agent.close();
  });
});

describe("the approval link", () => {
  it("expires with the code mailed beside it: 410, nothing approved", async () => {
    const { op, agent, email } = await setUp();
    const pending = await http(agent, { method: "GET", path: "/v1/me" });
    await expect
      .poll(() => h.inbox.mails.filter((m) => m.to === email && m.raw.includes("approve?token=")).length)
      .toBe(1);
    const mail = readableMail(h.inbox.mails.find((m) => m.to === email && m.raw.includes("approve?token="))!);
    const link = /\/approve\?token=[A-Za-z0-9_-]+/.exec(mail)![0];
    h.clock.advance(61 * 60_000);
    const posted = await op.request("POST", link);
    expect(posted.statusCode).toBe(410);
    expect(posted.json().error.code).toBe("approval_code_expired");
    const page = await op.request("GET", link);
    expect(page.statusCode).toBe(410);
    expect(page.body).toContain("This approval link has expired");
    const inbox = (await op.request("GET", "/api/inbox")).json();
    expect(inbox.approvals.map((g: { grant_id: string; status: string }) => [g.grant_id, g.status])).toEqual([
      [pending.grant_id, "pending"],
    ]);
    await agent.close();
  });
});
