import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Action,
  mayPerform,
  ROLES,
  type Role,
  type RouteAction,
  rolesFor,
} from "../src/auth/permissions.ts";
import {
  Browser,
  type HostedHarness,
  lastCodeFor,
  readyOperator,
  startHosted,
  uniqueEmail,
} from "./hosted.ts";
import { joinAs } from "./teams.ts";

type Gate = "session" | "ready";

interface Route {
  method: "GET" | "POST" | "PUT" | "DELETE" | "PATCH";
  path: string;
  body?: unknown;
  /** session: any signed-in browser; ready: past the authenticator step. */
  gate: Gate;
  /** What an operator does there (auth/permissions.ts): the route must declare exactly this. */
  action: RouteAction;
  /** Spec 4.3: need requests answer 404, not 401, to a caller with no session. */
  anonymousStatus?: 404;
  /** Allowed, the call would change the organisation under the suite (leaving it): not made. */
  isSkippedWhenAllowed?: true;
}

const ROUTES: Route[] = [
  { method: "POST", path: "/api/auth/totp/start", body: {}, gate: "session", action: "account" },
  { method: "GET", path: "/api/auth/totp/pending", gate: "session", action: "account" },
  {
    method: "POST",
    path: "/api/auth/totp/confirm",
    body: { code: "000000" },
    gate: "session",
    action: "account",
  },
  {
    method: "POST",
    path: "/api/auth/totp/verify",
    body: { code: "000000" },
    gate: "session",
    action: "account",
  },
  { method: "GET", path: "/api/auth/me", gate: "session", action: "account" },
  { method: "POST", path: "/api/auth/passkey/options", body: {}, gate: "session", action: "account" },
  {
    method: "POST",
    path: "/api/auth/passkey/verify",
    body: { response: {} },
    gate: "session",
    action: "account",
  },
  { method: "GET", path: "/api/auth/passkeys", gate: "ready", action: "account" },
  { method: "POST", path: "/api/auth/passkeys/options", body: {}, gate: "ready", action: "account" },
  {
    method: "POST",
    path: "/api/auth/passkeys",
    body: { name: "Key", response: {} },
    gate: "ready",
    action: "account",
  },
  { method: "DELETE", path: "/api/auth/passkeys/pky_x", gate: "ready", action: "account" },
  { method: "DELETE", path: "/api/auth/totp", gate: "ready", action: "account" },
  { method: "POST", path: "/api/auth/logout", gate: "session", action: "account" },
  {
    method: "POST",
    path: "/api/auth/backup-codes/regenerate",
    body: { code: "000000" },
    gate: "ready",
    action: "account",
  },
  { method: "POST", path: "/api/orgs", body: { name: "Suite org" }, gate: "ready", action: "account" },
  {
    method: "DELETE",
    path: "/api/orgs",
    body: { confirm_name: "nope" },
    gate: "ready",
    action: "org.manage",
  },
  {
    method: "POST",
    path: "/api/orgs/switch",
    body: { organisation_id: "org_x" },
    gate: "ready",
    action: "account",
  },
  { method: "GET", path: "/api/access", gate: "ready", action: "org.read" },
  { method: "GET", path: "/api/access/events", gate: "ready", action: "org.read" },
  { method: "POST", path: "/api/sessions/ses_x/revoke", gate: "ready", action: "org.read" },
  { method: "POST", path: "/api/sessions/revoke-others", gate: "ready", action: "account" },
  { method: "GET", path: "/api/items", gate: "ready", action: "org.read" },
  {
    method: "POST",
    path: "/api/items",
    body: { name: "X", value: "v", allowed_hosts: ["a.example.com"] },
    gate: "ready",
    action: "credentials.write",
  },
  { method: "POST", path: "/api/items/itm_x", body: {}, gate: "ready", action: "credentials.write" },
  { method: "POST", path: "/api/items/itm_x/meta", body: {}, gate: "ready", action: "credentials.write" },
  {
    method: "POST",
    path: "/api/items/itm_x/rotate",
    body: { value: "v" },
    gate: "ready",
    action: "credentials.write",
  },
  { method: "DELETE", path: "/api/items/itm_x", gate: "ready", action: "credentials.write" },
  {
    method: "POST",
    path: "/api/folders",
    body: { environment: "staging", name: "f" },
    gate: "ready",
    action: "credentials.write",
  },
  { method: "POST", path: "/api/clients/model", body: {}, gate: "ready", action: "clients.write" },
  { method: "POST", path: "/api/clients/trusted", body: {}, gate: "ready", action: "clients.write" },
  { method: "POST", path: "/api/clients/cli_x/rotate", gate: "ready", action: "clients.write" },
  { method: "POST", path: "/api/clients/cli_x/revoke", gate: "ready", action: "clients.write" },
  {
    method: "POST",
    path: "/api/grants/grt_x/approve",
    body: { policy: "prompt" },
    gate: "ready",
    action: "approvals.decide",
  },
  { method: "POST", path: "/api/grants/grt_x/revoke", gate: "ready", action: "approvals.decide" },
  {
    method: "POST",
    path: "/api/grants/approve-by-code",
    body: { code: "12345678" },
    gate: "ready",
    action: "approvals.decide",
  },
  {
    method: "POST",
    path: "/api/grants/find-by-code",
    body: { code: "12345678" },
    gate: "ready",
    action: "approvals.decide",
  },
  { method: "GET", path: "/api/grants", gate: "ready", action: "org.read" },
  { method: "GET", path: "/api/approvals", gate: "ready", action: "org.read" },
  { method: "GET", path: "/api/inbox", gate: "ready", action: "org.read" },
  // Allowed, the live inbox is a stream that never ends (control-plane/test/inbox-stream.int.test.ts).
  {
    method: "GET",
    path: "/api/inbox/stream",
    gate: "ready",
    action: "org.read",
    isSkippedWhenAllowed: true,
  },
  { method: "GET", path: "/api/push/vapid-public-key", gate: "ready", action: "account" },
  {
    method: "POST",
    path: "/api/push/subscriptions",
    body: { endpoint: "https://fcm.googleapis.com/fcm/send/x", keys: { p256dh: "x", auth: "x" } },
    gate: "ready",
    action: "account",
  },
  { method: "DELETE", path: "/api/push/subscriptions/psh_x", gate: "ready", action: "account" },
  { method: "GET", path: "/api/policies", gate: "ready", action: "org.read" },
  { method: "PUT", path: "/api/policies", body: { rules: [] }, gate: "ready", action: "policies.write" },
  {
    method: "POST",
    path: "/api/policies/preview",
    body: { rules: [] },
    gate: "ready",
    action: "org.read",
  },
  {
    method: "POST",
    path: "/api/policies/proposal/confirm",
    body: { proposal_id: "ppl_x" },
    gate: "ready",
    action: "policies.write",
  },
  { method: "DELETE", path: "/api/policies/proposal", gate: "ready", action: "policies.write" },
  { method: "GET", path: "/api/audit", gate: "ready", action: "org.read" },
  { method: "GET", path: "/api/audit/export?format=jsonl", gate: "ready", action: "audit.export" },
  {
    method: "POST",
    path: "/approve?token=abcdefghijklmnopqrstuvwxyz",
    gate: "ready",
    action: "approvals.decide",
  },
  { method: "GET", path: "/api/audit/ledger", gate: "ready", action: "audit.export" },
  { method: "GET", path: "/api/audit/verify", gate: "ready", action: "audit.export" },
  {
    method: "POST",
    path: "/api/integrations/spotify/start",
    body: { item_name: "SPOTIFY" },
    gate: "ready",
    action: "credentials.write",
  },
  { method: "GET", path: "/api/need-items/ned_x", gate: "ready", action: "org.read", anonymousStatus: 404 },
  {
    method: "POST",
    path: "/api/need-items/ned_x/fulfill",
    body: { value: "v" },
    gate: "ready",
    action: "credentials.write",
    anonymousStatus: 404,
  },
  {
    method: "POST",
    path: "/api/need-items/ned_x/deny",
    gate: "ready",
    action: "approvals.decide",
    anonymousStatus: 404,
  },
  { method: "GET", path: "/consent/details?uid=abc", gate: "ready", action: "account" },
  {
    method: "POST",
    path: "/consent",
    body: { uid: "abc", decision: "deny" },
    gate: "ready",
    action: "account",
  },
  { method: "GET", path: "/api/orgs/members", gate: "ready", action: "org.read" },
  {
    method: "POST",
    path: "/api/orgs/members/invite",
    body: { email: "not-an-address", role: "auditor" },
    gate: "ready",
    action: "members.write",
  },
  {
    method: "POST",
    path: "/api/orgs/members/opr_x/role",
    body: { role: "auditor" },
    gate: "ready",
    action: "members.write",
  },
  { method: "DELETE", path: "/api/orgs/members/opr_x", gate: "ready", action: "members.write" },
  { method: "DELETE", path: "/api/orgs/invites/inv_x", gate: "ready", action: "members.write" },
  { method: "POST", path: "/api/orgs/leave", gate: "ready", action: "org.read", isSkippedWhenAllowed: true },
  {
    method: "POST",
    path: "/api/orgs/transfer",
    body: { operator_id: "opr_x" },
    gate: "ready",
    action: "org.manage",
  },
  { method: "GET", path: "/api/orgs/settings", gate: "ready", action: "org.read" },
  { method: "PATCH", path: "/api/orgs/settings", body: {}, gate: "ready", action: "org.manage" },
  { method: "POST", path: "/invite", body: { token: "x" }, gate: "ready", action: "account" },
  { method: "GET", path: "/api/orgs/sso", gate: "ready", action: "org.read" },
  { method: "PUT", path: "/api/orgs/sso", body: {}, gate: "ready", action: "org.manage" },
  { method: "DELETE", path: "/api/orgs/sso", gate: "ready", action: "org.manage" },
  { method: "POST", path: "/api/orgs/sso/verify-domains", body: {}, gate: "ready", action: "org.manage" },
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

/**
 * Routes anyone may call: pages (which redirect to sign-in themselves), discovery, the first two
 * sign-in steps, health, static assets. A route that is neither here, in ROUTES nor in
 * BEARER_ROUTES fails the suite: a new route cannot be left out.
 */
const PUBLIC_ROUTES = [
  /^GET \/(health|ready)$/,
  /^POST \/api\/auth\/otp\/(send|verify)$/,
  // "Sign in with a passkey": the answer is bound to this browser's cookie and proves the account.
  /^POST \/api\/auth\/passkey\/sign-in(\/options)?$/,
  // Single sign-on: finding the organisation by address, and the browser's way through its provider
  // (the callback is bound to the browser's cookie and proves the account itself).
  /^POST \/api\/auth\/sso\/discover$/,
  /^GET \/sso\/(:org_slug|callback)$/,
  /^GET \/(sign-in|sign-up|enroll-totp|verify-totp|console|approve|invite|collect\/:id)$/,
  // The provider's redirect back: a signed-out browser is sent to /sign-in (connect.routes.ts).
  /^GET \/(connect\/callback|integrations\/:provider\/callback)$/,
  // Each asset also answers under its content-hashed name (page-files.ts hashedName).
  /^(GET|OPTIONS) \/assets\/[a-z-]+(\.[0-9a-f]{12})?\.(js|css)$/,
  // The public site (site.routes.ts): the landing page, docs, discovery files, icons; each answers
  // its CORS preflight (rule 6).
  /^(GET|OPTIONS) \/(|docs|docs\/[a-z-]+|robots\.txt|sitemap\.xml|security\.txt|llms\.txt|llms-full\.txt)$/,
  /^(GET|OPTIONS) \/\.well-known\/security\.txt$/,
  /^GET \/\.well-known\/latch-audit-keys\.json$/,
  // The OpenAPI document (openapi/openapi.routes.ts); /docs/api is matched with the docs above.
  /^(GET|OPTIONS) \/openapi\.json$/,
  /^(GET|OPTIONS) \/[a-z0-9-]+(\.[0-9a-f]{12})?\.(png|svg|ico|webmanifest)$/,
  /^GET \/\.well-known\/oauth-protected-resource(\/mcp)?$/,
  /^OPTIONS \/mcp$/,
  // The authorization server: metadata, its CORS preflights, the endpoints of the RFCs (each
  // authenticates by its own rules: PKCE, the client id, the interaction cookie) and the pages.
  /^(GET|OPTIONS) \/\.well-known\/(oauth-authorization-server|openid-configuration)$/,
  /^OPTIONS \/\.well-known\/oauth-protected-resource(\/mcp)?$/,
  /^OPTIONS \/oauth\/(token|register|revoke|jwks|device\/auth)$/,
  /^GET \/oauth\/(authorize|authorize\/:uid|jwks)$/,
  /^POST \/oauth\/(token|register|revoke|device\/auth)$/,
  /^(GET|POST) \/device$/,
  /^GET \/device\/:uid$/,
  /^GET \/consent$/,
];

/**
 * Public pages whose work an operator's role decides: opening an approval link approves, and a
 * provider's redirect back stores a credential. Each declares that action.
 */
const PUBLIC_ACTIONS: Record<string, RouteAction> = {
  "GET /approve": "approvals.decide",
  "GET /connect/callback": "credentials.write",
  "GET /integrations/:provider/callback": "credentials.write",
};

/** Routes for client bearers: who may call, and how everyone else is answered. */
const BEARER_ROUTES: {
  method: "GET" | "POST";
  path: string;
  accepts: string[];
  challenge?: boolean;
  /** What an operator does there, when operators may call it too. */
  action?: Action;
}[] = [
  { method: "POST", path: "/mcp", accepts: ["model"], challenge: true },
  { method: "GET", path: "/mcp/tools", accepts: ["model"], challenge: true },
  { method: "GET", path: "/mcp", accepts: ["model"], challenge: true },
  { method: "POST", path: "/runtime/resolve", accepts: ["trusted"] },
  { method: "POST", path: "/api/grants/request", accepts: ["operator", "model"], action: "approvals.decide" },
];

const matches = (url: string, path: string) =>
  new RegExp(`^${url.replace(/:[^/]+/g, "[^/]+")}$`).test(path.split("?")[0]!);

describe("every registered route is in this suite", () => {
  it("is an operator route of ROUTES, a bearer route or a listed public route, with the principals it declares", () => {
    const unlisted: string[] = [];
    for (const route of h.app.registeredRoutes) {
      const key = `${route.method} ${route.url}`;
      const operator = ROUTES.find((r) => r.method === route.method && matches(route.url, r.path));
      const bearer = BEARER_ROUTES.find((r) => r.method === route.method && r.path === route.url);
      if (operator) {
        expect(route.principals, key).toEqual(["operator"]);
        expect(route.action, key).toBe(operator.action);
      } else if (bearer) {
        expect(route.principals, key).toEqual(bearer.accepts);
        expect(route.action, key).toBe(bearer.action);
      } else if (PUBLIC_ROUTES.some((p) => p.test(key))) {
        expect(route.principals, key).toBeUndefined();
        expect(route.action, key).toBe(PUBLIC_ACTIONS[key]);
      } else unlisted.push(key);
    }
    expect(unlisted).toEqual([]);
  });
});

describe.each(BEARER_ROUTES)("$method $path (a bearer route)", (route) => {
  const send = (headers: Record<string, string>, browser = new Browser(h.app)) =>
    browser.request(route.method, route.path, route.method === "POST" ? {} : undefined, headers);

  it("answers 401 to no credential and to an invalid bearer, with MCP's challenge where it has one", async () => {
    const cases: Record<string, string>[] = [
      {},
      { authorization: "Bearer avm_notarealtokenatall_000000000" },
    ];
    for (const headers of cases) {
      const response = await send(headers);
      if (route.accepts.includes("operator") && !("authorization" in headers)) {
        expect(response.statusCode).toBe(401);
        continue;
      }
      expect(response.statusCode, JSON.stringify(headers)).toBe(401);
      expect(response.json().error.code).toBe("unauthorized");
      if (route.challenge) expect(response.headers["www-authenticate"]).toMatch(/resource_metadata=/);
    }
  });

  it("answers 403 to a client of the other kind", async () => {
    const others = [
      ...(route.accepts.includes("model") ? [] : [modelToken]),
      ...(route.accepts.includes("trusted") ? [] : [trustedToken]),
    ];
    for (const token of others) {
      const response = await send({ authorization: `Bearer ${token}` });
      expect(response.statusCode, token.slice(0, 4)).toBe(403);
      expect(response.json().error.code).toBe("forbidden");
    }
  });

  if (!route.accepts.includes("operator")) {
    it("treats an operator's session cookie as no credential at all (401)", async () => {
      const response = await send({}, pending);
      expect(response.statusCode).toBe(401);
    });
  }
});

/**
 * The permission table (DECISIONS "Teams") on every route: a member of each role, in one
 * organisation, calls each route that declares an organisation's action. A role the table refuses
 * gets 403 forbidden_role naming the roles that may; a role it allows gets past the role check
 * (whatever the route then answers to the suite's placeholder ids and bodies).
 */
describe("each role against each route's declared action", () => {
  const members = new Map<Role, Browser>();
  beforeAll(async () => {
    const owner = await readyOperator(h, "suite-owner");
    members.set("owner", owner);
    for (const role of ["admin", "approver", "auditor"] as const) {
      members.set(role, (await joinAs(h, owner, role, `suite-${role}`)).browser);
    }
  }, 120_000);

  const organisationRoutes = [
    ...ROUTES.filter((r) => r.action !== "account").map((r) => ({ ...r, action: r.action as Action })),
    { method: "POST" as const, path: "/api/grants/request", body: {}, action: "approvals.decide" as Action },
  ];

  describe.each([...ROLES])("a member whose role is %s", (role) => {
    it.each(organisationRoutes)("$method $path ($action)", async (route) => {
      const browser = members.get(role)!;
      const isAllowed = mayPerform(role, route.action);
      if (isAllowed && "isSkippedWhenAllowed" in route && route.isSkippedWhenAllowed) return;
      const response = await browser.request(route.method, route.path, route.body);
      const code = /^application\/json(;|$)/.test(String(response.headers["content-type"]))
        ? response.json().error?.code
        : undefined;
      if (isAllowed) {
        expect(code, `${role} ${route.method} ${route.path}: ${response.body}`).not.toBe("forbidden_role");
        return;
      }
      expect(response.statusCode, response.body).toBe(403);
      const error = response.json().error;
      expect(error.code).toBe("forbidden_role");
      expect(error.required_roles).toEqual(rolesFor(route.action));
      expect(error.role).toBe(role);
      for (const needed of rolesFor(route.action)) expect(error.message).toContain(needed);
    });
  });

  it("an approval link opened by an auditor approves nothing: the page answers 403 naming the roles", async () => {
    const response = await members
      .get("auditor")!
      .request("GET", "/approve?token=abcdefghijklmnopqrstuvwxyz");
    expect(response.statusCode).toBe(403);
    expect(response.body).toContain("owner, admin or approver role");
  });

  it("every member still reads their own account, whatever their role", async () => {
    for (const [role, browser] of members) {
      const me = (await browser.request("GET", "/api/auth/me")).json();
      expect(me.organisation.role, role).toBe(role);
    }
  });
});
