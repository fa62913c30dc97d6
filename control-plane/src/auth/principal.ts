// Who is calling (spec 5 "Authentication"), worked out once per request, and the one rule that
// answers a caller a route does not accept. A bearer wins over a cookie: an API client's token is
// the credential it chose, and a browser never sends one. Room is left for an OAuth access token:
// one more kind here, one more branch in resolvePrincipal, and the routes that accept it say so.
import { AppError } from "@latch/shared/errors";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { ClientRow, OperatorSessionRow } from "../db/schema.ts";
import { isRole, type Role, type RouteAction } from "./permissions.ts";
import type { StepUpRule } from "./step-up.ts";

/** The kinds a route may accept. */
export type PrincipalKind = "operator" | "model" | "trusted";

export type Principal =
  | { kind: "anonymous" }
  /** A bearer that matches no live client: always 401, never "no bearer". */
  | { kind: "invalid_bearer" }
  | {
      kind: "operator";
      /** Its organisation_id is null when the operator is not a member there (any longer). */
      session: OperatorSessionRow;
      /** The operator's role in the session's organisation; null when it acts in none. */
      role: Role | null;
      /**
       * The organisation's slug when it requires single sign-on of this operator's address and the
       * session did not begin with it: no organisation route answers it there.
       */
      ssoRequiredSlug: string | null;
      /** Whether the operator has a second factor (asked only when a route needs the step). */
      hasAuthenticator(): Promise<boolean>;
      /** Why this session may not do what `rule` guards yet (step-up.ts), or undefined. */
      refuseStepUp(rule: StepUpRule): Promise<AppError | undefined>;
    }
  | {
      kind: "model" | "trusted";
      client: ClientRow;
      /**
       * Set when the bearer was let in on the strength of a recent check (a route that confirms
       * it itself, `confirmsBearer`): the SHA-256 the route must still find on the live client.
       */
      unconfirmedBearerHash?: string;
      /**
       * Whether the bearer still names this live client, asked of the database now: a route that
       * waited on something slow (the proxy opening a value) asks before it answers, since a
       * revoke may have landed meanwhile.
       */
      isStillLive(): Promise<boolean>;
    };

/** What a route declares about its callers (Fastify route `config`). */
export interface RouteAccess {
  /** The principals the route accepts; a route without it is public. */
  principals?: readonly PrincipalKind[];
  /** Spec 4.3: need requests answer 404, not 401, to a caller with no session. */
  anonymousStatus?: 404;
  /** A 401 carries this WWW-Authenticate challenge (MCP: the protected-resource document). */
  challenge?: string;
  /**
   * The handler confirms the bearer itself, before acting (POST /mcp: in the statement its call
   * reads anyway), so a bearer found live within the last minutes may be let in unconfirmed.
   * An unknown bearer is still refused here, before the body is read.
   */
  confirmsBearer?: boolean;
  /**
   * What an operator calling the route does (permissions.ts): the member's role in the session's
   * organisation must allow it, or the answer is 403 forbidden_role. Every route an operator may
   * call declares one; client bearers (model, trusted) are not judged by it.
   */
  action?: RouteAction;
}

declare module "fastify" {
  interface FastifyRequest {
    principal: Principal;
  }
  interface FastifyContextConfig extends RouteAccess {}
}

export interface PrincipalSources {
  bearer: string | undefined;
  session: OperatorSessionRow | undefined;
  /** The operator's role in the session's organisation, as stored. */
  role: string | null;
  ssoRequiredSlug?: string | null;
  /** The live client a bearer belongs to on this plane (one of an environment it serves), or undefined. */
  authenticateBearer(token: string): Promise<ClientRow | undefined>;
  /**
   * For a route that confirms the bearer itself: the client a bearer was found live for within
   * the last minutes, with the bearer's hash, without asking the database; else undefined.
   */
  recallBearer?:
    | ((token: string) => Promise<{ client: ClientRow; bearerHash: string } | undefined>)
    | undefined;
  hasAuthenticator(operatorId: string): Promise<boolean>;
  refuseStepUp(session: OperatorSessionRow, rule: StepUpRule): Promise<AppError | undefined>;
}

/**
 * Thrown by a handler that confirmed an unconfirmed bearer and found it no longer live (revoked
 * or rotated, on another replica): the route answers 401 as the principal hook would have.
 */
export class BearerNotLive extends Error {
  constructor() {
    super("the bearer is no longer live");
    this.name = "BearerNotLive";
  }
}

/** The caller behind a request: its bearer when it sent one, else its operator session. */
export async function resolvePrincipal(sources: PrincipalSources): Promise<Principal> {
  const bearer = sources.bearer;
  if (bearer) {
    const isStillLiveAs = (client: ClientRow) => async () =>
      (await sources.authenticateBearer(bearer))?.id === client.id;
    const recalled = await sources.recallBearer?.(bearer);
    if (recalled && (recalled.client.kind === "model" || recalled.client.kind === "trusted")) {
      return {
        kind: recalled.client.kind,
        client: recalled.client,
        unconfirmedBearerHash: recalled.bearerHash,
        isStillLive: isStillLiveAs(recalled.client),
      };
    }
    const client = await sources.authenticateBearer(bearer);
    if (!client) return { kind: "invalid_bearer" };
    if (client.kind === "model" || client.kind === "trusted") {
      return { kind: client.kind, client, isStillLive: isStillLiveAs(client) };
    }
    return { kind: "invalid_bearer" };
  }
  const session = sources.session;
  if (!session) return { kind: "anonymous" };
  return {
    kind: "operator",
    session,
    // A role the table does not know (a row written by a newer version) is no role at all.
    role: session.organisation_id && isRole(sources.role) ? sources.role : null,
    ssoRequiredSlug: sources.ssoRequiredSlug ?? null,
    hasAuthenticator: () => sources.hasAuthenticator(session.operator_id),
    refuseStepUp: (rule) => sources.refuseStepUp(session, rule),
  };
}

const WRONG_CHANNEL: Record<PrincipalKind, string> = {
  operator: "a client token cannot call operator routes; sign in as an operator",
  model: "only a model client token (avm_...) may call this route",
  trusted: "only a trusted client token (avt_...) may call this route",
};

/**
 * Why `principal` may not call a route that accepts `access`, or undefined when it may. An operator
 * session on a bearer-only route counts as no credential at all (cookies never authenticate a
 * bearer route, so a page on another site cannot ride an operator's cookie into one).
 */
export function refusalFor(principal: Principal, access: RouteAccess): AppError | undefined {
  const accepted = access.principals;
  if (!accepted) return undefined;
  const kind = principal.kind;
  if (kind === "operator" || kind === "model" || kind === "trusted") {
    if (accepted.includes(kind)) return undefined;
    if (kind !== "operator") return new AppError("forbidden", WRONG_CHANNEL[accepted[0]!]);
  }
  if (kind === "invalid_bearer") return new AppError("unauthorized", "unknown bearer token");
  if (access.anonymousStatus === 404) return new AppError("not_found", "no such request");
  return new AppError(
    "unauthorized",
    accepted.includes("operator") ? "sign in first" : "send a client's bearer token in Authorization",
  );
}

/** The onRequest check every route runs: its declared principals, refused before the body is read. */
export async function enforceRouteAccess(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const access = request.routeOptions.config;
  const refusal = refusalFor(request.principal, access);
  if (!refusal) return;
  if (refusal.status === 401 && access.challenge) reply.header("www-authenticate", access.challenge);
  throw refusal;
}

/** The client behind a bearer route (its declared principals were already enforced). */
export function clientOf(request: FastifyRequest): ClientRow {
  const principal = request.principal;
  if (principal.kind !== "model" && principal.kind !== "trusted") {
    throw new AppError("unauthorized", "send a client's bearer token in Authorization");
  }
  return principal.client;
}

/**
 * Route configs, so that each route says who may call it and what an operator does there.
 * @example api.post("/api/items", { ...checkedFirst(operatorOnly("credentials.write"), operatorOf) }, ...)
 */
export function operatorOnly(action: RouteAction) {
  return { principals: ["operator"], action } as const satisfies RouteAccess;
}
export function operatorOrModel(action: RouteAction) {
  return { principals: ["operator", "model"], action } as const satisfies RouteAccess;
}
export const TRUSTED_ONLY = { principals: ["trusted"] } as const satisfies RouteAccess;
