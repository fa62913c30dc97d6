// oidc-provider answers an error inside its own routes with `server_error` (500) and says nothing
// else: the control plane logs the cause, through its safe serializer, so that an OAuth outage (here
// the artifacts table gone, as a database fault would leave it) can be diagnosed. PGlite only: the
// test takes a table away, which on a shared PostgreSQL database other test files are using.
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isPostgresRun } from "../database.ts";
import { type HostedHarness, startHosted } from "../hosted.ts";
import { register, token } from "./oauth-flow.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
});
afterAll(async () => {
  await h?.close();
});

describe.skipIf(isPostgresRun())("an error inside the OAuth server", () => {
  it("answers server_error and logs its cause", async () => {
    const registered = await register(h.app, {
      client_name: "Outage agent",
      redirect_uris: ["http://127.0.0.1:33419/callback"],
    });
    expect(registered.statusCode).toBe(201);
    const clientId = registered.json().client_id as string;
    const db = h.plane.database.db;
    await sql`alter table oauth_artifacts rename to oauth_artifacts_away`.execute(db);
    try {
      const answer = await token(h.app, {
        grant_type: "refresh_token",
        refresh_token: "a-refresh-token-nobody-was-given",
        client_id: clientId,
      });
      expect(answer.statusCode, answer.body).toBe(500);
      expect(answer.json().error).toBe("server_error");
    } finally {
      await sql`alter table oauth_artifacts_away rename to oauth_artifacts`.execute(db);
    }
    await expect.poll(() => h.logs.text()).toContain("the OAuth server failed a request");
    expect(h.logs.text()).not.toContain("a-refresh-token-nobody-was-given");
  });
});
