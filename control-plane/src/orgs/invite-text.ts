// The invitation mail (DECISIONS "Teams"): the approval mail's sender and look, plain text only.
// The organisation's name and the inviter's address are written by people, so each reaches the
// mail on one line and the subject never carries a line break.

import type { Role } from "../auth/permissions.ts";
import { oneLine } from "../mail/mail-text.ts";

/** What a role lets its member do, in the words of the mail and the invitation page. */
export const ROLE_SUMMARIES: Readonly<Record<Role, string>> = {
  owner: "everything: credentials, clients, approvals, members, the organisation's settings and its deletion",
  admin: "store credentials, issue clients, approve agents' requests, export the audit and manage members",
  approver: "approve, deny and revoke agents' requests, and read the vault's names, the audit and access",
  auditor: "read the vault's names, the inbox, the approvals, the audit and access, and export the audit",
};

export interface InviteNotice {
  organisationName: string;
  inviterEmail: string;
  role: Role;
  link: string;
  expiresAt: Date;
}

/**
 * The mail an invitee gets: who invites them, to which organisation, as what, and the link.
 * @example inviteMail({ organisationName: "Acme", inviterEmail: "a@acme.test", role: "approver", ... })
 * // { subject: "Latch: a@acme.test invites you to Acme as approver", text: "..." }
 */
export function inviteMail(notice: InviteNotice): { subject: string; text: string } {
  const organisation = oneLine(notice.organisationName).slice(0, 80);
  const inviter = oneLine(notice.inviterEmail).slice(0, 254);
  return {
    subject: `Latch: ${inviter} invites you to ${organisation} as ${notice.role}`,
    text: [
      // Every role's name starts with a vowel: "as an approver".
      `${inviter} invites you to join the organisation "${organisation}" on Latch as an ${notice.role}.`,
      `An ${notice.role} may ${ROLE_SUMMARIES[notice.role]}.`,
      `Accept here: ${notice.link}`,
      `Sign in, or sign up, with this email address: the invitation works for it alone, once, until ${notice.expiresAt.toUTCString()}.`,
      "If you did not expect this, do nothing: nobody joins without opening the link and signing in.",
    ].join("\n\n"),
  };
}
