// The OAuth leak test (issue 11 "Done when"): refresh tokens, access tokens (and their jti),
// authorization codes and the sign-in cookies of the authorization server never appear in a log
// line of either tier, an error, the Access view or its ledger, or any database column in clear.
// Also: signing out ends the operator's OAuth sign-in session.
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HostedHarness, readyOperator, startHosted } from "../hosted.ts";
import { authorizeAndConsent, pkcePair, RESOURCE, register, token } from "./oauth-flow.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
});
afterAll(async () => {
  await h?.close();
});

async function everyTableText(): Promise<[string, string][]> {
  const db = h.plane.database.db;
  const tables = await sql<{ tablename: string }>`
    select tablename from pg_tables where schemaname = 'public'`.execute(db);
  const out: [string, string][] = [];
  for (const { tablename } of tables.rows) {
    const rows = await sql<{
      row: string;
    }>`select row_to_json(t)::text as row from ${sql.table(tablename)} t`.execute(db);
    out.push([`table ${tablename}`, rows.rows.map((r) => r.row).join("\n")]);
  }
  return out;
}

describe("OAuth secrets", () => {
  it("never appear in logs, errors, the Access view or the database", async () => {
    const secrets: string[] = [];
    const answers: string[] = [];
    const op = await readyOperator(h, "oauth-canary");
    const redirectUri = "http://127.0.0.1:41000/callback";
    const clientId = (
      await register(h.app, { client_name: "Canary agent", redirect_uris: [redirectUri] })
    ).json().client_id as string;
    const pkce = pkcePair();
    secrets.push(pkce.verifier);
    const { code } = await authorizeAndConsent(op, { clientId, redirectUri, challenge: pkce.challenge });
    secrets.push(code!);
    const issued = await token(h.app, {
      grant_type: "authorization_code",
      code: code!,
      redirect_uri: redirectUri,
      client_id: clientId,
      code_verifier: pkce.verifier,
      resource: RESOURCE,
    });
    const first = issued.json();
    const refreshed = (
      await token(h.app, {
        grant_type: "refresh_token",
        refresh_token: first.refresh_token,
        client_id: clientId,
      })
    ).json();
    for (const t of [first, refreshed]) {
      secrets.push(t.access_token, t.refresh_token);
      const claims = JSON.parse(Buffer.from(t.access_token.split(".")[1], "base64url").toString());
      secrets.push(claims.jti);
    }
    // A bad bearer, a replayed refresh token, a revoked access token: errors must not echo them.
    const mcp = (bearer: string) =>
      h.app.inject({
        method: "POST",
        url: "/mcp",
        headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
        payload: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
      });
    answers.push((await mcp(`${first.access_token}x`)).body);
    answers.push(
      (
        await token(h.app, {
          grant_type: "refresh_token",
          refresh_token: first.refresh_token,
          client_id: clientId,
        })
      ).body,
    );
    answers.push(
      (
        await h.app.inject({
          method: "POST",
          url: "/oauth/revoke",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          payload: new URLSearchParams({ token: refreshed.access_token, client_id: clientId }).toString(),
        })
      ).body,
    );
    answers.push((await mcp(refreshed.access_token)).body);
    // The code again: refused (and its grant revoked), and the answer must not repeat it.
    answers.push(
      (
        await token(h.app, {
          grant_type: "authorization_code",
          code: code!,
          redirect_uri: redirectUri,
          client_id: clientId,
          code_verifier: pkce.verifier,
        })
      ).body,
    );
    for (const path of ["/api/access", "/api/access/events", "/api/audit", "/api/inbox"]) {
      answers.push((await op.request("GET", path)).body);
    }
    // The authorization server's own cookies (its sign-in session, the interaction) are bearer
    // values too: hashed in the database like the tokens.
    for (const [name, value] of op.cookies)
      if (name.startsWith("latch_oauth_") && !name.endsWith(".sig")) secrets.push(value);
    expect(secrets.length).toBeGreaterThan(8);

    const everywhere: [string, string][] = [
      ["answers", answers.join("\n")],
      ["control plane logs", h.logs.text()],
      ["egress proxy logs", h.egress.logs.text()],
      ...(await everyTableText()),
    ];
    for (const [where, text] of everywhere) {
      for (const secret of secrets)
        expect(text.includes(secret), `${where} contains ${secret.slice(0, 12)}...`).toBe(false);
    }
  });

  it("ends the OAuth sign-in session when the operator signs out", async () => {
    const op = await readyOperator(h, "oauth-signout");
    const redirectUri = "http://127.0.0.1:41001/callback";
    const clientId = (
      await register(h.app, { client_name: "Sign-out agent", redirect_uris: [redirectUri] })
    ).json().client_id as string;
    await authorizeAndConsent(op, { clientId, redirectUri, challenge: pkcePair().challenge });
    const me = (await op.request("GET", "/api/auth/me")).json();
    const operatorId = (
      await sql<{
        operator_id: string;
      }>`select operator_id from operator_sessions s join operators o on o.id = s.operator_id where o.email = ${me.email} limit 1`.execute(
        h.plane.database.db,
      )
    ).rows[0]!.operator_id;
    const mine = async () =>
      Number(
        (
          await sql<{
            n: string;
          }>`select count(*)::text as n from oauth_artifacts where model = 'Session' and account_id = ${operatorId}`.execute(
            h.plane.database.db,
          )
        ).rows[0]!.n,
      );
    expect(await mine()).toBe(1);
    expect((await op.request("POST", "/api/auth/logout", {})).statusCode).toBe(200);
    expect(await mine()).toBe(0);
  });
});
