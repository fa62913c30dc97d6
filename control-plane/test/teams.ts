// Teams in tests: a colleague invited into an organisation with a role, through the real routes
// (the invitation mail from the in-process SMTP server, POST /invite with the member's session).
import type { LightMyRequestResponse } from "fastify";
import type { Role } from "../src/auth/permissions.ts";
import {
  type Browser,
  type HostedHarness,
  operatorWithClient,
  type SmtpInbox,
  signUpOperator,
} from "./hosted.ts";

/** The token of the last invitation mailed to `email`. */
export function lastInviteTokenFor(inbox: SmtpInbox, email: string): string {
  const mail = inbox.mails.filter((m) => m.to === email).at(-1);
  // The mail is quoted-printable: soft line breaks and =3D undone before reading the link.
  const text = mail?.raw.replace(/=\r?\n/g, "").replace(/=3D/g, "=");
  const token = text && /\/invite\?token=([A-Za-z0-9_-]{43})/.exec(text)?.[1];
  if (!token) throw new Error(`no invitation mailed to ${email}`);
  return token;
}

export interface Member {
  browser: Browser;
  email: string;
  operatorId: string;
  totp: Awaited<ReturnType<typeof signUpOperator>>["totp"];
}

/**
 * A new account invited by `owner` (a browser acting in the organisation) as `role`, joined through
 * the invitation: its session acts in that organisation.
 */
export async function joinAs(
  h: Pick<HostedHarness, "app" | "inbox" | "clock">,
  owner: Browser,
  role: Role,
  label: string = role,
  origin?: string,
): Promise<Member> {
  const { browser, email, totp } = await signUpOperator(h, { label, ...(origin ? { origin } : {}) });
  const invited = await owner.request("POST", "/api/orgs/members/invite", { email, role });
  if (invited.statusCode !== 201) throw new Error(`inviting ${email} failed: ${invited.body}`);
  const joined = await browser.request("POST", "/invite", { token: lastInviteTokenFor(h.inbox, email) });
  if (joined.statusCode !== 200) throw new Error(`joining as ${email} failed: ${joined.body}`);
  const members = (await owner.request("GET", "/api/orgs/members")).json().members as {
    operator_id: string;
    email: string;
  }[];
  const operatorId = members.find((m) => m.email === email)?.operator_id;
  if (!operatorId) throw new Error(`${email} is not listed as a member`);
  return { browser, email, operatorId, totp };
}

/** An organisation with a member of every role, a stored credential and a model client. */
export interface Team {
  owner: Member;
  admin: Member;
  approver: Member;
  auditor: Member;
  /** The model client's bearer (avm_). */
  token: string;
  clientId: string;
  organisationId: string;
  /** A new pending approval of API_KEY asked by the model client, for a call of its own. */
  requestGrant(path?: string): Promise<{ grant_id: string; status: string; approvals: string | null }>;
}

let requests = 0;

export async function startTeam(
  h: Pick<HostedHarness, "app" | "inbox" | "clock">,
  secret = "team-secret-value",
  origin?: string,
): Promise<Team> {
  const created = await operatorWithClient(h, {
    secret,
    items: [{ name: "API_KEY", folder_name: "apis" }],
    clientName: "team agent",
    ...(origin ? { origin } : {}),
  });
  const me = (await created.op.request("GET", "/api/auth/me")).json();
  const ownerId = (await created.op.request("GET", "/api/orgs/members")).json().members[0].operator_id;
  const owner: Member = {
    browser: created.op,
    email: created.email,
    operatorId: ownerId,
    totp: created.totp,
  };
  const admin = await joinAs(h, owner.browser, "admin", "admin", origin);
  const approver = await joinAs(h, owner.browser, "approver", "approver", origin);
  const auditor = await joinAs(h, owner.browser, "auditor", "auditor", origin);
  return {
    owner,
    admin,
    approver,
    auditor,
    token: created.token,
    clientId: created.clientId,
    organisationId: me.organisation.id,
    async requestGrant(path = `/v1/call-${++requests}`) {
      const answer = await h.app.inject({
        method: "POST",
        url: "/api/grants/request",
        headers: { authorization: `Bearer ${created.token}`, "content-type": "application/json" },
        payload: JSON.stringify({ item_name: "API_KEY", host: "api.latch.test", method: "GET", path }),
      });
      if (answer.statusCode !== 201)
        throw new Error(`the request answered ${answer.statusCode}: ${answer.body}`);
      return answer.json().grant;
    },
  };
}

/** An agent's http_request in one JSON-RPC POST to /mcp, as a client without a session sends it. */
export function askCall(
  h: HostedHarness,
  accessToken: string,
  call: { host: string; method: string; path: string },
): Promise<LightMyRequestResponse> {
  return h.app.inject({
    method: "POST",
    url: "/mcp",
    headers: {
      authorization: `Bearer ${accessToken}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
    },
    payload: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: { name: "http_request", arguments: call },
    }),
  });
}
