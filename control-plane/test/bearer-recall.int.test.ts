// A model bearer found live lets its next POST /mcp in unconfirmed (issue 27: the call's one
// statement confirms it), so each of these revokes or rotates it behind this replica's back, as
// another replica would (straight in the database), and checks that nothing acts on it: 401 with
// the MCP challenge, nothing sent, whatever the frame.
import { randomBytes } from "node:crypto";
import { sha256Hex } from "@latch/shared/crypto/hash";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabase } from "./database.ts";
import { type HostedHarness, operatorWithClient, startHosted } from "./hosted.ts";

const SECRET = "sk_live_recall_canary_0123456789";

describe("a bearer let in on a recent check is confirmed before anything acts", () => {
  let h: HostedHarness;
  beforeAll(async () => {
    h = await startHosted();
    h.egress.setHandler((_req, res) => res.end('{"ok":true}'));
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  });

  /** A client with a standing approval for GET api.latch.test, one call made: its bearer recalled. */
  async function recalledAgent(label: string) {
    const { op, clientId, token } = await operatorWithClient(h, {
      secret: SECRET,
      items: [{ name: `RECALL_${label}` }],
      clientName: `recall-${label}`,
    });
    const pending = await mcp(token, "tools/call", {
      name: "http_request",
      arguments: { method: "GET", path: "/v1/x", item_name: `RECALL_${label}` },
    });
    const grantId = answerOf(pending).grant_id as string;
    const approved = await op.request("POST", `/api/grants/${grantId}/approve`, { policy: "item_standing" });
    expect(approved.statusCode).toBe(200);
    const call = () =>
      mcp(token, "tools/call", {
        name: "http_request",
        arguments: { method: "GET", path: "/v1/x", item_name: `RECALL_${label}` },
      });
    expect(answerOf(await call()).origin_status).toBe(200);
    return { clientId, token, call };
  }

  function mcp(token: string, method: string, params: Record<string, unknown> = {}) {
    return h.app.inject({
      method: "POST",
      url: "/mcp",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      payload: { jsonrpc: "2.0", id: 1, method, params },
    });
  }

  function answerOf(response: { json(): unknown }): Record<string, unknown> {
    const body = response.json() as { result: { content: { text: string }[] } };
    return JSON.parse(body.result.content[0]!.text) as Record<string, unknown>;
  }

  function expectRefused(response: { statusCode: number; headers: Record<string, unknown> }) {
    expect(response.statusCode).toBe(401);
    expect(String(response.headers["www-authenticate"])).toContain("resource_metadata=");
  }

  it("refuses an http_request whose client was revoked elsewhere, sending nothing, then every frame", async () => {
    const agent = await recalledAgent("REVOKED");
    const database = await testDatabase();
    await database.db
      .updateTable("clients")
      .set({ revoked_at: new Date() })
      .where("id", "=", agent.clientId)
      .execute();
    const before = h.egress.origin.requests.length;
    expectRefused(await agent.call());
    expect(h.egress.origin.requests.length).toBe(before);
    expectRefused(await mcp(agent.token, "tools/list"));
    expectRefused(await agent.call());
  });

  it("refuses the old bearer of a client rotated elsewhere", async () => {
    const agent = await recalledAgent("ROTATED");
    const database = await testDatabase();
    await database.db
      .updateTable("clients")
      .set({ token_hash: sha256Hex(`avm_rotated_elsewhere_${randomBytes(16).toString("hex")}`) })
      .where("id", "=", agent.clientId)
      .execute();
    const before = h.egress.origin.requests.length;
    expectRefused(await agent.call());
    expect(h.egress.origin.requests.length).toBe(before);
  });

  it("confirms the bearer before any other frame: tools/list of a client revoked elsewhere is refused", async () => {
    const agent = await recalledAgent("LISTED");
    const database = await testDatabase();
    await database.db
      .updateTable("clients")
      .set({ revoked_at: new Date() })
      .where("id", "=", agent.clientId)
      .execute();
    expectRefused(await mcp(agent.token, "tools/list"));
    expectRefused(await mcp(agent.token, "tools/call", { name: "list_items", arguments: {} }));
  });

  it("answers a recalled bearer's call that names no API with why, never an internal error", async () => {
    const agent = await recalledAgent("NOHOST");
    for (const [args, code] of [
      [{ method: "GET", path: "/v1/x" }, "invalid_request"],
      [{ method: "GET", path: "http://api.latch.test/v1/x" }, "invalid_path"],
      [{ method: "GET", path: "/v1/x", host: "not a host" }, "invalid_host"],
    ] as const) {
      const answer = await mcp(agent.token, "tools/call", { name: "http_request", arguments: args });
      expect(answer.statusCode).toBe(200);
      const text = answer.body;
      expect(text, JSON.stringify(args)).toContain(code);
      expect(text).not.toContain("internal");
    }
  });

  it("refuses a bearer it never saw before reading the body, as always", async () => {
    const unknown = await h.app.inject({
      method: "POST",
      url: "/mcp",
      headers: {
        authorization: "Bearer avm_never_issued_0123456789abcdefghij",
        "content-type": "application/json",
      },
      payload: "{ this is not even json",
    });
    expectRefused(unknown);
  });

  it("keeps working for a live bearer, and a revoke on this replica takes effect at once", async () => {
    const agent = await recalledAgent("LOCAL");
    expect(answerOf(await agent.call()).origin_status).toBe(200);
    await h.plane.services.clients.revokeClient(
      (
        await (
          await testDatabase()
        ).db
          .selectFrom("clients")
          .select("organisation_id")
          .where("id", "=", agent.clientId)
          .executeTakeFirstOrThrow()
      ).organisation_id,
      agent.clientId,
    );
    expectRefused(await agent.call());
  });
});
