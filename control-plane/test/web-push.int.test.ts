// Web Push (DECISIONS "Approvals that reach the operator"), against a push endpoint of our own:
// the test's TLS origin standing in for push.latch.test, reached through the egress proxy's test
// knobs (EGRESS_CONNECT_TO, EGRESS_ALLOW_CIDRS, EGRESS_EXTRA_CA), so the push leaves through the
// proxy as in production. The test is the browser: it makes the subscription's keys, decrypts the
// RFC 8291 payload with them, checks the RFC 8292 VAPID JWT against the published key, and finds
// neither the secret nor the approval code. A 410 deletes the subscription.
import { createDecipheriv, createECDH, hkdfSync, randomBytes } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import { decodeProtectedHeader, importJWK, jwtVerify } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newTestOrganisation } from "./database.ts";
import {
  type Browser,
  connectAgent,
  type HostedHarness,
  listenHosted,
  operatorWithClient,
  readyOperator,
  toolAnswer,
} from "./hosted.ts";
import { joinAs } from "./teams.ts";

const SECRET = "sk_live_webpush_canary_0c3e";
const PUSH_HOST = "push.latch.test";
/** A push service whose port refuses every connection. */
const DOWN_HOST = "down.notify.windows.com";
let h: HostedHarness;
let url: string;
/** What the push endpoint received, by path. */
const received: { path: string; headers: IncomingHttpHeaders; body: Buffer }[] = [];
/** The status each push path answers with (201 unless a test says otherwise). */
const statusOf = new Map<string, number>();

beforeAll(async () => {
  ({ h, url } = await listenHosted(
    (req, res, recorded) => {
      if (req.url?.startsWith("/push/")) {
        received.push({ path: req.url, headers: req.headers, body: recorded.body });
        res.writeHead(statusOf.get(req.url) ?? 201).end();
        return;
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    },
    {
      providerHosts: [PUSH_HOST],
      closedHosts: [DOWN_HOST],
      pushServiceHosts: `${PUSH_HOST},*.notify.windows.com`,
    },
  ));
}, 60_000);
afterAll(async () => {
  await h.close();
});

/** A browser's subscription: its P-256 key pair and auth secret, as PushManager would make them. */
function newBrowserKeys() {
  const ecdh = createECDH("prime256v1");
  ecdh.generateKeys();
  const auth = randomBytes(16);
  return {
    ecdh,
    auth,
    json: { p256dh: ecdh.getPublicKey().toString("base64url"), auth: auth.toString("base64url") },
  };
}

/** RFC 8291 + RFC 8188: the plaintext of one aes128gcm record, decrypted as the browser does. */
function decryptPush(body: Buffer, keys: ReturnType<typeof newBrowserKeys>): string {
  const salt = body.subarray(0, 16);
  const idLength = body[20]!;
  const asPublic = body.subarray(21, 21 + idLength);
  const ciphertext = body.subarray(21 + idLength);
  const ecdhSecret = keys.ecdh.computeSecret(asPublic);
  const keyInfo = Buffer.concat([Buffer.from("WebPush: info\0"), keys.ecdh.getPublicKey(), asPublic]);
  const ikm = Buffer.from(hkdfSync("sha256", ecdhSecret, keys.auth, keyInfo, 32));
  const cek = Buffer.from(hkdfSync("sha256", ikm, salt, Buffer.from("Content-Encoding: aes128gcm\0"), 16));
  const nonce = Buffer.from(hkdfSync("sha256", ikm, salt, Buffer.from("Content-Encoding: nonce\0"), 12));
  const decipher = createDecipheriv("aes-128-gcm", cek, nonce);
  decipher.setAuthTag(ciphertext.subarray(ciphertext.length - 16));
  const padded = Buffer.concat([
    decipher.update(ciphertext.subarray(0, ciphertext.length - 16)),
    decipher.final(),
  ]);
  // The last record ends with the delimiter 0x02, then zero padding (RFC 8188 2).
  const end = padded.lastIndexOf(2);
  return padded.subarray(0, end).toString("utf8");
}

async function subscribe(op: Browser, path: string, keys = newBrowserKeys()) {
  const answer = await op.request("POST", "/api/push/subscriptions", {
    endpoint: `https://${PUSH_HOST}${path}`,
    keys: keys.json,
    expirationTime: null,
  });
  expect(answer.statusCode, answer.body).toBe(201);
  return { keys, id: answer.json().subscription.id as string };
}

async function arrived(path: string, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const push = received.find((r) => r.path === path);
    if (push) return push;
    if (Date.now() > deadline) throw new Error(`no push to ${path} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("Web Push", () => {
  it("pushes a new request, encrypted to the subscription and signed with VAPID, without the secret or the approval code", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: SECRET,
      items: [{ name: "API_KEY" }],
      clientName: "push agent",
    });
    const publicKey = (await op.request("GET", "/api/push/vapid-public-key")).json().public_key as string;
    expect(Buffer.from(publicKey, "base64url")).toHaveLength(65);
    const path = `/push/${randomBytes(8).toString("hex")}?x=1`;
    const { keys } = await subscribe(op, path);

    const agent = await connectAgent(url, token);
    const asked = toolAnswer(
      await agent.callTool({
        name: "http_request",
        arguments: {
          item_name: "API_KEY",
          method: "POST",
          path: "/v1/payouts?account=acct_9",
          body: { amount: 5 },
        },
      }),
    );
    expect(asked.status).toBe("pending");
    const push = await arrived(path);

    // RFC 8030 5.2 and RFC 8188: a TTL of 600 s, aes128gcm.
    expect(push.headers.ttl).toBe("600");
    expect(push.headers["content-encoding"]).toBe("aes128gcm");
    expect(push.headers.urgency).toBe("high");
    // RFC 8292 3: "vapid t=<JWT>, k=<the published key>"; the JWT is ES256 for this push service.
    const vapid = /^vapid t=([^,]+), k=(.+)$/.exec(String(push.headers.authorization));
    expect(vapid?.[2]).toBe(publicKey);
    const point = Buffer.from(publicKey, "base64url");
    const key = await importJWK(
      {
        kty: "EC",
        crv: "P-256",
        x: point.subarray(1, 33).toString("base64url"),
        y: point.subarray(33, 65).toString("base64url"),
      },
      "ES256",
    );
    expect(decodeProtectedHeader(vapid![1]!).alg).toBe("ES256");
    const { payload: claims } = await jwtVerify(vapid![1]!, key, { audience: `https://${PUSH_HOST}` });
    expect(claims.exp! - Date.now() / 1000).toBeLessThanOrEqual(24 * 3600);
    expect(String(claims.sub)).toMatch(/^(mailto|https):/);

    const text = decryptPush(push.body, keys);
    expect(JSON.parse(text)).toEqual({
      grant_id: asked.grant_id,
      agent: "push agent",
      item: "API_KEY",
      method: "POST",
      host: "api.latch.test",
      path: "/v1/payouts",
      url: `http://localhost:8787/console#inbox?grant=${asked.grant_id}`,
    });
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain(String(asked.approval_code));
    expect(push.body.toString("latin1")).not.toContain(SECRET);
    await agent.close();
  });

  it("shows the agent's name with its invisible characters as U+FFFD, as every approval does", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: SECRET,
      items: [{ name: "API_KEY" }],
      clientName: "read-only \u202Eetirw agent",
    });
    const path = `/push/${randomBytes(8).toString("hex")}`;
    const { keys } = await subscribe(op, path);
    const agent = await connectAgent(url, token);
    const asked = toolAnswer(
      await agent.callTool({
        name: "http_request",
        arguments: { item_name: "API_KEY", method: "POST", path: "/v1/refunds", body: { amount: 5 } },
      }),
    );
    expect(asked.status).toBe("pending");
    const pushed = JSON.parse(decryptPush((await arrived(path)).body, keys));
    expect(pushed.agent).toBe("read-only \uFFFDetirw agent");
    await agent.close();
  });

  it("deletes a subscription the push service answers 410 for, and pushes to it no more", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: SECRET,
      items: [{ name: "API_KEY" }],
      clientName: "push agent",
    });
    const gone = `/push/gone-${randomBytes(6).toString("hex")}`;
    statusOf.set(gone, 410);
    const { id } = await subscribe(op, gone);
    const agent = await connectAgent(url, token);
    const call = (path: string) =>
      agent.callTool({
        name: "http_request",
        arguments: { item_name: "API_KEY", method: "POST", path, body: {} },
      });
    await call("/v1/first");
    await arrived(gone);
    const deadline = Date.now() + 5_000;
    while (
      (await h.plane.database.db
        .selectFrom("push_subscriptions")
        .select("id")
        .where("id", "=", id)
        .executeTakeFirst()) &&
      Date.now() < deadline
    ) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(await op.request("DELETE", `/api/push/subscriptions/${id}`).then((r) => r.statusCode)).toBe(404);
    const before = received.filter((r) => r.path === gone).length;
    await call("/v1/second");
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(received.filter((r) => r.path === gone).length).toBe(before);
    await agent.close();
  });

  it("pushes to every member who may approve (an approver), never to an auditor", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: SECRET,
      items: [{ name: "API_KEY" }],
      clientName: "push agent",
    });
    const approver = await joinAs(h, op, "approver", "push-approver");
    const auditor = await joinAs(h, op, "auditor", "push-auditor");
    const approverPath = `/push/approver-${randomBytes(6).toString("hex")}`;
    const auditorPath = `/push/auditor-${randomBytes(6).toString("hex")}`;
    await subscribe(approver.browser, approverPath);
    await subscribe(auditor.browser, auditorPath);
    const agent = await connectAgent(url, token);
    await agent.callTool({
      name: "http_request",
      arguments: { item_name: "API_KEY", method: "POST", path: "/v1/roles", body: {} },
    });
    await arrived(approverPath);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(received.some((r) => r.path === auditorPath)).toBe(false);
    await agent.close();
  });

  it("pushes no more to a device whose session signed out", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: SECRET,
      items: [{ name: "API_KEY" }],
      clientName: "push agent",
    });
    const approver = await joinAs(h, op, "approver", "push-signed-out");
    const ownerPath = `/push/owner-${randomBytes(6).toString("hex")}`;
    const phonePath = `/push/phone-${randomBytes(6).toString("hex")}`;
    await subscribe(op, ownerPath);
    await subscribe(approver.browser, phonePath);
    const signedOut = await approver.browser.request("POST", "/api/auth/logout", {});
    expect(signedOut.statusCode, signedOut.body).toBeLessThan(300);
    const agent = await connectAgent(url, token);
    await agent.callTool({
      name: "http_request",
      arguments: { item_name: "API_KEY", method: "POST", path: "/v1/signed-out", body: {} },
    });
    await arrived(ownerPath);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(received.some((r) => r.path === phonePath)).toBe(false);
    await agent.close();
  });

  it("pushes to a device of a session begun with another organisation's single sign-on nothing of this one's", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: SECRET,
      items: [{ name: "API_KEY" }],
      clientName: "push agent",
    });
    const organisationId = (await op.request("GET", "/api/auth/me")).json().organisation.id as string;
    const approver = await joinAs(h, op, "approver", "push-sso");
    const ownerPath = `/push/owner-${randomBytes(6).toString("hex")}`;
    const phonePath = `/push/phone-${randomBytes(6).toString("hex")}`;
    await subscribe(op, ownerPath);
    await subscribe(approver.browser, phonePath);
    // The approver's session, as one begun with another organisation's provider would be.
    const other = await newTestOrganisation(h.plane.database);
    const { session_id: sessionId } = await h.plane.database.db
      .selectFrom("push_subscriptions")
      .select("session_id")
      .where("endpoint", "like", `%${phonePath}`)
      .executeTakeFirstOrThrow();
    const setSsoOrganisation = (id: string) =>
      h.plane.database.db
        .updateTable("operator_sessions")
        .set({ sso_organisation_id: id })
        .where("id", "=", sessionId!)
        .execute();
    await setSsoOrganisation(other);
    const agent = await connectAgent(url, token);
    await agent.callTool({
      name: "http_request",
      arguments: { item_name: "API_KEY", method: "POST", path: "/v1/sso-elsewhere", body: {} },
    });
    await arrived(ownerPath);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(received.some((r) => r.path === phonePath)).toBe(false);

    // Begun with this organisation's own sign-on, it hears of this organisation's requests.
    await setSsoOrganisation(organisationId);
    await agent.callTool({
      name: "http_request",
      arguments: { item_name: "API_KEY", method: "POST", path: "/v1/sso-here", body: {} },
    });
    await arrived(phonePath);
    await agent.close();
  });

  it("refuses an endpoint off PUSH_SERVICE_HOSTS, not https, or with keys that are not RFC 8291's", async () => {
    const op = await readyOperator(h);
    const keys = newBrowserKeys().json;
    const cases: [unknown, RegExp][] = [
      [{ endpoint: "https://evil.example/push/1", keys }, /not a push service/],
      [{ endpoint: `http://${PUSH_HOST}/push/1`, keys }, /https/],
      [{ endpoint: `https://${PUSH_HOST}:8443/push/1`, keys }, /port 443/],
      [{ endpoint: `https://user:pw@${PUSH_HOST}/push/1`, keys }, /user info/],
      [{ endpoint: "https://10.0.0.1/push/1", keys }, /not a push service|domain name/],
      [{ endpoint: "https://notify.windows.com.evil.example/x", keys }, /not a push service/],
      [{ endpoint: `https://${PUSH_HOST}/push/1`, keys: { ...keys, auth: "c2hvcnQ" } }, /keys\.auth/],
      [
        {
          endpoint: `https://${PUSH_HOST}/push/1`,
          keys: { ...keys, p256dh: Buffer.alloc(65, 4).toString("base64url") },
        },
        /keys\.p256dh/,
      ],
    ];
    for (const [body, message] of cases) {
      const refused = await op.request("POST", "/api/push/subscriptions", body);
      expect(refused.statusCode, JSON.stringify(body)).toBe(400);
      expect(refused.json().error.message).toMatch(message);
    }
    // A *.suffix entry takes the names under it.
    const windows = await op.request("POST", "/api/push/subscriptions", {
      endpoint: "https://db5.notify.windows.com/w/?token=abc",
      keys,
    });
    expect(windows.statusCode).toBe(201);
  });

  it("lets an operator delete only their own subscription", async () => {
    const alice = await readyOperator(h);
    const bob = await readyOperator(h);
    const { id } = await subscribe(alice, `/push/own-${randomBytes(4).toString("hex")}`);
    expect((await bob.request("DELETE", `/api/push/subscriptions/${id}`)).statusCode).toBe(404);
    expect((await alice.request("DELETE", `/api/push/subscriptions/${id}`)).statusCode).toBe(200);
    expect((await alice.request("DELETE", `/api/push/subscriptions/${id}`)).statusCode).toBe(404);
  });
});

describe("Web Push when a part fails", () => {
  const subscriptionExists = async (id: string) =>
    (await h.plane.database.db
      .selectFrom("push_subscriptions")
      .select("id")
      .where("id", "=", id)
      .executeTakeFirst()) !== undefined;

  async function agentOf() {
    const { op, token, email } = await operatorWithClient(h, {
      secret: SECRET,
      items: [{ name: "API_KEY" }],
      clientName: "push agent",
    });
    const agent = await connectAgent(url, token);
    const ask = async (path: string) =>
      toolAnswer(
        await agent.callTool({
          name: "http_request",
          arguments: { item_name: "API_KEY", method: "POST", path, body: {} },
        }),
      );
    return { op, email, agent, ask };
  }

  const mailsTo = (email: string) => h.inbox.mails.filter((m) => m.to === email).length;

  it("a push service answering 500, or refusing the connection, keeps the subscription; the request and its mail stand", async () => {
    const { op, email, agent, ask } = await agentOf();
    const failing = `/push/failing-${randomBytes(6).toString("hex")}`;
    statusOf.set(failing, 500);
    const { id: failingId } = await subscribe(op, failing);
    const down = await op.request("POST", "/api/push/subscriptions", {
      endpoint: `https://${DOWN_HOST}/push/down`,
      keys: newBrowserKeys().json,
    });
    expect(down.statusCode, down.body).toBe(201);
    const downId = down.json().subscription.id as string;
    const mailsBefore = mailsTo(email);

    const asked = await ask("/v1/while-push-fails");
    expect(asked.status).toBe("pending");
    await arrived(failing);
    await expect.poll(() => mailsTo(email), { timeout: 10_000 }).toBeGreaterThan(mailsBefore);
    // Give the refused connection its time to fail, then: both devices are still subscribed.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(await subscriptionExists(failingId)).toBe(true);
    expect(await subscriptionExists(downId)).toBe(true);
    const inbox = (await op.request("GET", "/api/inbox")).json().approvals as { grant_id: string }[];
    expect(inbox.map((a) => a.grant_id)).toContain(asked.grant_id);

    // The push service is back: the next request reaches the same subscription.
    statusOf.set(failing, 201);
    const pushesBefore = received.filter((r) => r.path === failing).length;
    await ask("/v1/after-recovery");
    await expect
      .poll(() => received.filter((r) => r.path === failing).length, { timeout: 10_000 })
      .toBe(pushesBefore + 1);
    await agent.close();
  });

  // Last in the file: the proxy stays drained.
  it("with the egress proxy gone, a request still stands, is mailed and audited; the subscription is kept", async () => {
    const { op, email, agent, ask } = await agentOf();
    const path = `/push/no-proxy-${randomBytes(6).toString("hex")}`;
    const { id } = await subscribe(op, path);
    const mailsBefore = mailsTo(email);
    await h.egress.proxy.drain(0);

    const asked = await ask("/v1/without-proxy");
    expect(asked.status).toBe("pending");
    await expect.poll(() => mailsTo(email), { timeout: 10_000 }).toBeGreaterThan(mailsBefore);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(received.some((r) => r.path === path)).toBe(false);
    expect(await subscriptionExists(id)).toBe(true);
    const events = (await op.request("GET", "/api/audit")).json().events as {
      action: string;
      detail: Record<string, unknown>;
    }[];
    expect(events.some((e) => e.action === "grant_requested")).toBe(true);
    expect(h.logs.text()).not.toContain(SECRET);
    expect(h.logs.text()).toContain("push failed");
    await agent.close();
  });
});
