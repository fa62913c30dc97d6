// GET|POST /approve?token= (spec 3.1, 4.3): the link in an approval email. Either method approves,
// once, for a signed-in operator (authenticator passed) of the grant's organisation. A mail scanner
// or link preview that fetches the link has no operator session: it is sent to /sign-in and
// approves nothing, and the operator who does open it signs in and lands back on it (return_to).
// GET answers a page showing the exact request with its body and what was approved, with "Revoke
// this approval" while it is active; POST the JSON grant. The token never reaches a log: the
// request logger drops query strings, and the page sends no Referer.
import { AppError } from "@latch/shared/errors";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { requireOperator, requireOrganisation } from "../auth/operator-guard.ts";
import { operatorOnly } from "../auth/principal.ts";
import { signInFirst } from "../auth/sign-in-first.ts";
import { checkedFirst, type ZodTypeProvider } from "../http/route-schemas.ts";
import { readPage, sendPage } from "../pages/page-files.ts";
import { approvalRequestHtml } from "./approval-page.ts";
import { describeAgent, describeGrantCall } from "./approval-text.ts";
import { approveLinkQuery, grantAnswer } from "./grants.schemas.ts";
import type { GrantsService } from "./grants.service.ts";

/** A prefetch or prerender (Sec-Purpose, or the older Purpose / X-Moz / X-Purpose headers). */
function isSpeculative(request: FastifyRequest): boolean {
  const hints = [
    request.headers["sec-purpose"],
    request.headers.purpose,
    request.headers["x-purpose"],
    request.headers["x-moz"],
  ];
  return hints.some((hint) => typeof hint === "string" && /prefetch|prerender|preview/i.test(hint));
}

/** The form of an approval link's token; what it approves is checked after the caller. */
const LINK_TOKEN = /^[A-Za-z0-9_-]{20,100}$/;

export function registerApproveLinkRoutes(app: FastifyInstance, deps: { grants: GrantsService }): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  const organisationOf = async (request: FastifyRequest) =>
    requireOrganisation(await requireOperator(request, { mfa: true }));

  /** The token's form is checked after the caller, so a stranger learns nothing from it. */
  async function approve(request: FastifyRequest, token: string | undefined) {
    const context = await requireOperator(request, { mfa: true });
    const organisationId = requireOrganisation(context);
    if (typeof token !== "string" || !LINK_TOKEN.test(token)) {
      throw new AppError("invalid_request", "the approval link is incomplete");
    }
    return deps.grants.approveByLink(organisationId, `operator:${context.operatorId}`, token);
  }

  const resultPage = readPage("pages/approve-result.html", ["heading", "sentence"]);
  /** The page; `request` is the request section, built with every value escaped (approval-page.ts). */
  const answer = (reply: FastifyReply, heading: string, sentence: string, request = "") =>
    sendPage(
      reply,
      "approval-result",
      resultPage.fill({ heading, sentence }).replace("<!--request-->", () => request),
    );
  /** The request a link names in the operator's organisation, as its page shows it ("" if none). */
  async function requestSection(request: FastifyRequest, grantId?: string): Promise<string> {
    const organisationId = request.operatorSession?.organisation_id;
    const token = (request.query as { token?: unknown }).token;
    if (!organisationId) return "";
    const grant = grantId
      ? await deps.grants.getApproval(organisationId, grantId)
      : typeof token === "string" && LINK_TOKEN.test(token)
        ? await deps.grants.findApprovalByLink(organisationId, token)
        : undefined;
    return grant ? approvalRequestHtml(grant) : "";
  }

  // The page is public (a signed-out browser goes to sign-in first), but opening it approves.
  api.get(
    "/approve",
    { config: { action: "approvals.decide" }, schema: { querystring: approveLinkQuery } },
    async (request, reply) => {
      if (!request.operatorSession?.is_mfa_passed) {
        // Back to this link after sign-in; a malformed token is not carried along.
        const token = request.query.token;
        if (typeof token !== "string" || !LINK_TOKEN.test(token)) return reply.redirect("/sign-in", 302);
        return signInFirst(request, reply, `/approve?token=${token}`);
      }
      // Fastify answers HEAD with this handler, and browsers prefetch links ahead of a click with
      // the operator's cookies: neither is the operator opening the link, so neither approves.
      if (request.method !== "GET" || isSpeculative(request)) {
        return answer(reply, "Approval link", "Open this link in your browser to approve the request.");
      }
      try {
        const grant = await approve(request, request.query.token);
        return answer(
          reply,
          "Approved",
          grant.call
            ? `${describeAgent(grant)} may send ${describeGrantCall(grant)} once with ${grant.item_name}. The agent can retry its request now.`
            : `${describeAgent(grant)} may use ${grant.item_name} for one call of any kind. The agent can retry its request now.`,
          await requestSection(request, grant.grant_id),
        );
      } catch (error) {
        if (!(error instanceof AppError)) throw error;
        const why = error.message.charAt(0).toUpperCase() + error.message.slice(1);
        // A link used before still shows its request, and Revoke while that approval is active. Any
        // other refusal (Require SSO, a role, another organisation) shows nothing of it: the
        // session that was refused must not read what it could not approve.
        const section = error.code === "approval_code_used" ? await requestSection(request) : "";
        return answer(reply.code(error.status), "Not approved", `${why}.`, section);
      }
    },
  );
  api.post(
    "/approve",
    {
      ...checkedFirst(operatorOnly("approvals.decide"), organisationOf),
      schema: { querystring: approveLinkQuery, response: { 200: grantAnswer } },
    },
    async (request) => ({ grant: await approve(request, request.query.token) }),
  );
}
