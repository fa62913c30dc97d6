// Step-up (DECISIONS "Passkeys and single sign-on"): what matters most (a standing approval, its
// two-person confirmation, members and roles, policies, single sign-on) needs the session to have
// proved its user in the last 5 minutes, with a passkey when the operator has one (or the
// organisation asks for one), else the authenticator code. A route declares it in its Fastify
// `config.stepUp`, as it declares who may call it; the one principal check (operator-guard.ts)
// judges it, so no handler can forget. The 5 minutes are the control plane's clock (`Date`), never
// the database's `now()`: one clock decides, whichever database answers.
import { AppError } from "@latch/shared/errors";
import type { FastifyRequest } from "fastify";
import type { OperatorSessionRow, VerifiedMethod } from "../db/schema.ts";

export const STEP_UP_WINDOW_MS = 5 * 60_000;

export type StepUpMethod = VerifiedMethod;

/** What a route declares (Fastify `config.stepUp`). */
export interface StepUpRule {
  /** What the caller is doing, for the sentence: "approving a standing approval". */
  doing: string;
  /**
   * Whether this request needs it, when that depends on the request (the policy a body names):
   * called with the body parsed but not yet validated, so it reads fields defensively. Absent:
   * every request does.
   */
  when?: (request: FastifyRequest) => boolean | Promise<boolean>;
  /**
   * "account": the operator's own sign-in factors (adding a passkey), where an organisation's
   * setting has no say. Default "organisation".
   */
  scope?: "organisation" | "account";
}

/** What a step-up may be made with, for one session. */
export interface StepUpFactors {
  /** The operator has a passkey this session may use. */
  hasPasskey: boolean;
  hasTotp: boolean;
  /** The organisation the session acts in asks for a passkey (standing_approvals_need_passkey). */
  isPasskeyRequired: boolean;
}

declare module "fastify" {
  interface FastifyContextConfig {
    stepUp?: StepUpRule;
  }
}

/**
 * The methods a step-up takes, strongest first and only the strongest the operator has: once an
 * operator has a passkey, a phished authenticator code no longer stands in for it.
 */
export function stepUpMethods(factors: StepUpFactors, scope: StepUpRule["scope"]): StepUpMethod[] {
  if (factors.hasPasskey || (scope !== "account" && factors.isPasskeyRequired)) return ["passkey"];
  if (factors.hasTotp) return ["totp"];
  // An account that signs in only through its organisation's identity provider.
  return ["sso"];
}

/**
 * Whether `session` proved its user with one of `methods` within the last 5 minutes of `now`. A
 * backup code is recovery, not the authenticator code: it signs in (method `totp`, no time step
 * spent) but is no step-up, so one stolen code (and the mailbox) cannot add a passkey or change
 * what matters most. The `totp` method counts only with the authenticator step its code spent.
 */
export function isFreshlyVerified(
  session: Pick<OperatorSessionRow, "verified_at" | "verified_method" | "verified_totp_step">,
  methods: readonly StepUpMethod[],
  now: Date,
): boolean {
  const at = session.verified_at;
  if (!at || !session.verified_method || !methods.includes(session.verified_method)) return false;
  if (session.verified_method === "totp" && isBackupCodeVerification(session)) return false;
  const age = now.getTime() - at.getTime();
  // A verification "from the future" (a clock stepped back) is not trusted either.
  return age >= -60_000 && age <= STEP_UP_WINDOW_MS;
}

/** Whether the session's last verification was a backup code (`totp` with no time step spent). */
export function isBackupCodeVerification(
  session: Pick<OperatorSessionRow, "verified_method" | "verified_totp_step">,
): boolean {
  return session.verified_method === "totp" && session.verified_totp_step === null;
}

/** Whether `rule` applies to this request. */
export async function isStepUpNeeded(
  rule: StepUpRule | undefined,
  request: FastifyRequest,
): Promise<boolean> {
  if (!rule) return false;
  return rule.when ? rule.when(request) : true;
}

const HOW: Record<StepUpMethod, string> = {
  passkey: "confirm with your passkey",
  totp: "enter a code from your authenticator app",
  sso: "sign in again with your organisation's single sign-on",
};

/** 403 step_up_required with the methods that satisfy it (the console asks in place and retries). */
export function stepUpRefusal(rule: StepUpRule, methods: StepUpMethod[], factors: StepUpFactors): AppError {
  const needsNewPasskey = methods[0] === "passkey" && !factors.hasPasskey;
  const message = needsNewPasskey
    ? `${rule.doing} needs a passkey in this organisation; add one under Access, then confirm with it`
    : `${rule.doing} needs a verification of the last 5 minutes: ${HOW[methods[0]!]}`;
  return new AppError("step_up_required", message, { extra: { methods } });
}

/** A string field of a body not validated yet, or undefined. */
export function bodyField(request: FastifyRequest, name: string): unknown {
  const body = request.body;
  return typeof body === "object" && body !== null ? (body as Record<string, unknown>)[name] : undefined;
}
