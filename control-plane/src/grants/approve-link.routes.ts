// GET|POST /approve?token= (spec 4.3): the link in an approval email. Only a signed-in operator of
// the grant's organisation can use it, once. GET shows a page with one button (a link preview or
// a mail scanner fetching it approves nothing); POST approves. The token never reaches a log: the
// request logger drops query strings, and the page sends no Referer.
import { AppError } from "@latch/shared/errors";
import type { FastifyInstance } from "fastify";
import type { Kysely } from "kysely";
import { requireOperator, requireOrganisation } from "../auth/operator-guard.ts";
import type { Database } from "../db/schema.ts";
import type { GrantsService } from "./grants.service.ts";

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Approve a request — Latch</title><link rel="stylesheet" href="/assets/site.css"></head>
<body><main><h1>Approve a request</h1>
<p>An agent asked to use a credential once. Approve it only if you expected this request.</p>
<button type="button" id="approve">Approve one call</button>
<p id="status" role="status" aria-live="polite"></p>
</main><script src="/assets/approve.js"></script></body></html>
`;

const SCRIPT = `"use strict";
(function () {
  var status = document.getElementById("status");
  var button = document.getElementById("approve");
  function csrf() { var m = /(?:^|; )latch_csrf=([^;]+)/.exec(document.cookie); return m ? decodeURIComponent(m[1]) : ""; }
  button.addEventListener("click", function () {
    button.disabled = true;
    fetch(location.pathname + location.search, { method: "POST", headers: { "x-csrf-token": csrf() } })
      .then(function (r) { return r.json().then(function (j) { if (!r.ok) throw new Error((j.error && j.error.message) || j.error || r.status); return j; }); })
      .then(function (j) { status.textContent = "Approved: " + j.grant.agent_id + " may use " + j.grant.item_name + " for one call."; },
            function (e) { status.textContent = e.message; button.disabled = false; });
  });
})();
`;

export function registerApproveLinkRoutes(
  app: FastifyInstance,
  deps: { db: Kysely<Database>; grants: GrantsService },
): void {
  app.get<{ Querystring: { token?: string } }>("/approve", async (request, reply) => {
    if (!request.operatorSession?.is_mfa_passed) return reply.redirect("/sign-in", 302);
    return reply.header("content-security-policy", CSP).type("text/html; charset=utf-8").send(PAGE);
  });
  app.get("/assets/approve.js", async (_request, reply) =>
    reply.type("text/javascript; charset=utf-8").send(SCRIPT),
  );
  app.post<{ Querystring: { token?: string } }>("/approve", async (request) => {
    const context = await requireOperator(request, deps.db, { mfa: true });
    const organisationId = requireOrganisation(context);
    const token = request.query.token;
    if (typeof token !== "string" || !/^[A-Za-z0-9_-]{20,100}$/.test(token)) {
      throw new AppError("invalid_request", "the approval link is incomplete");
    }
    return {
      grant: await deps.grants.approveByLink(organisationId, `operator:${context.operatorId}`, token),
    };
  });
}
