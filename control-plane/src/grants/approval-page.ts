// The request an approval link approves, as HTML for its page (GET /approve?token=): the agent, the
// credential, the exact request with its body formatted and digest, what was approved, and the
// Revoke button while the approval is active. Every value is agent- or operator-typed text and goes
// through escapeHtml; nothing here is markup from a caller.
import { escapeHtml } from "../pages/page-files.ts";
import { agentWords, describeAgent, describeBodyKind, describeGrantCall } from "./approval-text.ts";
import type { PendingApproval } from "./grant-view.ts";
import type { BodyView } from "./request-body.ts";

/** An element with escaped text and attribute values; children are already-built HTML. */
function tag(name: string, attributes: Record<string, string>, ...children: string[]): string {
  const attrs = Object.entries(attributes)
    .map(([key, value]) => ` ${key}="${escapeHtml(value)}"`)
    .join("");
  return `<${name}${attrs}>${children.join("")}</${name}>`;
}
const text = (value: string) => escapeHtml(value);

/** What the approval covers, in one sentence, by its policy and status. */
export function describeApproved(
  grant: Pick<PendingApproval, "policy" | "status" | "call" | "item_name">,
): string {
  const what = grant.call ? "exactly this request" : `any call with ${grant.item_name}`;
  switch (grant.status) {
    case "active":
      return grant.policy === "prompt"
        ? `Approved once: ${what}, the next time the agent sends it.`
        : `Approved (${grant.policy.replace("_", " ")}): ${what} and what its scope covers.`;
    case "consumed":
      return `Approved once, and used: the agent sent ${what}.`;
    case "revoked":
      return "Revoked: the agent's next call asks again.";
    case "expired":
      return "The approval has expired.";
    default:
      return "Not approved yet: it waits in the inbox.";
  }
}

/** A body: JSON indented or text in a <pre>, form fields as a table; its size and digest beneath. */
export function bodyHtml(body: BodyView): string {
  const content =
    body.format === "form" && body.fields
      ? tag(
          "table",
          { class: "body-fields" },
          tag("caption", { class: "visually-hidden" }, "Form fields of the body"),
          tag(
            "thead",
            {},
            tag("tr", {}, tag("th", { scope: "col" }, "Field"), tag("th", { scope: "col" }, "Value")),
          ),
          tag(
            "tbody",
            {},
            ...body.fields.map(([name, value]) =>
              tag("tr", {}, tag("th", { scope: "row" }, text(name)), tag("td", {}, text(value))),
            ),
          ),
        )
      : tag("pre", { class: "body-text", tabindex: "0" }, tag("code", {}, text(body.text)));
  const notes = [
    body.is_cut ? "Only the first 64 KiB is kept; the digest is of the whole body." : "",
    body.has_hidden_characters
      ? "It holds invisible characters (control, direction, zero-width), shown as \uFFFD."
      : "",
  ].filter(Boolean);
  return [
    tag("p", { class: "body-kind" }, text(`Body (${describeBodyKind(body)})`)),
    content,
    ...notes.map((note) => tag("p", { class: "hint" }, text(note))),
    tag("p", { class: "digest" }, text(`SHA-256 ${body.sha256}`)),
  ].join("");
}

/** The request section of the approval page. */
export function approvalRequestHtml(grant: PendingApproval): string {
  const rows: [string, string][] = [
    ["Agent", describeAgent(grant).replace(/^The agent /, "")],
    ["Credential", `${grant.item_name} (${grant.environment_id})`],
    ["Request", describeGrantCall(grant)],
  ];
  if (grant.task_description) rows.push(["Task (written by the agent)", agentWords(grant.task_description)]);
  const list = tag(
    "dl",
    { class: "request-summary" },
    ...rows.map(([term, value]) =>
      tag("div", { class: "summary-row" }, tag("dt", {}, text(term)), tag("dd", {}, text(value))),
    ),
  );
  const body = grant.call
    ? grant.body
      ? bodyHtml(grant.body)
      : tag("p", { class: "hint" }, grant.call.body_sha256 ? "The body was not kept." : "No body.")
    : "";
  const revoke =
    grant.status === "active"
      ? tag(
          "p",
          {},
          tag(
            "button",
            {
              type: "button",
              id: "revoke",
              class: "secondary danger-outline",
              "data-grant-id": grant.grant_id,
            },
            "Revoke this approval",
          ),
        )
      : "";
  return tag(
    "section",
    { "aria-labelledby": "request-heading", class: "card" },
    tag("h2", { id: "request-heading" }, "The request"),
    list,
    body,
    tag("p", { id: "approved", class: "approved" }, text(describeApproved(grant))),
    revoke,
  );
}
