// What the OAuth pages and hooks do with oidc-provider's interactions: describe the pending
// authorization to the operator, record a consent bound to one organisation (the OAuth client then
// acts through one model client row there), revoke JWT access tokens by jti, and end everything an
// OAuth client was given when the operator revokes it (spec 3.4).
import type { IncomingMessage, ServerResponse } from "node:http";
import { AppError } from "@latch/shared/errors";
import type Provider from "oidc-provider";
import type { AuditEvent } from "../audit/audit.repo.ts";
import { isRole, mayPerform, requirePermission } from "../auth/permissions.ts";
import type { ClientsService } from "../clients/clients.service.ts";
import type { ClientRow } from "../db/schema.ts";
import type { OrgsService } from "../orgs/orgs.service.ts";
import { type AccessTokenVerifier, jtiHash } from "./access-tokens.ts";
import { clientDisplayName, publisherOf, redirectTarget } from "./client-display.ts";
import type { ConsentRow, OAuthRepo } from "./oauth.repo.ts";
import type { OAuthArtifactsRepo } from "./oauth-artifacts.repo.ts";
import { GRANT_TTL_S, MCP_SCOPE, mcpResource } from "./oauth-provider.ts";

/** What the consent page shows (GET /consent/details). */
export interface ConsentDetails {
  uid: string;
  flow: "authorization" | "device";
  client: {
    name: string;
    /** An https client_id (a client metadata document) is shown by its host, which vouches for it. */
    metadata_host: string | null;
    /** The host the browser goes back to; null in the device flow. */
    redirect_host: string | null;
    /** Where the browser goes back to as the page shows it: an https host, anything else whole. */
    redirect_target: string | null;
  };
  /** What the agent will be able to do, one sentence each. */
  abilities: string[];
  /** Each with the environments the agent may act in there (spec 1.4); the operator picks one. */
  organisations: { id: string; name: string; current: boolean; environments: string[] }[];
}

export interface OAuthServiceDeps {
  provider: Provider;
  baseUrl: string;
  oauth: OAuthRepo;
  artifacts: OAuthArtifactsRepo;
  clients: Pick<ClientsService, "ensureOAuthClient">;
  orgs: Pick<OrgsService, "findOrganisationsOf">;
  /**
   * The operator's organisations that require single sign-on of their address ("Require SSO"):
   * an agent is connected there only from a session begun with that sign-on.
   */
  findSsoRequiringOrganisations(operatorId: string): Promise<string[]>;
  /** The environments this plane serves, the first the default (every organisation has them all). */
  environments: readonly string[];
  tokens: AccessTokenVerifier;
  recordEvent(event: AuditEvent): Promise<void>;
  now: () => Date;
}

const ABILITIES = [
  "Call APIs through Latch with the credentials of this organisation, each call as your approvals allow.",
  "Ask you to approve a call, or to store a credential it needs; it never sees a stored secret.",
  "List the names of credentials and approvals (never their values).",
];

function hostOf(url: unknown): string | null {
  if (typeof url !== "string") return null;
  const parsed = URL.parse(url);
  if (!parsed) return null;
  return parsed.host || `${parsed.protocol}//`;
}

/** Who consents: with `onlyOrganisationId`, a session begun with single sign-on, bound to it. */
interface ConsentingOperator {
  operatorId: string;
  organisationId: string | null;
  onlyOrganisationId?: string | null;
}

export function createOAuthService(deps: OAuthServiceDeps) {
  const { provider } = deps;
  const resource = mcpResource(deps.baseUrl);

  async function interactionOf(req: IncomingMessage, res: ServerResponse, uid: string) {
    let details: Awaited<ReturnType<Provider["interactionDetails"]>>;
    try {
      details = await provider.interactionDetails(req, res);
    } catch {
      throw new AppError(
        "not_found",
        "this authorization request has expired or was opened in another browser; start again from your agent",
      );
    }
    if (details.uid !== uid) {
      throw new AppError("not_found", "this authorization request is not the one open in this browser");
    }
    // The client as /oauth/authorize (or /device) resolved it when this interaction began, never
    // resolved again here: that would fetch a client metadata document outside oidc-provider's
    // request (no caller to count, no answer to say Retry-After on) whenever this replica's copy
    // is gone (another replica, or past its cache).
    const client = await deps.artifacts.findInteractionClient(details.uid);
    if (!client || client.clientId !== details.params.client_id) {
      throw new AppError("not_found", "this authorization request has expired; start again from your agent");
    }
    return { details, client };
  }

  /**
   * The organisations `operator` may connect an agent in: where their role may issue a client, only
   * the organisation of a session begun with its single sign-on, and never one that requires its
   * single sign-on of their address from any other session.
   */
  async function consentingOrganisations(operator: ConsentingOperator) {
    const [organisations, requiring] = await Promise.all([
      deps.orgs.findOrganisationsOf(operator.operatorId),
      deps.findSsoRequiringOrganisations(operator.operatorId),
    ]);
    return organisations.filter(
      (o) =>
        (!operator.onlyOrganisationId || o.id === operator.onlyOrganisationId) &&
        (!requiring.includes(o.id) || o.id === operator.onlyOrganisationId),
    );
  }

  function nameOf(client: { clientId: string; clientName?: string | undefined }): string {
    return clientDisplayName(client.clientName, publisherOf(client.clientId) ?? "OAuth client");
  }

  /** The organisation and environment an approval is for, judged against the operator's roles. */
  async function approvalOf(
    input: { organisationId: string | undefined; environment: string | undefined },
    operator: ConsentingOperator,
  ) {
    const organisationId = input.organisationId ?? operator.organisationId;
    if (!organisationId) throw new AppError("not_found", "create an organisation first, then approve");
    const organisation = (await consentingOrganisations(operator)).find((o) => o.id === organisationId);
    if (!organisation || !isRole(organisation.role)) throw new AppError("not_found", "no such organisation");
    // Connecting an agent issues it a client in the organisation (DECISIONS "Teams").
    requirePermission(organisation.role, "clients.write");
    // Spec 1.4: the agent is bound to one environment when it is connected; the operator chose it.
    const environment = input.environment ?? deps.environments[0]!;
    if (!deps.environments.includes(environment)) {
      throw new AppError("not_found", `this service does not serve the ${environment} environment`);
    }
    return { organisationId, environment };
  }

  /**
   * An approval's writes, in their order (see `decide`); `written` says what is kept so far, for
   * `undoDecision`.
   */
  async function approve(
    req: IncomingMessage,
    res: ServerResponse,
    details: Awaited<ReturnType<Provider["interactionDetails"]>>,
    client: { clientId: string; clientName?: string | undefined },
    approval: { organisationId: string; environment: string },
    operator: ConsentingOperator,
    written: { grantId?: string; isConsentWritten?: boolean },
  ): Promise<string> {
    const { organisationId, environment } = approval;
    const row = await deps.clients.ensureOAuthClient(
      organisationId,
      client.clientId,
      nameOf(client),
      environment,
    );
    const grant = new provider.Grant({ accountId: operator.operatorId, clientId: client.clientId });
    grant.addResourceScope(resource, MCP_SCOPE);
    const requested = String(details.params.scope ?? "").split(" ");
    if (requested.includes("openid")) grant.addOIDCScope("openid");
    const grantId = await grant.save();
    written.grantId = grantId;
    // How this session signed in, kept with the grant: where the organisation requires (or comes to
    // require) its single sign-on of the operator's address, only a grant given through it lives.
    await deps.artifacts.saveGrantSignIn(
      grantId,
      { ssoOrganisationId: operator.onlyOrganisationId ?? null },
      GRANT_TTL_S,
    );
    // Marked before the insert: an insert whose answer was lost may still have committed.
    written.isConsentWritten = true;
    await deps.oauth.insertConsent({
      grant_id: grantId,
      organisation_id: organisationId,
      operator_id: operator.operatorId,
      client_row_id: row.id,
      created_at: deps.now(),
      revoked_at: null,
    });
    await deps.recordEvent({
      organisationId,
      actor: `operator:${operator.operatorId}`,
      action: "oauth_client_consented",
      detail: { client_id: row.id, client_name: row.name, environment },
    });
    return provider.interactionResult(
      req,
      res,
      { login: { accountId: operator.operatorId, remember: false }, consent: { grantId } },
      { mergeWithLastSubmission: false },
    );
  }

  /**
   * A decision that failed part-way: its consent and grant (with the grant's sign-in) go, and the
   * claim is given back so that the interaction can be answered again. Each step is tried whatever
   * the one before did (the caller rethrows the first failure); what a failure here leaves is
   * inert, since no code was issued for it, and the claim ends with the interaction.
   */
  async function undoDecision(uid: string, written: { grantId?: string; isConsentWritten?: boolean }) {
    const ignore = () => undefined;
    if (written.grantId !== undefined) {
      if (written.isConsentWritten) await deps.oauth.deleteConsent(written.grantId).catch(ignore);
      await deps.artifacts.destroyGrant(written.grantId).catch(ignore);
    }
    await deps.artifacts.releaseDecision(uid).catch(ignore);
  }

  return {
    async describe(
      req: IncomingMessage,
      res: ServerResponse,
      uid: string,
      operator: ConsentingOperator,
    ): Promise<ConsentDetails> {
      const { details, client } = await interactionOf(req, res, uid);
      // Connecting an agent issues it a client there: only where the operator's role may.
      const organisations = (await consentingOrganisations(operator)).filter(
        (o) => isRole(o.role) && mayPerform(o.role, "clients.write"),
      );
      const redirectUri = details.params.redirect_uri;
      return {
        uid,
        flow: typeof redirectUri === "string" ? "authorization" : "device",
        client: {
          name: nameOf(client),
          metadata_host: publisherOf(client.clientId),
          redirect_host: hostOf(redirectUri),
          redirect_target: redirectTarget(redirectUri),
        },
        abilities: ABILITIES,
        organisations: organisations.map((o) => ({
          id: o.id,
          name: o.name,
          current: o.id === operator.organisationId,
          environments: [...deps.environments],
        })),
      };
    },

    /**
     * The operator's answer, taken once per interaction: the first request claims it by its uid
     * (`claimDecision`); any other, at once or later (a double click, a second tab, a replayed form),
     * is answered as a used interaction is, 404 `not_found`, and writes nothing. Not the winner's
     * redirect: the loser cannot tell whether the winner's decision will stand, and its own may
     * differ (another organisation, or deny). Approving records the consent in the chosen
     * organisation and answers where the browser goes next (the authorization resumes and
     * redirects to the client).
     *
     * Nothing of an approval acts before the last step, `interactionResult`: only the resume it
     * allows issues a code, so a consent and its grant are inert until then. The writes are ordered
     * so the ledger row comes after everything it describes and before that step; a failure at any
     * step undoes the consent and the grant (its sign-in with it) and gives the claim back, so the
     * same interaction can be answered again. The model client row stays: it has no bearer, nothing
     * acts through it without a consent, and the next consent reuses it.
     */
    async decide(
      req: IncomingMessage,
      res: ServerResponse,
      input: {
        uid: string;
        decision: "approve" | "deny";
        organisationId: string | undefined;
        environment: string | undefined;
      },
      operator: ConsentingOperator,
    ): Promise<string> {
      const { details, client } = await interactionOf(req, res, input.uid);
      // A refused choice (an organisation or environment not the operator's) spends nothing: it is
      // judged before the claim.
      const approval = input.decision === "approve" ? await approvalOf(input, operator) : undefined;
      const expiresIn = Math.max(1, (details.exp ?? 0) - Math.floor(deps.now().getTime() / 1000));
      if (!(await deps.artifacts.claimDecision(input.uid, expiresIn))) {
        throw new AppError(
          "not_found",
          "this authorization request has been answered already; start again from your agent",
        );
      }
      const written: { grantId?: string; isConsentWritten?: boolean } = {};
      try {
        if (!approval) {
          return await provider.interactionResult(
            req,
            res,
            { error: "access_denied", error_description: "the operator denied access" },
            { mergeWithLastSubmission: false },
          );
        }
        return await approve(req, res, details, client, approval, operator, written);
      } catch (error) {
        await undoDecision(input.uid, written);
        throw error;
      }
    },

    /**
     * RFC 7009 for a JWT access token: its jti is denylisted until it expires. Any token we did not
     * sign, or one another client holds, is answered the same (200) and changes nothing.
     */
    async revokeAccessToken(token: string, presentedClientId: string | undefined): Promise<void> {
      const claims = await deps.tokens.verify(token);
      if (!claims || (presentedClientId !== undefined && claims.client_id !== presentedClientId)) return;
      await deps.oauth.insertDeniedToken(jtiHash(claims.jti), new Date((claims.exp + 60) * 1000));
      const consent = await deps.oauth.findConsent(claims.grant_id);
      if (consent) {
        await deps.recordEvent({
          organisationId: consent.organisation_id,
          actor: "system",
          action: "oauth_token_revoked",
          detail: { client_id: consent.client_row_id, jti_hash: jtiHash(claims.jti).slice(0, 24) },
        });
      }
    },

    /** A grant oidc-provider revoked (a refresh token revoked or replayed): the ledger says so. */
    async recordGrantRevoked(grantId: string): Promise<void> {
      const consent = await deps.oauth.findConsent(grantId);
      if (!consent) return;
      await deps.recordEvent({
        organisationId: consent.organisation_id,
        actor: "system",
        action: "oauth_grant_revoked",
        detail: { client_id: consent.client_row_id },
      });
    },

    /** A token issued at /oauth/token, in the ledger by a hash of its jti. */
    async recordTokenIssued(grantId: string, jti: string): Promise<void> {
      const consent = await deps.oauth.findConsent(grantId);
      if (!consent) return;
      await deps.recordEvent({
        organisationId: consent.organisation_id,
        actor: "system",
        action: "oauth_token_issued",
        detail: { client_id: consent.client_row_id, jti_hash: jtiHash(jti).slice(0, 24) },
      });
    },

    /**
     * Spec 3.4 for an OAuth client: every consent this organisation's members gave it ends, and with
     * each its grant, refresh tokens and codes (a later refresh is invalid_grant). Its access tokens
     * stop at /mcp because the client row is revoked and the grants are gone.
     */
    async endClient(client: ClientRow): Promise<void> {
      const grantIds = await deps.oauth.updateConsentsRevoked(client.id, deps.now());
      for (const grantId of grantIds) await deps.artifacts.destroyGrant(grantId);
    },

    /**
     * A member left the organisation or was removed (DECISIONS "Teams", as spec 3.4 does for a
     * client): every OAuth grant they gave there ends, with its refresh tokens and codes. Their
     * access tokens already stop at /mcp, which checks membership on every call. The model client
     * rows stay: another member's consent may act through the same row.
     */
    async endMemberConsents(organisationId: string, operatorId: string): Promise<void> {
      const grantIds = await deps.oauth.updateMemberConsentsRevoked(organisationId, operatorId, deps.now());
      for (const grantId of grantIds) await deps.artifacts.destroyGrant(grantId);
      if (grantIds.length > 0) {
        await deps.recordEvent({
          organisationId,
          actor: "system",
          action: "oauth_grant_revoked",
          detail: { operator_id: operatorId, grants: grantIds.length, reason: "member_removed" },
        });
      }
    },

    /**
     * A consent found dead when a token is about to be minted from it, because the clean-up that
     * should have ended it missed it or failed: `member_removed`, its operator is no longer the
     * member who gave it (removed, perhaps invited back since; `endMemberConsents` missed a consent
     * recorded as the removal committed); `client_revoked`, its model client row was revoked (spec
     * 3.4; `endClient` missed a consent recorded as the revocation committed); `sso_required`, its
     * organisation now requires its single sign-on of the operator's address and the consent was
     * not given in a session begun with it (the refused refresh has spent its token already). It
     * ends as that clean-up would have ended it; the operator's consents of a later membership stay.
     */
    async endDeadConsent(
      consent: ConsentRow,
      reason: "member_removed" | "client_revoked" | "sso_required",
    ): Promise<void> {
      const wasLive = await deps.oauth.updateConsentRevoked(consent.grant_id, deps.now());
      await deps.artifacts.destroyGrant(consent.grant_id);
      if (wasLive) {
        await deps.recordEvent({
          organisationId: consent.organisation_id,
          actor: "system",
          action: "oauth_grant_revoked",
          detail: { client_id: consent.client_row_id, operator_id: consent.operator_id, reason },
        });
      }
    },

    /** Sign-out ends the operator's OAuth sign-in sessions too. */
    endSignIn: (operatorId: string) => deps.artifacts.destroySessionsOf(operatorId),
  };
}

export type OAuthService = ReturnType<typeof createOAuthService>;
