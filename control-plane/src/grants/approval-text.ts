// The words an operator reads before approving (DECISIONS "Approvals"): the exact call a grant is
// for (method, host, path with query, the body itself and its digest) or, for a grant asked without
// a call, that it covers any call with the credential. The mail, the CLI and the pages say the same
// thing. The mail is plain text only: nothing an agent writes can become markup in it, and its
// lines reach the mail's headers only through describeAgent, on one line.
import { oneLine } from "../mail/mail-text.ts";
import type { PublicGrant } from "./grant-view.ts";
import { type BodyView, bodyExcerpt, describeSize, showHidden } from "./request-body.ts";

/** DECISIONS "The approval, readable and reversible": the mail shows the body's first 2 KiB. */
export const MAIL_BODY_CHARS = 2 * 1024;

/**
 * The call a grant covers, on one line.
 * @example describeGrantCall(grant) // "GET https://api.example.com/v1/me?x=1"
 */
export function describeGrantCall(grant: Pick<PublicGrant, "call">): string {
  if (!grant.call) return "any call (the whole credential: no call was named)";
  return `${grant.call.method} https://${grant.call.host}${grant.call.path}`;
}

/** The body line: the digest the operator can compare, or that the call has no body. */
export function describeGrantBody(grant: Pick<PublicGrant, "call">): string {
  if (!grant.call) return "";
  return grant.call.body_sha256 ? `body SHA-256 ${grant.call.body_sha256}` : "no body";
}

/**
 * The agent as an operator knows it: its client's name, quoted (a client may have chosen it), never
 * a bare `cli_...` id, which says nothing to a person reading a mail.
 * @example describeAgent({ agent_id: "cli_x", agent_name: "Claude Code" }) // 'The agent "Claude Code"'
 */
export function describeAgent(grant: Pick<PublicGrant, "agent_id" | "agent_name">): string {
  const name = agentWords(grant.agent_name ?? "").slice(0, 80);
  if (name && name !== grant.agent_id) return `The agent "${name}"`;
  // No name of its own: an id an operator typed (agent-3) still says something; a cli_ id does not.
  if (grant.agent_id.startsWith("cli_")) return "An agent without a name";
  return `The agent "${agentWords(grant.agent_id).slice(0, 80)}"`;
}

/**
 * Words an agent chose (its task, its name), as every approval shows them: on one line, and each
 * invisible character (a direction override, a zero-width space) as U+FFFD, as the body's are, so
 * they cannot make the mail, the page or `vault grants` read otherwise than what was written.
 * @example agentWords("Read \u202Eetirw") // "Read \uFFFDetirw"
 */
export function agentWords(text: string): string {
  return showHidden(oneLine(text)).text;
}

/** How a body is named to a person: "JSON, 58 bytes", "a form, 1.2 KiB". */
export function describeBodyKind(body: BodyView): string {
  const kind = body.format === "json" ? "JSON" : body.format === "form" ? "form fields" : body.content_type;
  return `${kind}, ${describeSize(body.size)}`;
}

/**
 * A body as a person reads it: its first `maxChars` formatted (JSON indented, form fields as
 * `name: value`), each line behind "| " so no line of it can pose as a line of ours, then its
 * digest. `whereWhole` says where the rest is read when it was shortened.
 */
function bodyLines(body: BodyView, maxChars: number, whereWhole: string): string[] {
  const excerpt = bodyExcerpt(body, maxChars);
  return [
    `    The body (${describeBodyKind(body)}), as the agent wrote it:`,
    ...excerpt.lines.map((line) => `    | ${line}`),
    ...(excerpt.isShortened ? [`    | ... (${whereWhole})`] : []),
    ...(body.has_hidden_characters
      ? [
          "    (it holds invisible characters (control, direction, zero-width), shown as \uFFFD: read it with care)",
        ]
      : []),
    `    Body SHA-256 ${body.sha256}`,
  ];
}

/** The body in the mail: its first 2 KiB (the inbox shows the rest). */
function mailBodyLines(body: BodyView): string[] {
  return bodyLines(
    body,
    MAIL_BODY_CHARS,
    body.is_cut
      ? "the first 2 KiB: the inbox shows the first 64 KiB, and the body sent is longer still"
      : "the first 2 KiB: the inbox shows the whole body",
  );
}

/**
 * One grant in full, as `vault grants GRANT_ID` prints it: the mail's words about the request with
 * the whole body it keeps, its state, and how to approve it while it is pending.
 */
export function grantDetail(grant: PublicGrant & { body: BodyView | null }): string {
  const who = describeAgent(grant);
  const lines = [
    `${grant.grant_id}: ${grant.status}, ${grant.policy}${grant.expires_at ? `, until ${grant.expires_at}` : ""}`,
    grant.call
      ? `${who} asked to send this request with ${grant.item_name} (${grant.environment_id}):`
      : `${who} asked to use ${grant.item_name} (${grant.environment_id}) for any call (no request was named).`,
  ];
  if (grant.call) {
    lines.push(`    ${describeGrantCall(grant)}`);
    lines.push(
      ...(grant.body
        ? bodyLines(
            grant.body,
            Number.POSITIVE_INFINITY,
            "the first 64 KiB, all that is kept: the digest is of the whole body",
          )
        : [`    ${describeGrantBody(grant)}`]),
    );
  }
  if (grant.task_description)
    lines.push(`Task (written by the agent): "${agentWords(grant.task_description)}"`);
  if (grant.status === "pending") {
    lines.push(
      grant.call
        ? `Approve exactly this request: vault approve ${grant.grant_id} (one call), or --session (8 hours, calls under its path)`
        : `Approve: vault approve ${grant.grant_id} (its next call), or --session (8 hours)`,
    );
  }
  return `${lines.join("\n")}\n`;
}

/** The approval mail (spec 6): who asks, for exactly what, and how to approve. */
export function approvalMail(
  grant: PublicGrant,
  body: BodyView | null,
  approvalCode: string,
  link: string,
): { subject: string; text: string } {
  const who = describeAgent(grant);
  const call = grant.call
    ? [
        `${who} asks to send this request once with ${grant.item_name} (${grant.environment_id}):`,
        `    ${describeGrantCall(grant)}`,
        ...(body ? mailBodyLines(body) : [`    ${describeGrantBody(grant)}`]),
        "Approving covers exactly this request: another method, path, query or body needs a new approval.",
      ].join("\n")
    : `${who} asks to use ${grant.item_name} (${grant.environment_id}) for any call: no request was named, so approving lets its next call use the credential.`;
  return {
    subject: grant.call
      ? `Latch: ${who} asks to send ${grant.call.method} ${grant.call.host} with ${grant.item_name}`
      : `Latch: ${who} asks to use ${grant.item_name}`,
    text: [
      call,
      grant.task_description ? `Task (written by the agent): "${agentWords(grant.task_description)}"` : "",
      `Approve in the inbox, with the code ${approvalCode}, or here: ${link}`,
      "If you did not expect this, do nothing: the request stays pending.",
    ]
      .filter(Boolean)
      .join("\n\n"),
  };
}
