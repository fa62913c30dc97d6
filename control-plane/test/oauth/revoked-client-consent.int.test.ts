// Spec 3.4: "A refresh for a revoked agent is invalid_grant". Revoking a client row ends every
// consent given for it (`endClient`); a consent recorded while the row was being revoked (after that
// clean-up ran) survives it. This test revokes the row without the clean-up (the race's end state)
// and checks that the token endpoint judges the row itself: the refresh is invalid_grant, the consent
// and its grant end and the ledger says why, instead of tokens that /mcp refuses (the agent looping).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabase } from "../database.ts";
import { type HostedHarness, readyOperator, startHosted } from "../hosted.ts";
import { approveAndExchange, mcpWith, RESOURCE, register, token } from "./oauth-flow.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
});
afterAll(async () => {
  await h?.close();
});

const REDIRECT = "http://127.0.0.1:33419/callback";

describe("a consent whose client row was revoked under it", () => {
  it("refreshes no more: invalid_grant, and the consent and its grant end", async () => {
    const op = await readyOperator(h, "owner");
    const clientId = (await register(h.app, { client_name: "Raced agent", redirect_uris: [REDIRECT] })).json()
      .client_id as string;
    const { tokens } = await approveAndExchange(op, h.app, { clientId, redirectUri: REDIRECT });
    expect((await mcpWith(h.app, tokens.access_token)).statusCode).toBe(200);

    const { db } = await testDatabase();
    const consent = await db
      .selectFrom("oauth_consents")
      .innerJoin("clients", "clients.id", "oauth_consents.client_row_id")
      .select(["oauth_consents.grant_id", "oauth_consents.client_row_id"])
      .where("clients.oauth_client_id", "=", clientId)
      .executeTakeFirstOrThrow();
    // The row revoked, its consent left live (the revocation's clean-up ran before it was recorded).
    await db
      .updateTable("clients")
      .set({ revoked_at: new Date() })
      .where("id", "=", consent.client_row_id)
      .execute();

    const refused = await token(h.app, {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token,
      client_id: clientId,
      resource: RESOURCE,
    });
    expect(refused.statusCode, refused.body).toBe(400);
    expect(refused.json().error).toBe("invalid_grant");

    const after = await db
      .selectFrom("oauth_consents")
      .select("revoked_at")
      .where("grant_id", "=", consent.grant_id)
      .executeTakeFirstOrThrow();
    expect(after.revoked_at).not.toBeNull();
    const artifacts = await db
      .selectFrom("oauth_artifacts")
      .select("model")
      .where("grant_id", "=", consent.grant_id)
      .execute();
    expect(artifacts).toEqual([]);
    const events = (await op.request("GET", "/api/audit?action=oauth_grant_revoked")).json().events as {
      detail?: { reason?: string; client_id?: string };
    }[];
    expect(
      events.some(
        (e) => e.detail?.reason === "client_revoked" && e.detail.client_id === consent.client_row_id,
      ),
    ).toBe(true);
  });
});
