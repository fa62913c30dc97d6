// Provider connect (spec 4.3): every callback ends in the console with its reason, a provider's
// answer the edge refuses too (a control character in error_description, a parameter given twice,
// a code over the limit or not UTF-8), never a JSON error in the operator's browser. The state it
// carries is claimed, so the connect ends there and the code is never sent.
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FAKE_PROVIDER_HOSTS, FakeProviders } from "./fake-providers.ts";
import { type Browser, type HostedHarness, readyOperator, startHosted } from "./hosted.ts";

let h: HostedHarness;
let fakes: FakeProviders;

beforeAll(async () => {
  h = await startHosted({ providerHosts: [...FAKE_PROVIDER_HOSTS] });
  fakes = new FakeProviders();
  h.egress.setHandler(fakes.handler);
}, 60_000);

afterAll(async () => {
  await h?.close();
});

async function started(op: Browser): Promise<{ code: string; state: string }> {
  const answer = await op.request("POST", "/api/integrations/github/start", {
    item_name: "GITHUB",
    environment: "staging",
  });
  expect(answer.statusCode, answer.body).toBe(200);
  return fakes.authorize("github", answer.json().authorize_url);
}

async function connectFailedRows(op: Browser): Promise<number> {
  const organisationId = (await op.request("GET", "/api/auth/me")).json().organisation.id as string;
  const rows = await sql<{ n: number }>`
    select count(*)::int as n from audit_events
    where organisation_id = ${organisationId} and action = 'connect_failed'`.execute(h.plane.database.db);
  return rows.rows[0]?.n ?? 0;
}

describe("a provider's answer the edge refuses", () => {
  it("goes back to the console with its reason, the state spent and the code never sent", async () => {
    const op = await readyOperator(h);
    const created = await op.request("POST", "/api/items", {
      name: "GITHUB",
      value: fakes.clients.github.clientSecret,
      username: fakes.clients.github.clientId,
      kind: "client_secret",
      inject: "client_credentials",
      environment: "staging",
      allowed_hosts: ["api.github.com", "github.com"],
    });
    expect(created.statusCode, created.body).toBe(201);

    // A refusal whose description holds a newline: the provider said no.
    const denied = await started(op);
    const refusal = `error=access_denied&error_description=${encodeURIComponent("no\nthanks<script>")}&state=${denied.state}`;
    const deniedAnswer = await op.request("GET", `/connect/callback?${refusal}`);
    expect(deniedAnswer.statusCode, deniedAnswer.body).toBe(303);
    expect(deniedAnswer.headers.location).toBe("/console#vault?connect_error=github&reason=provider_denied");

    // A code the edge cannot read (over the limit, not UTF-8, given twice): exchange_failed,
    // recorded, and the state spent, so the good code cannot finish it afterwards either.
    for (const unreadable of [
      (s: { code: string; state: string }) => `code=${"c".repeat(3000)}&state=${s.state}`,
      (s: { code: string; state: string }) => `code=%ED%A0%80&state=${s.state}`,
      (s: { code: string; state: string }) => `code=${s.code}&code=${s.code}&state=${s.state}`,
    ]) {
      const answer = await started(op);
      const before = await connectFailedRows(op);
      const refused = await op.request("GET", `/connect/callback?${unreadable(answer)}`);
      expect(refused.statusCode, refused.body).toBe(303);
      expect(refused.headers.location).toBe("/console#vault?connect_error=github&reason=exchange_failed");
      expect(await connectFailedRows(op)).toBe(before + 1);
      const again = await op.request("GET", `/connect/callback?${new URLSearchParams(answer)}`);
      expect(again.headers.location).toBe("/console#vault?connect_error=provider&reason=state_expired");
    }

    // A state given twice, or one no start made: nothing is claimed.
    const twice = await started(op);
    const ambiguous = await op.request(
      "GET",
      `/integrations/github/callback?code=${twice.code}&state=${twice.state}&state=x`,
    );
    expect(ambiguous.headers.location).toBe("/console#vault?connect_error=github&reason=state_expired");
    const long = await op.request("GET", `/connect/callback?code=x&state=${"s".repeat(300)}`);
    expect(long.headers.location).toBe("/console#vault?connect_error=provider&reason=state_expired");
    const finished = await op.request("GET", `/connect/callback?${new URLSearchParams(twice)}`);
    expect(finished.headers.location).toBe("/console#vault?connected=github");

    // Signed out, as any callback: to sign-in.
    const signedOut = await h.app.inject({ method: "GET", url: "/connect/callback?code=x&state=%00" });
    expect(signedOut.statusCode).toBe(302);
    expect(signedOut.headers.location).toBe("/sign-in");
  });

  it("another route's query refusal is still JSON", async () => {
    const op = await readyOperator(h);
    const refused = await op.request("GET", "/api/audit?item_name=%00");
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error.code).toBe("invalid_request");
  });
});
