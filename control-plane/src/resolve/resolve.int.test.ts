// The trusted resolve path (spec 4.3 "Trusted resolve") where it meets its edges: a plane that
// serves only some environments of a shared database, proxy faults that are not the bearer's, and
// a revoke that lands while the proxy is opening the value. Real planes, real proxy, real database.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabase } from "../../test/database.ts";
import { LogCapture } from "../../test/egress-harness.ts";
import { type Browser, type HostedHarness, operatorWithClient, startHosted } from "../../test/hosted.ts";
import { BASE, pathOf, pkcePair, RESOURCE, register, token } from "../../test/oauth/oauth-flow.ts";
import { loadConfig } from "../config.ts";
import { buildControlPlane, type ControlPlane } from "../control-plane.ts";
import type { EgressClient } from "../egress/egress-client.ts";
import { loadOrCreateTicketKey, type TicketSigningKey } from "../egress/ticket-key.ts";
import { createMailer } from "../mail/mailer.ts";

const SECRET = "sk_live_resolve_edges_canary_4711";
const PROD_SECRET = "sk_live_resolve_edges_production_0815";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
});
afterAll(async () => {
  await h?.close();
});

/** Another plane on the same database, keys and proxy, configured with `env` and its own egress client. */
async function startPlane(
  env: Record<string, string>,
  options: { egress?: EgressClient; ticketKey?: TicketSigningKey } = {},
): Promise<ControlPlane> {
  const logger = pino({ level: "debug" }, new LogCapture());
  return buildControlPlane({
    config: loadConfig({
      NODE_ENV: "test",
      BASE_URL: BASE,
      DATA_DIR: h.egress.dataDir,
      EGRESS_URL: `127.0.0.1:${h.egress.proxy.port}`,
      ...env,
    }),
    dataDir: h.egress.dataDir,
    ticketKey: options.ticketKey ?? h.egress.ticketKey,
    egress: { client: options.egress ?? h.egress.client, sealingKey: async () => h.egress.proxy.sealingKey },
    logger,
    database: await testDatabase(),
    mailer: createMailer({ smtpUrl: undefined, dataDir: h.egress.dataDir, logger }),
    now: () => h.clock.now,
  });
}

function resolve(app: FastifyInstance, bearer: string, itemName: string) {
  return app.inject({
    method: "POST",
    url: "/runtime/resolve",
    headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
    payload: JSON.stringify({ item_name: itemName }),
  });
}

function mcp(app: FastifyInstance, bearer: string) {
  return app.inject({
    method: "POST",
    url: "/mcp",
    headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
    payload: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
  });
}

async function issue(op: Browser, kind: "model" | "trusted", environment: string) {
  const issued = await op.request("POST", `/api/clients/${kind}`, {
    name: `${kind} ${environment}`,
    environment,
  });
  expect(issued.statusCode, issued.body).toBe(201);
  return issued.json() as { client_id: string; token: string };
}

/** An operator with API_KEY in staging and PROD_KEY in production. */
async function setUp(items: Record<string, unknown>[] = [{ name: "API_KEY" }]) {
  const { op } = await operatorWithClient(h, { secret: SECRET, items, clientName: "agent" });
  const stored = await op.request("POST", "/api/items", {
    name: "PROD_KEY",
    value: PROD_SECRET,
    environment: "production",
    allowed_hosts: ["api.latch.test"],
  });
  expect(stored.statusCode, stored.body).toBe(201);
  return op;
}

async function resolvedEvents(op: Browser): Promise<{ action: string; item_name: string | null }[]> {
  const audit = await op.request("GET", "/api/audit");
  expect(audit.statusCode, audit.body).toBe(200);
  return (audit.json().events as { action: string; item_name: string | null }[]).filter(
    (event) => event.action === "resolved",
  );
}

/** An OAuth access token whose consent chose `environment`, issued by the plane serving both. */
async function accessTokenIn(op: Browser, environment: string): Promise<string> {
  const redirect = "http://127.0.0.1:33419/callback";
  const registered = await register(h.app, { client_name: "Env agent", redirect_uris: [redirect] });
  expect(registered.statusCode, registered.body).toBe(201);
  const clientId = registered.json().client_id as string;
  const pkce = pkcePair();
  const query = new URLSearchParams({
    client_id: clientId,
    redirect_uri: redirect,
    response_type: "code",
    code_challenge: pkce.challenge,
    code_challenge_method: "S256",
    state: "st",
    resource: RESOURCE,
    scope: "mcp",
  });
  const started = await op.request("GET", `/oauth/authorize?${query}`);
  expect(started.statusCode, started.body).toBe(303);
  const uid = new URL(pathOf(String(started.headers.location)), BASE).searchParams.get("uid")!;
  const decided = await op.request(
    "POST",
    "/consent",
    { uid, decision: "approve", environment },
    { accept: "application/json" },
  );
  expect(decided.statusCode, decided.body).toBe(200);
  const resumed = await op.request("GET", pathOf(decided.json().location));
  const code = new URL(String(resumed.headers.location)).searchParams.get("code")!;
  const issued = await token(h.app, {
    grant_type: "authorization_code",
    code,
    redirect_uri: redirect,
    client_id: clientId,
    code_verifier: pkce.verifier,
    resource: RESOURCE,
  });
  expect(issued.statusCode, issued.body).toBe(200);
  return issued.json().access_token as string;
}

describe("a plane that serves only staging, on a database shared with production", () => {
  it("refuses a production avt_ as a bearer that is not live here, and still serves staging's", async () => {
    const op = await setUp();
    const production = await issue(op, "trusted", "production");
    const staging = await issue(op, "trusted", "staging");
    // The plane serving both answers the production client: the token itself is good.
    expect((await resolve(h.app, production.token, "PROD_KEY")).json().value).toBe(PROD_SECRET);
    const before = (await resolvedEvents(op)).length;

    const stagingPlane = await startPlane({ LATCH_ENVIRONMENTS: "staging" });
    try {
      const refused = await resolve(stagingPlane.app, production.token, "PROD_KEY");
      expect(refused.statusCode, refused.body).toBe(401);
      expect(refused.json().error.code).toBe("unauthorized");
      expect(refused.body).not.toContain(PROD_SECRET);
      const served = await resolve(stagingPlane.app, staging.token, "API_KEY");
      expect(served.statusCode, served.body).toBe(200);
      expect(served.json().value).toBe(SECRET);
    } finally {
      await stagingPlane.close();
    }
    // Only the two resolves that answered a value were recorded.
    expect((await resolvedEvents(op)).length).toBe(before + 1);
  });

  it("refuses a production avm_ and a production OAuth access token on MCP, 401 with the challenge", async () => {
    const op = await setUp();
    const production = await issue(op, "model", "production");
    const staging = await issue(op, "model", "staging");
    const accessToken = await accessTokenIn(op, "production");
    expect((await mcp(h.app, production.token)).statusCode).toBe(200);
    expect((await mcp(h.app, accessToken)).statusCode).toBe(200);

    const stagingPlane = await startPlane({ LATCH_ENVIRONMENTS: "staging" });
    try {
      for (const bearer of [production.token, accessToken]) {
        const refused = await mcp(stagingPlane.app, bearer);
        expect(refused.statusCode, refused.body).toBe(401);
        expect(refused.headers["www-authenticate"]).toContain("resource_metadata");
        const tools = await stagingPlane.app.inject({
          method: "GET",
          url: "/mcp/tools",
          headers: { authorization: `Bearer ${bearer}` },
        });
        expect(tools.statusCode, tools.body).toBe(401);
        const requested = await stagingPlane.app.inject({
          method: "POST",
          url: "/api/grants/request",
          headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
          payload: JSON.stringify({ item_name: "PROD_KEY" }),
        });
        expect(requested.statusCode, requested.body).toBe(401);
      }
      expect((await mcp(stagingPlane.app, staging.token)).statusCode).toBe(200);
    } finally {
      await stagingPlane.close();
    }
  });
});

describe("proxy faults are faults, not a refused bearer", () => {
  it("answers 503 egress_unavailable when the proxy refuses the plane's ticket", async () => {
    const op = await setUp();
    const trusted = await issue(op, "trusted", "staging");
    const otherAudience = await startPlane({ EGRESS_AUDIENCE: "another-deployment" });
    // A signing key the proxy was never given (a key file not shared with it).
    const otherKey = await startPlane(
      {},
      { ticketKey: loadOrCreateTicketKey(mkdtempSync(join(tmpdir(), "latch-other-key-"))) },
    );
    try {
      for (const plane of [otherAudience, otherKey]) {
        const answer = await resolve(plane.app, trusted.token, "API_KEY");
        expect(answer.statusCode, answer.body).toBe(503);
        expect(answer.json().error.code).toBe("egress_unavailable");
        expect(answer.body).not.toContain(SECRET);
      }
    } finally {
      await otherAudience.close();
      await otherKey.close();
    }
    expect(await resolvedEvents(op)).toEqual([]);
  });

  it("answers 502 credential_unavailable for a value the proxy cannot open", async () => {
    const op = await setUp([{ name: "API_KEY" }, { name: "DAMAGED" }, { name: "UNKEYED" }]);
    const trusted = await issue(op, "trusted", "staging");
    const { db } = await testDatabase();
    const { organisation_id: organisationId } = await db
      .selectFrom("clients")
      .select("organisation_id")
      .where("id", "=", trusted.client_id)
      .executeTakeFirstOrThrow();
    const items = db.updateTable("items").where("organisation_id", "=", organisationId);
    await items
      .set({ sealed_value: Buffer.from("not a sealed box, not an envelope, 0123456789abcdef") })
      .where("name", "=", "DAMAGED")
      .execute();
    await items.set({ sealing_key_id: "sk_gone_from_the_proxy" }).where("name", "=", "UNKEYED").execute();
    for (const name of ["DAMAGED", "UNKEYED"]) {
      const answer = await resolve(h.app, trusted.token, name);
      expect(answer.statusCode, answer.body).toBe(502);
      expect(answer.json().error.code).toBe("credential_unavailable");
    }
    expect((await resolve(h.app, trusted.token, "API_KEY")).statusCode).toBe(200);
    expect((await resolvedEvents(op)).map((event) => event.item_name)).toEqual(["API_KEY"]);
  });
});

describe("a revoke that lands while the proxy is answering", () => {
  it("answers 401 without the value and records nothing as resolved", async () => {
    const op = await setUp();
    const trusted = await issue(op, "trusted", "staging");
    // The real proxy answers; the plane's client then holds that answer until the test lets it go.
    let answered!: () => void;
    const proxyAnswered = new Promise<void>((done) => {
      answered = done;
    });
    let release!: () => void;
    const released = new Promise<void>((done) => {
      release = done;
    });
    const held: EgressClient = {
      ...h.egress.client,
      async resolve(ticket, context) {
        const value = await h.egress.client.resolve(ticket, context);
        answered();
        await released;
        return value;
      },
    };
    const plane = await startPlane({}, { egress: held });
    try {
      const pending = resolve(plane.app, trusted.token, "API_KEY");
      await proxyAnswered;
      const revoked = await op.request("POST", `/api/clients/${trusted.client_id}/revoke`, {});
      expect(revoked.statusCode, revoked.body).toBe(200);
      release();
      const answer = await pending;
      expect(answer.statusCode, answer.body).toBe(401);
      expect(answer.json().error.code).toBe("unauthorized");
      expect(answer.body).not.toContain(SECRET);
    } finally {
      release();
      await plane.close();
    }
    expect(await resolvedEvents(op)).toEqual([]);
  });
});
