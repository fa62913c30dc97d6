// An approval link keeps its own hour (spec 8) and dies with its code after five wrong codes: an
// agent repeating its request renews the code but brings back no link (review h36, finding 1).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { APPROVAL_CODE_TTL_MS } from "../src/grants/approval-codes.ts";
import { type HostedHarness, operatorWithClient, readableMail, startHosted } from "./hosted.ts";

let h: HostedHarness;

beforeAll(async () => {
  h = await startHosted();
}, 60_000);
afterAll(async () => {
  await h?.close();
});

/** An operator's organisation with API_KEY, and its agent asking for API_KEY through the API. */
async function setUp() {
  const { op, token, email } = await operatorWithClient(h, {
    secret: "sk_live_link_repeat_canary_41c9",
    items: [{ name: "API_KEY" }],
    clientName: "link agent",
  });
  const ask = async () => {
    const answer = await h.app.inject({
      method: "POST",
      url: "/api/grants/request",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      payload: JSON.stringify({ item_name: "API_KEY" }),
    });
    expect(answer.statusCode, answer.body).toBe(201);
    return answer.json() as { grant: { grant_id: string }; approval_code: string };
  };
  /** The approve link of the last approval mail the operator got. */
  const lastLink = () => {
    const mail = h.inbox.mails.filter((m) => m.to === email && m.raw.includes("/approve?token")).at(-1);
    const token = mail && /\/approve\?token=([A-Za-z0-9_-]+)/.exec(readableMail(mail))?.[1];
    if (!token) throw new Error(`no approval link mailed to ${email}`);
    return `/approve?token=${token}`;
  };
  const mailsTo = () => h.inbox.mails.filter((m) => m.to === email).length;
  return { op, ask, lastLink, mailsTo };
}

describe("an approval link and a repeated request", () => {
  it("an expired link stays expired when the agent repeats; the repeat's new code approves", async () => {
    const { op, ask, lastLink, mailsTo } = await setUp();
    const first = await ask();
    const link = lastLink();
    const mailed = mailsTo();

    h.clock.advance(APPROVAL_CODE_TTL_MS + 60_000);
    expect((await op.request("GET", link)).statusCode).toBe(410);

    // The repeat renews the code (a new one: the first expired) and mails nothing.
    const again = await ask();
    expect(again.grant.grant_id).toBe(first.grant.grant_id);
    expect(again.approval_code).not.toBe(first.approval_code);
    expect(mailsTo()).toBe(mailed);

    const revived = await op.request("GET", link);
    expect(revived.statusCode, revived.body).toBe(410);
    expect(revived.body).toContain("This approval link has expired");
    expect((await op.request("POST", link)).json().error.code).toBe("approval_code_expired");

    const byCode = await op.request("POST", "/api/grants/approve-by-code", { code: again.approval_code });
    expect(byCode.statusCode, byCode.body).toBe(200);
    expect(byCode.json().grant).toMatchObject({ grant_id: first.grant.grant_id, status: "active" });
  });

  it("a link voided with its code by five wrong codes stays void when the agent repeats", async () => {
    const { op, ask, lastLink } = await setUp();
    const first = await ask();
    const link = lastLink();
    const wrong = first.approval_code === "00000000" ? "11111111" : "00000000";
    for (let i = 0; i < 5; i++) {
      const refused = await op.request("POST", "/api/grants/approve-by-code", {
        code: wrong,
        grant_id: first.grant.grant_id,
      });
      expect(refused.statusCode).toBe(400);
    }
    expect((await op.request("GET", link)).statusCode).toBe(410);

    // Within the link's hour: only the wrong codes, counted per request, keep it void.
    const again = await ask();
    expect(again.grant.grant_id).toBe(first.grant.grant_id);
    const byCode = await op.request("POST", "/api/grants/approve-by-code", { code: again.approval_code });
    expect(byCode.statusCode).toBe(400);
    expect(byCode.json().error.code).toBe("approval_code_invalid");

    const revived = await op.request("GET", link);
    expect(revived.statusCode, revived.body).toBe(410);
    expect(revived.body).toContain("This approval link has expired");
    const inbox = (await op.request("GET", "/api/inbox")).json().approvals as { grant_id: string }[];
    expect(inbox.map((g) => g.grant_id)).toContain(first.grant.grant_id);
  });

  it("a link within its hour still approves after a repeat (the same code answered)", async () => {
    const { op, ask, lastLink } = await setUp();
    const first = await ask();
    const link = lastLink();
    h.clock.advance(APPROVAL_CODE_TTL_MS / 2);
    expect((await ask()).approval_code).toBe(first.approval_code);
    const approved = await op.request("POST", link);
    expect(approved.statusCode, approved.body).toBe(200);
    expect(approved.json().grant).toMatchObject({ grant_id: first.grant.grant_id, status: "active" });
  });
});
