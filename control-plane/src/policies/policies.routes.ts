// The policy routes, hosted and local (DECISIONS "Policies"): GET /api/policies with an ETag of
// the version, PUT /api/policies replacing the whole list under If-Match (409 stale_version when it
// moved on, 428 without If-Match, 429 past a member's 60 saves an hour), and POST /api/policies/preview.
// Hosted, under the two-person rule (DECISIONS "Teams"), a PUT that may allow more is 202, kept as
// the organisation's proposal, which another member confirms (POST /api/policies/proposal/confirm)
// or anyone who may edit discards (DELETE /api/policies/proposal).
import { AppError } from "@latch/shared/errors";
import type { FastifyContextConfig, FastifyInstance, FastifyRequest } from "fastify";
import { okAnswer, type ZodTypeProvider } from "../http/route-schemas.ts";
import {
  confirmProposalBody,
  pendingPolicyList,
  policyListWithProposal,
  policyPreviewAnswer,
  policyRulesBody,
  policyRulesBodyDoc,
  savedPolicyList,
} from "./policies.schemas.ts";
import type { ExpectedVersion, PoliciesService } from "./policies.service.ts";
import { type PolicyVariant, policyWarnings } from "./policy-warnings.ts";

/** 500 rules with their lists are larger than the API's usual 128 KiB. */
export const POLICY_BODY_LIMIT_BYTES = 1024 * 1024;

export interface PolicyRouteDeps {
  policies: Pick<
    PoliciesService,
    | "getPolicies"
    | "savePolicies"
    | "previewPolicies"
    | "findProposal"
    | "confirmProposal"
    | "discardProposal"
  >;
  /** Whose names an agent name is (the warnings PUT answers). */
  variant: PolicyVariant;
  /**
   * Who may read and who may change the list, and the organisation and actor of the caller
   * (checked before the body is read). `config` is the route's declaration for each.
   */
  access: {
    read: { config?: FastifyContextConfig; preValidation?: (request: FastifyRequest) => Promise<void> };
    write: { config?: FastifyContextConfig; preValidation?: (request: FastifyRequest) => Promise<void> };
    callerOf(request: FastifyRequest): Promise<{ organisationId: string; actor: string }>;
  };
}

/** A strong entity tag of a version (RFC 9110 8.8.3). */
export const etagOf = (version: number) => `"${version}"`;

/**
 * The version `If-Match` names (RFC 9110 13.1.1): `"3"` (or 3), or `*` for whatever is saved.
 * Absent: 428 (RFC 6585 3), so that a blind PUT cannot overwrite a list someone else just changed.
 */
export function expectedVersionOf(header: string | undefined): ExpectedVersion {
  if (header === undefined || header.trim() === "") {
    throw new AppError(
      "precondition_required",
      'send If-Match with the version you are replacing (the ETag of GET /api/policies, e.g. "3"), or * to replace whatever is saved',
    );
  }
  const tag = header.trim();
  if (tag === "*") return "any";
  const version = /^"?(\d{1,9})"?$/.exec(tag)?.[1];
  if (version === undefined)
    throw new AppError("invalid_request", 'If-Match is one version in quotes, e.g. "3", or *');
  return Number(version);
}

export function registerPolicyRoutes(app: FastifyInstance, deps: PolicyRouteDeps): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  const { read, write, callerOf } = deps.access;
  const isHosted = deps.variant === "hosted";

  api.get(
    "/api/policies",
    {
      ...read,
      config: { ...read.config, openapi: { summary: "The organisation's policy list; ETag is its version" } },
      schema: { response: { 200: policyListWithProposal } },
    },
    async (request, reply) => {
      const { organisationId } = await callerOf(request);
      const list = await deps.policies.getPolicies(organisationId);
      reply.header("etag", etagOf(list.version));
      if (!isHosted) return list;
      return { ...list, proposal: await deps.policies.findProposal(organisationId) };
    },
  );

  api.put(
    "/api/policies",
    {
      ...write,
      bodyLimit: POLICY_BODY_LIMIT_BYTES,
      config: {
        ...write.config,
        openapi: {
          summary:
            'Replace the whole list; If-Match names the version replaced ("3", or *). Hosted under the two-person rule, a list that may allow more is 202: kept for a second member',
          requestBody: policyRulesBodyDoc,
          errors: [409, 428, 429],
        },
      },
      schema: { body: policyRulesBody, response: { 200: savedPolicyList, 202: pendingPolicyList } },
    },
    async (request, reply) => {
      const { organisationId, actor } = await callerOf(request);
      const expected = expectedVersionOf(request.headers["if-match"]);
      const save = await deps.policies.savePolicies(organisationId, actor, expected, request.body.rules);
      if (save.status === "pending") {
        // Nothing was applied: the ETag stays the saved version's.
        reply.header("etag", etagOf(save.proposal.base_version));
        return reply
          .status(202)
          .send({ status: "pending" as const, approvals: "1 of 2" as const, proposal: save.proposal });
      }
      reply.header("etag", etagOf(save.list.version));
      return { ...save.list, warnings: policyWarnings(save.list.rules, deps.variant) };
    },
  );

  // The two-person rule is the organisation's (DECISIONS "Teams"): the local vault has none.
  if (isHosted) registerProposalRoutes(app, deps);

  api.post(
    "/api/policies/preview",
    {
      ...read,
      bodyLimit: POLICY_BODY_LIMIT_BYTES,
      config: {
        ...read.config,
        openapi: {
          summary: "What a list would have decided for the last 7 days of audited calls",
          requestBody: policyRulesBodyDoc,
          errors: [429],
        },
      },
      schema: { body: policyRulesBody, response: { 200: policyPreviewAnswer } },
    },
    async (request) => {
      const { organisationId } = await callerOf(request);
      return deps.policies.previewPolicies(organisationId, request.body.rules);
    },
  );
}

/**
 * Confirming or discarding the proposal: the same write access as PUT (its role, CSRF and
 * step-up), since a confirmation is the save that applies the list.
 */
function registerProposalRoutes(app: FastifyInstance, deps: PolicyRouteDeps): void {
  const api = app.withTypeProvider<ZodTypeProvider>();
  const { write, callerOf } = deps.access;

  api.post(
    "/api/policies/proposal/confirm",
    {
      ...write,
      config: {
        ...write.config,
        openapi: {
          summary:
            "A second member applies the proposal waiting under the two-person rule, if the list saved is still the one it was made from",
          errors: [404, 409, 429],
        },
      },
      schema: { body: confirmProposalBody, response: { 200: savedPolicyList } },
    },
    async (request, reply) => {
      const { organisationId, actor } = await callerOf(request);
      const list = await deps.policies.confirmProposal(organisationId, actor, request.body.proposal_id);
      reply.header("etag", etagOf(list.version));
      return { ...list, warnings: policyWarnings(list.rules, deps.variant) };
    },
  );

  api.delete(
    "/api/policies/proposal",
    {
      ...write,
      config: {
        ...write.config,
        openapi: { summary: "Discard the proposal waiting for a second member", errors: [404] },
      },
      schema: { response: { 200: okAnswer } },
    },
    async (request) => {
      const { organisationId, actor } = await callerOf(request);
      await deps.policies.discardProposal(organisationId, actor);
      return { ok: true as const };
    },
  );
}
