import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  Browser,
  type HostedHarness,
  lastCodeFor,
  readyOperator,
  startHosted,
  uniqueEmail,
} from "./hosted.ts";

type Gate = "session" | "ready";

interface Route {
  method: "GET" | "POST" | "DELETE";
  path: string;
  body?: unknown;
  /** session: any signed-in browser; ready: past the authenticator step. */
  gate: Gate;
  /** Spec 4.3: need requests answer 404, not 401, to a caller with no session. */
  anonymousStatus?: 404;
}

const ROUTES: Route[] = [
  { method: "POST", path: "/api/auth/totp/start", body: {}, gate: "session" },
  { method: "GET", path: "/api/auth/totp/pending", gate: "session" },
  { method: "POST", path: "/api/auth/totp/confirm", body: { code: "000000" }, gate: "session" },
  { method: "POST", path: "/api/auth/totp/verify", body: { code: "000000" }, gate: "session" },
  { method: "GET", path: "/api/auth/me", gate: "session" },
  { method: "POST", path: "/api/auth/logout", gate: "session" },
  { method: "POST", path: "/api/auth/backup-codes/regenerate", body: { code: "000000" }, gate: "ready" },
  { method: "POST", path: "/api/orgs", body: { name: "Suite org" }, gate: "ready" },
  { method: "DELETE", path: "/api/orgs", body: { confirm_name: "nope" }, gate: "ready" },
  { method: "GET", path: "/api/access", gate: "ready" },
  { method: "GET", path: "/api/access/events", gate: "ready" },
  { method: "POST", path: "/api/sessions/ses_x/revoke", gate: "ready" },
  { method: "POST", path: "/api/sessions/revoke-others", gate: "ready" },
  { method: "GET", path: "/api/items", gate: "ready" },
  {
    method: "POST",
    path: "/api/items",
    body: { name: "X", value: "v", allowed_hosts: ["a.example.com"] },
    gate: "ready",
  },
  { method: "POST", path: "/api/items/itm_x", body: {}, gate: "ready" },
  { method: "POST", path: "/api/items/itm_x/meta", body: {}, gate: "ready" },
  { method: "POST", path: "/api/items/itm_x/rotate", body: { value: "v" }, gate: "ready" },
  { method: "DELETE", path: "/api/items/itm_x", gate: "ready" },
  { method: "POST", path: "/api/folders", body: { environment: "staging", name: "f" }, gate: "ready" },
  { method: "POST", path: "/api/clients/model", body: {}, gate: "ready" },
  { method: "POST", path: "/api/clients/trusted", body: {}, gate: "ready" },
  { method: "POST", path: "/api/clients/cli_x/rotate", gate: "ready" },
  { method: "POST", path: "/api/clients/cli_x/revoke", gate: "ready" },
  { method: "POST", path: "/api/grants/grt_x/approve", body: { policy: "prompt" }, gate: "ready" },
  { method: "POST", path: "/api/grants/grt_x/revoke", gate: "ready" },
  { method: "POST", path: "/api/grants/approve-by-code", body: { code: "12345678" }, gate: "ready" },
  { method: "GET", path: "/api/grants", gate: "ready" },
  { method: "GET", path: "/api/inbox", gate: "ready" },
  { method: "GET", path: "/api/audit", gate: "ready" },
  { method: "POST", path: "/approve?token=abcdefghijklmnopqrstuvwxyz", gate: "ready" },
  { method: "GET", path: "/api/need-items/ned_x", gate: "ready", anonymousStatus: 404 },
  {
    method: "POST",
    path: "/api/need-items/ned_x/fulfill",
    body: { value: "v" },
    gate: "ready",
    anonymousStatus: 404,
  },
  { method: "POST", path: "/api/need-items/ned_x/deny", gate: "ready", anonymousStatus: 404 },
];

let h: HostedHarness;
let pending: Browser;
let modelToken: string;
let trustedToken: string;

beforeAll(async () => {
  h = await startHosted();
  pending = new Browser(h.app);
  const email = uniqueEmail("suite");
  await pending.request("POST", "/api/auth/otp/send", { email });
  await pending.request("POST", "/api/auth/otp/verify", { email, otp: lastCodeFor(h.inbox, email) });
  const organisation = await h.plane.database.db
    .selectFrom("organisations")
    .select("id")
    .limit(1)
    .executeTakeFirstOrThrow();
  const issuer = h.plane.services.clients;
  modelToken = (await issuer.issueClient(organisation.id, "model", {})).token;
  trustedToken = (await issuer.issueClient(organisation.id, "trusted", {})).token;
}, 60_000);

afterAll(async () => {
  await h.close();
});

const label = (r: Route) => `${r.method} ${r.path}`;

describe.each(ROUTES)("$method $path", (route) => {
  const anonymous = route.anonymousStatus ?? 401;

  it(`answers ${anonymous} to a caller with no session`, async () => {
    const response = await new Browser(h.app).request(route.method, route.path, route.body);
    expect(response.statusCode, label(route)).toBe(anonymous);
    expect(response.json().error.code).toBe(anonymous === 401 ? "unauthorized" : "not_found");
  });

  if (anonymous === 401) {
    it("answers 403 to a model or trusted client token (wrong channel) and 401 to an invalid bearer", async () => {
      for (const token of [modelToken, trustedToken]) {
        const response = await new Browser(h.app).request(route.method, route.path, route.body, {
          authorization: `Bearer ${token}`,
        });
        // POST /api/grants/request is open to model tokens; every route here is operator-only.
        expect(response.statusCode, `${label(route)} with ${token.slice(0, 4)}`).toBe(403);
      }
      const invalid = await new Browser(h.app).request(route.method, route.path, route.body, {
        authorization: "Bearer avm_notarealtokenatall_000000000",
      });
      expect(invalid.statusCode).toBe(401);
    });

    it("answers 401 to a forged session cookie", async () => {
      const forged = new Browser(h.app);
      forged.cookies.set("latch_session", "forged-session-token");
      forged.cookies.set("latch_csrf", "forged");
      expect((await forged.request(route.method, route.path, route.body)).statusCode).toBe(401);
    });
  }

  it("answers 401 to an invalid bearer and 403 to a client token even beside a session cookie (spec 5 rule 7, 7)", async () => {
    const invalid = await pending.request(route.method, route.path, route.body, {
      authorization: "Bearer avm_notarealtokenatall_000000000",
    });
    expect(invalid.statusCode, label(route)).toBe(401);
    for (const token of [modelToken, trustedToken]) {
      const response = await pending.request(route.method, route.path, route.body, {
        authorization: `Bearer ${token}`,
      });
      expect(response.statusCode, `${label(route)} with ${token.slice(0, 4)}`).toBe(403);
      expect(response.json().error.code).toBe("forbidden");
    }
  });

  it("answers 403 to a foreign Origin, without a CORS allow header", async () => {
    const evil = new Browser(h.app, "https://evil.example");
    for (const [k, v] of pending.cookies) evil.cookies.set(k, v);
    const response = await evil.request(route.method, route.path, route.body);
    expect(response.statusCode).toBe(403);
    expect(response.headers["access-control-allow-origin"]).toBeUndefined();
  });

  it("answers 403 to a foreign Origin when the path is percent-encoded (the router decodes it)", async () => {
    const evil = new Browser(h.app, "https://evil.example");
    for (const [k, v] of pending.cookies) evil.cookies.set(k, v);
    // "/api/items" -> "/%61pi/items", "/approve" -> "/%61pprove": the same route to the router.
    const encoded = route.path.replace(/^\/(.)/, (_m, c: string) => `/%${c.charCodeAt(0).toString(16)}`);
    const response = await evil.request(route.method, encoded, route.body);
    expect(response.statusCode, encoded).toBe(403);
    expect(response.json().error.code).toBe("forbidden");
  });

  if (route.method !== "GET") {
    it("answers 403 csrf_failed without the session's X-CSRF-Token", async () => {
      const response = await pending.request(route.method, route.path, route.body, {
        "x-csrf-token": "wrong",
      });
      expect(response.statusCode).toBe(403);
      expect(response.json().error.code).toBe("csrf_failed");
    });
  }

  if (route.gate === "ready") {
    it("answers 403 mfa_required to a session that has not passed the authenticator step", async () => {
      const response = await pending.request(route.method, route.path, route.body);
      expect(response.statusCode).toBe(403);
      expect(response.json()).toMatchObject({ error: "mfa_required", enroll_url: "/enroll-totp" });
    });
  }
});

describe("another organisation's ids", () => {
  it("are 404: a session cannot revoke a session acting in another organisation", async () => {
    const alice = await readyOperator(h);
    const bob = await readyOperator(h);
    const bobSession = (await bob.request("GET", "/api/access")).json().sessions[0].session_id;
    const attempt = await alice.request("POST", `/api/sessions/${bobSession}/revoke`);
    expect(attempt.statusCode).toBe(404);
    expect((await bob.request("GET", "/api/auth/me")).statusCode).toBe(200);
  });
});
