// The policy routes, hosted and local (DECISIONS "Policies"): GET /api/policies with an ETag of
// the version, PUT /api/policies replacing the whole list under If-Match (409 stale_version when it
// moved on, 428 without If-Match, 429 past a member's 60 saves an hour), and POST /api/policies/preview.
import { AppError } from "@latch/shared/errors";
import type { FastifyContextConfig, FastifyInstance, FastifyRequest } from "fastify";
import type { ZodTypeProvider } from "../http/route-schemas.ts";
import {
  policyList,
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
  policies: Pick<PoliciesService, "getPolicies" | "replacePolicies" | "previewPolicies">;
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

  api.get(
    "/api/policies",
    {
      ...read,
      config: { ...read.config, openapi: { summary: "The organisation's policy list; ETag is its version" } },
      schema: { response: { 200: policyList } },
    },
    async (request, reply) => {
      const { organisationId } = await callerOf(request);
      const list = await deps.policies.getPolicies(organisationId);
      reply.header("etag", etagOf(list.version));
      return list;
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
          summary: 'Replace the whole list; If-Match names the version replaced ("3", or *)',
          requestBody: policyRulesBodyDoc,
          errors: [409, 428, 429],
        },
      },
      schema: { body: policyRulesBody, response: { 200: savedPolicyList } },
    },
    async (request, reply) => {
      const { organisationId, actor } = await callerOf(request);
      const expected = expectedVersionOf(request.headers["if-match"]);
      const list = await deps.policies.replacePolicies(organisationId, actor, expected, request.body.rules);
      reply.header("etag", etagOf(list.version));
      return { ...list, warnings: policyWarnings(list.rules, deps.variant) };
    },
  );

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
