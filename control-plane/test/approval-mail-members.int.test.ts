// The approval mail goes to each member who may approve on its own: one mailbox refused at RCPT
// (nodemailer throws for it) leaves the others mailed, and notify_failed (spec 6) is true only when
// nobody was (review h36, finding 2). The mail server is a real SMTP server that refuses the
// addresses a test names.
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EgressHarness, startEgressHarness } from "./egress-harness.ts";
import {
  type HostedHarness,
  type ReceivedMail,
  readableMail,
  type SmtpInbox,
  startHosted,
} from "./hosted.ts";
import { startTeam, type Team } from "./teams.ts";

/** An SMTP server that keeps every mail, and answers 550 at RCPT for each address in `refused`. */
async function startPickyInbox(refused: Set<string>): Promise<SmtpInbox> {
  const mails: ReceivedMail[] = [];
  const inbox = { isRefusing: false };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS", "AUTH"],
    logger: false,
    onRcptTo(address, _session, callback) {
      const isRefused = inbox.isRefusing || refused.has(address.address);
      callback(
        isRefused ? Object.assign(new Error("mailbox unavailable"), { responseCode: 550 }) : undefined,
      );
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        const to = session.envelope.rcptTo.map((r) => r.address).join(",");
        mails.push({ to, raw: Buffer.concat(chunks).toString("utf8") });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const port = (server.server.address() as AddressInfo).port;
  return Object.assign(inbox, {
    port,
    mails,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  });
}

const refused = new Set<string>();
let egress: EgressHarness;
let inbox: SmtpInbox;
let h: HostedHarness;

beforeAll(async () => {
  egress = await startEgressHarness();
  inbox = await startPickyInbox(refused);
  const clock = {
    now: new Date(),
    advance(ms: number) {
      clock.now = new Date(clock.now.getTime() + ms);
    },
  };
  // startHosted's way of sharing a proxy, a mail server and a clock (as a replica does): here the
  // mail server is this file's.
  h = await startHosted({ replicaOf: { egress, inbox, clock } as unknown as HostedHarness });
}, 60_000);
afterAll(async () => {
  await h?.close();
  await inbox?.close();
  await egress?.close();
});

/** The approval mails carrying `code` that reached `email`. */
const approvalMailsTo = (email: string, code: string) =>
  inbox.mails.filter((m) => m.to === email && readableMail(m).includes(code));

async function ask(team: Team, path: string) {
  const answer = await h.app.inject({
    method: "POST",
    url: "/api/grants/request",
    headers: { authorization: `Bearer ${team.token}`, "content-type": "application/json" },
    payload: JSON.stringify({ item_name: "API_KEY", host: "api.latch.test", method: "GET", path }),
  });
  expect(answer.statusCode, answer.body).toBe(201);
  return answer.json() as { grant: { grant_id: string }; approval_code: string; notify_failed: boolean };
}

describe("the approval mail to an organisation's members", () => {
  it("reaches the other members when the first one's mailbox refuses it", async () => {
    const team = await startTeam(h, "sk_live_mail_members_canary_5d21");
    // The owner joined first, so is mailed first.
    refused.add(team.owner.email);
    try {
      const asked = await ask(team, "/v1/one-refused");
      expect(asked.notify_failed).toBe(false);
      expect(approvalMailsTo(team.owner.email, asked.approval_code)).toHaveLength(0);
      expect(approvalMailsTo(team.admin.email, asked.approval_code)).toHaveLength(1);
      expect(approvalMailsTo(team.approver.email, asked.approval_code)).toHaveLength(1);
      // An auditor reads, and is mailed no approve link (unchanged).
      expect(approvalMailsTo(team.auditor.email, asked.approval_code)).toHaveLength(0);

      // The refusal is logged by the member's id, never with the code or the link.
      const lines = h.logs.lines.map((line) => JSON.parse(line) as Record<string, unknown>);
      const failed = lines.filter((line) => line.msg === "approval mail not sent to a member");
      expect(failed.map((line) => line.operator_id)).toEqual([team.owner.operatorId]);
      expect(failed[0]).toMatchObject({ response_code: 550 });
      expect(h.logs.text()).not.toContain(asked.approval_code);
      expect(h.logs.text()).not.toContain("/approve?token");
    } finally {
      refused.clear();
    }
  });

  it("answers notify_failed when no member who may approve could be mailed", async () => {
    const team = await startTeam(h, "sk_live_mail_members_canary_5d21");
    for (const member of [team.owner, team.admin, team.approver]) refused.add(member.email);
    try {
      const asked = await ask(team, "/v1/all-refused");
      expect(asked.notify_failed).toBe(true);
      const approved = await team.approver.browser.request("POST", "/api/grants/approve-by-code", {
        code: asked.approval_code,
      });
      expect(approved.statusCode, approved.body).toBe(200);
    } finally {
      refused.clear();
    }
  });
});
