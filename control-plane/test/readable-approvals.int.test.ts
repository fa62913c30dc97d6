// The approval, readable and reversible (DECISIONS, third wave), on the hosted plane through the
// official MCP SDK client, a real egress proxy and a TLS origin: a pending request keeps its body
// and every place shows it formatted; "Always allow" covers the request's method and host under
// its path's prefix unless the whole credential is chosen; every decision records its operator;
// active approvals are listed with who approved them and their last use, and revoked; a call
// repeated within 10 minutes of a Deny is pending again without a second mail.
import { createHash } from "node:crypto";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Browser,
  connectAgent,
  type HostedHarness,
  listenHosted,
  operatorWithClient,
  toolAnswer,
} from "./hosted.ts";

const SECRET = "sk_live_readable_canary_4e19";
let h: HostedHarness;
let url: string;
/** What reached the origin: "METHOD /path". */
const received: string[] = [];

beforeAll(async () => {
  ({ h, url } = await listenHosted((_req, res, recorded) => {
    received.push(`${recorded.method} ${recorded.url}`);
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ ok: true }));
  }));
}, 60_000);
afterAll(async () => {
  await h.close();
});

async function setUp(label = "readable agent") {
  const set = await operatorWithClient(h, {
    secret: SECRET,
    items: [{ name: "API_KEY" }],
    clientName: label,
  });
  const agent = await connectAgent(url, set.token);
  const operatorId = (
    await h.plane.database.db
      .selectFrom("operators")
      .select("id")
      .where("email", "=", set.email)
      .executeTakeFirstOrThrow()
  ).id;
  return { ...set, agent, operatorId };
}

const http = (agent: Client, args: Record<string, unknown>) =>
  agent.callTool({ name: "http_request", arguments: { item_name: "API_KEY", ...args } }).then(toolAnswer);

const sha = (bytes: string) => createHash("sha256").update(bytes).digest("hex");

/** A received mail's text: headers dropped, quoted-printable decoded as UTF-8. */
function mailText(raw: string): string {
  const split = raw.indexOf("\r\n\r\n");
  const headers = raw.slice(0, split);
  const body = raw.slice(split + 4);
  if (!/content-transfer-encoding:\s*quoted-printable/i.test(headers)) return body;
  const unfolded = body.replace(/=\r?\n/g, "");
  const bytes: number[] = [];
  for (let i = 0; i < unfolded.length; i++) {
    if (unfolded[i] === "=" && /^[0-9A-F]{2}$/i.test(unfolded.slice(i + 1, i + 3))) {
      bytes.push(Number.parseInt(unfolded.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(...Buffer.from(unfolded[i]!, "utf8"));
  }
  return Buffer.from(bytes).toString("utf8").replace(/\r\n/g, "\n");
}
const mailsTo = (email: string) => h.inbox.mails.filter((m) => m.to === email);

/** An answer's object as the tests read it: any field, any depth (the schemas are checked elsewhere). */
// biome-ignore lint/suspicious/noExplicitAny: a test reads JSON answers field by field
type Json = Record<string, any>;

async function inboxGrant(op: Browser, grantId: string) {
  const approvals = (await op.request("GET", "/api/inbox")).json().approvals as Record<string, unknown>[];
  return approvals.find((g) => g.grant_id === grantId) as Json | undefined;
}

async function grantRow(id: string) {
  return h.plane.database.db.selectFrom("grants").selectAll().where("id", "=", id).executeTakeFirstOrThrow();
}

describe("the body of a pending request, readable", () => {
  it("keeps a JSON body and shows it indented in the inbox and the mail, with its SHA-256 beneath", async () => {
    const { op, agent, email } = await setUp();
    const body = { title: "Ship it", labels: ["release"], count: 12345678901234567890n.toString() };
    const asked = await http(agent, { method: "POST", path: "/v1/issues?draft=false", body });
    expect(asked.status).toBe("pending");
    const digest = sha(JSON.stringify(body));

    const shown = await inboxGrant(op, asked.grant_id!);
    expect(shown?.call.body_sha256).toBe(digest);
    expect(shown?.body).toEqual({
      content_type: "application/json",
      size: Buffer.byteLength(JSON.stringify(body)),
      is_cut: false,
      format: "json",
      text: JSON.stringify(body, null, 2),
      fields: null,
      has_hidden_characters: false,
      sha256: digest,
    });
    expect(shown?.allowed_hosts).toEqual(["api.latch.test"]);
    expect(shown?.after_deny_at).toBeNull();

    await expect
      .poll(() => mailsTo(email).filter((m) => /approve\?token=/.test(mailText(m.raw))).length)
      .toBe(1);
    const text = mailText(mailsTo(email).at(-1)!.raw);
    expect(text).toContain(
      `    The body (JSON, ${Buffer.byteLength(JSON.stringify(body))} bytes), as the agent wrote it:`,
    );
    expect(text).toContain(
      '    | {\n    |   "title": "Ship it",\n    |   "labels": [\n    |     "release"\n    |   ],',
    );
    expect(text).toContain(`    Body SHA-256 ${digest}`);
    // The stored value never appears: the proxy injects it later, the body is the agent's own.
    expect(JSON.stringify(await grantRow(asked.grant_id!))).not.toContain(SECRET);
  });

  it("shows form fields as name and value, and a body over 64 KiB cut, with the mail at 2 KiB", async () => {
    const { op, agent, email } = await setUp();
    const form = await http(agent, {
      method: "POST",
      path: "/v1/messages",
      content_type: "application/x-www-form-urlencoded",
      body: { to: "+15551234", text: "Hello there" },
    });
    const formShown = await inboxGrant(op, form.grant_id!);
    expect(formShown?.body).toMatchObject({
      format: "form",
      fields: [
        ["to", "+15551234"],
        ["text", "Hello there"],
      ],
      sha256: sha("to=%2B15551234&text=Hello+there"),
    });
    await expect.poll(() => mailsTo(email).length).toBeGreaterThan(1);
    expect(mailText(mailsTo(email).at(-1)!.raw)).toContain("    | to: +15551234\n    | text: Hello there\n");

    const big = { note: "x".repeat(100_000) };
    const cut = await http(agent, { method: "PUT", path: "/v1/notes/1", body: big });
    const cutShown = await inboxGrant(op, cut.grant_id!);
    expect(cutShown?.body).toMatchObject({
      is_cut: true,
      format: "text",
      size: 100_011,
      sha256: sha(JSON.stringify(big)),
    });
    expect(cutShown?.body.text.length).toBe(64 * 1024);
    const row = await grantRow(cut.grant_id!);
    expect(row.call_body_bytes).toBe(100_011);
    await expect.poll(() => mailsTo(email).length).toBe(3);
    const mail = mailText(mailsTo(email).at(-1)!.raw);
    // The body sent is longer than any view of it: the mail does not say the inbox shows it whole.
    expect(mail).toContain(
      "    | ... (the first 2 KiB: the inbox shows the first 64 KiB, and the body sent is longer still)",
    );
    expect(mail.length).toBeLessThan(4 * 1024);
  });

  it("shows the request on the approval link's page as text, markup and all, with Revoke that works", async () => {
    const { op, agent, email } = await setUp();
    const body = { title: "</code></pre><script>alert(1)</script><img src=x onerror=alert(2)>" };
    const asked = await http(agent, {
      method: "POST",
      path: "/v1/issues",
      body,
      task_description: 'File "<b>it</b>"',
    });
    await expect
      .poll(() => mailsTo(email).filter((m) => /approve\?token=/.test(mailText(m.raw))).length)
      .toBe(1);
    const link = /\/approve\?token=[A-Za-z0-9_-]+/.exec(mailText(mailsTo(email).at(-1)!.raw))![0];

    const page = await op.request("GET", link, undefined, { accept: "text/html" });
    expect(page.statusCode).toBe(200);
    expect(page.headers["content-security-policy"]).toContain("script-src 'self'");
    expect(page.headers["content-security-policy"]).not.toContain("unsafe-inline");
    const html = page.body;
    expect(html).toContain("<h1>Approved</h1>");
    expect(html).toContain("POST https://api.latch.test/v1/issues");
    expect(html).toContain("&lt;/code&gt;&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;");
    expect(html).not.toMatch(/<script>alert|<img src=x/);
    expect(html).toContain("File &quot;&lt;b&gt;it&lt;/b&gt;&quot;");
    expect(html).toContain(`SHA-256 ${sha(JSON.stringify(body))}`);
    expect(html).toContain("Approved once: exactly this request");
    expect(html).toContain(`data-grant-id="${asked.grant_id}"`);
    expect((await grantRow(asked.grant_id!)).status).toBe("active");

    // The same link again: not approved twice, the request still shown, Revoke still there.
    const again = await op.request("GET", link, undefined, { accept: "text/html" });
    expect(again.statusCode).toBe(409);
    expect(again.body).toContain("Not approved");
    expect(again.body).toContain(`data-grant-id="${asked.grant_id}"`);
    const revoked = await op.request("POST", `/api/grants/${asked.grant_id}/revoke`);
    expect(revoked.statusCode).toBe(200);
    expect((await http(agent, { method: "POST", path: "/v1/issues", body })).status).toBe("pending");
    const after = await op.request("GET", link, undefined, { accept: "text/html" });
    expect(after.body).toContain("Revoked: the agent&#39;s next call asks again.");
    expect(after.body).not.toContain("data-grant-id");
  });
});

describe("the approval mail is plain text the agent cannot steer", () => {
  it("keeps a body's line breaks and SMTP words inside the quoted body, one recipient, no header of theirs", async () => {
    const { agent, email } = await setUp("mail agent");
    const hostile = "x\r\nBcc: evil@example.test\r\n.\r\nRCPT TO:<evil@example.test>\r\nSubject: Approve me";
    const asked = await http(agent, {
      method: "POST",
      path: "/v1/messages",
      content_type: "application/x-www-form-urlencoded",
      body: { text: hostile },
      task_description: "line one\nBcc: evil@example.test",
    });
    expect(asked.status).toBe("pending");
    await expect
      .poll(() => mailsTo(email).filter((m) => /approve\?token=/.test(mailText(m.raw))).length)
      .toBe(1);
    const mail = mailsTo(email).at(-1)!;
    expect(h.inbox.mails.filter((m) => m.to.includes("evil@example.test"))).toEqual([]);
    expect(mail.to).toBe(email);
    const headers = mail.raw.slice(0, mail.raw.indexOf("\r\n\r\n"));
    expect(headers).not.toMatch(/^(Bcc|Subject: Approve me)/im);
    const text = mailText(mail.raw);
    // Each of the body's lines is behind "| ", its carriage returns shown as U+FFFD.
    expect(text).toContain(
      "    | text: x\uFFFD\n    | Bcc: evil@example.test\uFFFD\n    | .\uFFFD\n    | RCPT TO:",
    );
    expect(text).toContain(
      "(it holds invisible characters (control, direction, zero-width), shown as \uFFFD: read it with care)",
    );
    expect(text).not.toMatch(/^Bcc:/m);
  });
});

describe("Always allow asks what always covers", () => {
  it("path_prefix covers the request's method and host under its path's prefix; a DELETE elsewhere asks again", async () => {
    const { op, agent } = await setUp();
    const asked = await http(agent, { method: "POST", path: "/repos/acme/app/issues", body: { title: "a" } });
    const approved = await op.request("POST", `/api/grants/${asked.grant_id}/approve`, {
      policy: "item_standing",
      scope: "path_prefix",
    });
    expect(approved.statusCode, approved.body).toBe(200);
    expect(approved.json().grant.scope).toEqual({
      host: "api.latch.test",
      method: "POST",
      path: "/repos/acme/app/",
    });

    expect(
      (await http(agent, { method: "POST", path: "/repos/acme/app/issues", body: { title: "b" } }))
        .origin_status,
    ).toBe(200);
    expect(
      (await http(agent, { method: "POST", path: "/repos/acme/app/pulls?x=1", body: {} })).origin_status,
    ).toBe(200);
    const before = received.length;
    for (const attempt of [
      { method: "DELETE", path: "/repos/acme/app" },
      { method: "DELETE", path: "/repos/acme/app/issues" },
      { method: "POST", path: "/repos/acme/app", body: {} },
      { method: "POST", path: "/repos/acme/other/issues", body: {} },
    ]) {
      expect((await http(agent, attempt)).status, JSON.stringify(attempt)).toBe("pending");
    }
    expect(received.length).toBe(before);
    const audit = (await op.request("GET", "/api/audit?action=grant_approved")).json().events;
    expect(audit[0].detail).toMatchObject({
      policy: "item_standing",
      covers: "POST api.latch.test/repos/acme/app/",
    });
  });

  it("credential covers every call, when chosen; without scope the API keeps the grant's own (spec: the whole item)", async () => {
    const { op, agent } = await setUp();
    const first = await http(agent, { method: "GET", path: "/v1/me" });
    const whole = await op.request("POST", `/api/grants/${first.grant_id}/approve`, {
      policy: "item_standing",
      scope: "credential",
    });
    expect(whole.json().grant.scope).toBeNull();
    expect((await http(agent, { method: "DELETE", path: "/v1/anything" })).origin_status).toBe(200);

    const other = await setUp("unscoped agent");
    const asked = await http(other.agent, { method: "GET", path: "/v1/me" });
    const plain = await other.op.request("POST", `/api/grants/${asked.grant_id}/approve`, {
      policy: "item_standing",
    });
    expect(plain.json().grant.scope).toBeNull();
    expect((await http(other.agent, { method: "PATCH", path: "/v2/x", body: {} })).origin_status).toBe(200);
  });

  it("refuses a scope on a one-call or 8-hour approval, and path_prefix on a request that named no call", async () => {
    const { op, agent } = await setUp();
    const asked = await http(agent, { method: "GET", path: "/v1/me" });
    const once = await op.request("POST", `/api/grants/${asked.grant_id}/approve`, {
      policy: "prompt",
      scope: "path_prefix",
    });
    expect(once.statusCode).toBe(400);
    expect((await grantRow(asked.grant_id!)).status).toBe("pending");
    const whole = toolAnswer(
      await agent.callTool({ name: "request_grant", arguments: { item_name: "API_KEY" } }),
    );
    const refused = await op.request("POST", `/api/grants/${whole.grant_id}/approve`, {
      policy: "item_standing",
      scope: "path_prefix",
    });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error.message).toMatch(/named no call/);
    expect(
      (
        await op.request("POST", "/api/grants/approve-by-code", {
          code: asked.approval_code,
          policy: "item_standing",
          scope: "path_prefix",
        })
      ).json().grant.scope,
    ).toEqual({ host: "api.latch.test", method: "GET", path: "/v1/" });
  });
});

describe("every decision records the operator who made it", () => {
  it("approve (inbox, code, link), fulfil, deny, revoke and a client revoke fill approved_by and revoked_by", async () => {
    const { op, agent, operatorId, email, clientId } = await setUp();
    const byInbox = await http(agent, { method: "GET", path: "/v1/a" });
    await op.request("POST", `/api/grants/${byInbox.grant_id}/approve`, { policy: "session" });
    const byCode = await http(agent, { method: "GET", path: "/w/b" });
    await op.request("POST", "/api/grants/approve-by-code", { code: byCode.approval_code });
    const byLink = await http(agent, { method: "GET", path: "/x/c" });
    await expect.poll(() => mailsTo(email).filter((m) => mailText(m.raw).includes("/x/c")).length).toBe(1);
    const link = /\/approve\?token=[A-Za-z0-9_-]+/.exec(
      mailText(mailsTo(email).filter((m) => mailText(m.raw).includes("/x/c"))[0]!.raw),
    )![0];
    expect((await op.request("POST", link)).statusCode).toBe(200);
    const denied = await http(agent, { method: "GET", path: "/y/d" });
    await op.request("POST", `/api/grants/${denied.grant_id}/revoke`);
    const missing = await agent
      .callTool({
        name: "http_request",
        arguments: { method: "GET", path: "/z", host: "api.latch.test", item_name: "NEW_KEY" },
      })
      .then(toolAnswer);
    const fulfilled = await op.request("POST", `/api/need-items/${missing.need_id}/fulfill`, {
      value: "sk_new_value_0000",
    });
    expect(fulfilled.statusCode, fulfilled.body).toBe(200);

    for (const id of [byInbox.grant_id, byCode.grant_id, byLink.grant_id, fulfilled.json().grant.grant_id]) {
      expect((await grantRow(id!)).approved_by, id).toBe(operatorId);
    }
    expect(await grantRow(denied.grant_id!)).toMatchObject({
      status: "revoked",
      approved_by: null,
      revoked_by: operatorId,
    });
    await op.request("POST", `/api/grants/${byInbox.grant_id}/revoke`);
    expect((await grantRow(byInbox.grant_id!)).revoked_by).toBe(operatorId);

    // Revoking the client revokes what it holds, in the name of the operator who did it.
    const stillPending = await http(agent, { method: "GET", path: "/q/e" });
    await op.request("POST", `/api/clients/${clientId}/revoke`);
    expect(await grantRow(stillPending.grant_id!)).toMatchObject({
      status: "revoked",
      revoked_by: operatorId,
    });
    expect(await grantRow(byCode.grant_id!)).toMatchObject({ status: "revoked", revoked_by: operatorId });

    // The access snapshot names them too.
    const snapshot = (await op.request("GET", "/api/access")).json().grants as Json[];
    const fromCode = snapshot.find((g) => g.grant_id === byCode.grant_id);
    expect(fromCode).toMatchObject({
      approved_by: { operator_id: operatorId, email },
      revoked_by: operatorId,
    });
    expect(fromCode).toHaveProperty("last_used_at");
  });
});

describe("the Approvals section's list", () => {
  it("lists active approvals with who approved them and their last use, filters them, and a revoke takes effect at once", async () => {
    const { op, agent, email, clientId } = await setUp("listed agent");
    const once = await http(agent, { method: "GET", path: "/v1/once" });
    await op.request("POST", `/api/grants/${once.grant_id}/approve`, { policy: "prompt" });
    const always = await http(agent, { method: "POST", path: "/repos/acme/app/issues", body: {} });
    await op.request("POST", `/api/grants/${always.grant_id}/approve`, {
      policy: "item_standing",
      scope: "path_prefix",
    });
    const waiting = await http(agent, { method: "GET", path: "/v1/waiting" });

    const list = async (query = "") =>
      (await op.request("GET", `/api/approvals${query}`)).json().approvals as Json[];
    const listed = await list();
    expect(listed.map((a) => a.grant_id).sort()).toEqual([once.grant_id, always.grant_id].sort());
    expect(listed.map((a) => a.grant_id)).not.toContain(waiting.grant_id);
    const standing = listed.find((a) => a.grant_id === always.grant_id)!;
    expect(standing).toMatchObject({
      policy: "item_standing",
      agent_name: "listed agent",
      item_name: "API_KEY",
      scope: { host: "api.latch.test", method: "POST", path: "/repos/acme/app/" },
      approved_by: { email },
      last_used_at: null,
      allowed_hosts: ["api.latch.test"],
    });

    // A call marks the last use (of the approval and of the credential).
    h.clock.advance(1000);
    expect(
      (await http(agent, { method: "POST", path: "/repos/acme/app/issues/1", body: {} })).origin_status,
    ).toBe(200);
    expect((await list()).find((a) => a.grant_id === always.grant_id)?.last_used_at).toBe(
      h.clock.now.toISOString(),
    );
    const items = (await op.request("GET", "/api/items")).json().items as Json[];
    expect(items.find((i) => i.name === "API_KEY")?.last_used_at).toBeTruthy();

    expect((await list("?policy=prompt")).map((a) => a.grant_id)).toEqual([once.grant_id]);
    expect((await list(`?agent_id=${clientId}&item_name=API_KEY`)).length).toBe(2);
    expect(await list("?item_name=NOPE")).toEqual([]);
    expect(await list("?environment=production")).toEqual([]);
    expect((await op.request("GET", "/api/approvals?policy=everything")).statusCode).toBe(400);

    // Revoke: gone from the list, audited, and the agent's next call is pending again.
    const revoked = await op.request("POST", `/api/grants/${always.grant_id}/revoke`);
    expect(revoked.json().grant.status).toBe("revoked");
    expect((await list()).map((a) => a.grant_id)).toEqual([once.grant_id]);
    expect((await http(agent, { method: "POST", path: "/repos/acme/app/issues/2", body: {} })).status).toBe(
      "pending",
    );
    const audit = (await op.request("GET", "/api/audit?action=grant_revoked")).json().events;
    expect(audit[0].detail.agent_id).toBe(clientId);

    // Another organisation sees none of it.
    const stranger = await setUp("stranger agent");
    expect((await stranger.op.request("GET", "/api/approvals")).json().approvals).toEqual([]);
  });
});

describe("a Deny is heard", () => {
  it("the same call within 10 minutes is pending again without a mail, marked in the inbox and told to the agent", async () => {
    const { op, agent, email } = await setUp("persistent agent");
    const ask = { method: "DELETE", path: "/v1/repos/acme" };
    const first = await http(agent, ask);
    await expect.poll(() => mailsTo(email).length).toBeGreaterThan(0);
    const mailed = mailsTo(email).length;
    await op.request("POST", `/api/grants/${first.grant_id}/revoke`);

    h.clock.advance(2 * 60 * 1000);
    const again = await http(agent, ask);
    expect(again.status).toBe("pending");
    expect(again.grant_id).not.toBe(first.grant_id);
    expect(again.approval_code).toMatch(/^\d{8}$/);
    expect(again.notify_failed).toBe(false);
    expect((again.next as { for_model: string }).for_model).toMatch(
      /^The operator refused this exact request a moment ago/,
    );
    expect((await inboxGrant(op, again.grant_id!))?.after_deny_at).toBeTruthy();
    const requested = (await op.request("GET", "/api/audit?action=grant_requested")).json().events;
    expect(requested[0].detail).toMatchObject({ method: "DELETE", path: "/v1/repos/acme", after_deny: true });
    expect(requested[0].host).toBe("api.latch.test");

    // Another call is another request: mailed as usual.
    const other = await http(agent, { method: "GET", path: "/v1/repos/acme" });
    expect((other.next as { for_model: string }).for_model).not.toMatch(/refused/);
    await expect.poll(() => mailsTo(email).length).toBe(mailed + 1);

    // Still pending, no mail; after the second Deny and ten more minutes, it is asked as new.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(mailsTo(email).length).toBe(mailed + 1);
    await op.request("POST", `/api/grants/${again.grant_id}/revoke`);
    h.clock.advance(11 * 60 * 1000);
    const later = await http(agent, ask);
    expect((later.next as { for_model: string }).for_model).not.toMatch(/refused/);
    expect((await inboxGrant(op, later.grant_id!))?.after_deny_at).toBeNull();
    await expect.poll(() => mailsTo(email).length).toBe(mailed + 2);
  });
});
