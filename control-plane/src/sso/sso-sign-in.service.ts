// Signing in with an organisation's identity provider (DECISIONS "Passkeys and single sign-on"):
// the authorization code flow with PKCE and a nonce, its state single use, 10 minutes and bound to
// the browser that started it; the ID token verified; then the account.
//
// Whom a provider may sign in, decided here against account takeover:
// - only an address of the connection's own domains, and only one the provider says it verified
//   (`email_verified` true): a provider vouching for another domain's address is refused;
// - an address that has no Latch account yet gets one, as a member of this organisation with the
//   connection's default role (auditor unless the owner chose otherwise);
// - an address that has an account signs in only if it is a member of this organisation already:
//   a provider never takes over an account it did not make or was not admitted to (an owner
//   invites it, and its owner accepts with the email code);
// - the session it makes acts in this organisation alone and cannot change how the account signs
//   in (passkeys, authenticator, backup codes): the provider vouches for its organisation, not for
//   the account's others.
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto";
import { type SealingPublicKey, sealValue } from "@latch/shared/crypto/seal";
import { AppError } from "@latch/shared/errors";
import { newId } from "@latch/shared/ids";
import * as oidc from "openid-client";
import { normaliseEmail } from "../auth/email-code.service.ts";
import { STEP_UP_WINDOW_MS } from "../auth/step-up.ts";
import type { SsoConnectionRow } from "../db/schema.ts";
import type { ConnectionKeys, RelyingParty } from "./oidc-relying-party.ts";
import type { SsoRepo } from "./sso.repo.ts";
import type { SsoTransaction } from "./sso-connections.service.ts";

export const SSO_STATE_TTL_MS = 10 * 60_000;
/** A step-up through the provider: it checked the person within the step-up's own window. */
const STEP_UP_MAX_AGE_S = STEP_UP_WINDOW_MS / 1000;

/**
 * Where a sign-in may land afterwards: the pages that send a signed-out browser to sign in
 * (common.js RETURN_PATH) and the console. A path of this site only, never another site's address.
 */
const RETURN_PATH =
  /^\/(console(#[a-z]+)?|approve\?token=[A-Za-z0-9_-]{20,100}|consent\?uid=[A-Za-z0-9_-]{1,128}|device(\/[A-Za-z0-9_-]{1,128})?|invite\?token=[A-Za-z0-9_-]{20,100})$/;

export function safeReturnPath(raw: unknown): string | null {
  return typeof raw === "string" && RETURN_PATH.test(raw) ? raw : null;
}

/**
 * The landing path as the sign-in's row keeps it: encrypted (AES-256-GCM) under a key derived from
 * the browser's flow cookie, which the database holds only as a hash. The path may carry an
 * approval link's or an invitation's token, which are never in the database in plaintext.
 */
export function sealReturnPath(path: string, browserToken: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", returnPathKey(browserToken), iv);
  const sealed = Buffer.concat([cipher.update(path, "utf8"), cipher.final()]);
  return `v1.${Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString("base64url")}`;
}

/** The path `sealReturnPath` kept, or null when it does not open with this browser's cookie. */
export function openReturnPath(stored: string | null, browserToken: string): string | null {
  if (!stored?.startsWith("v1.")) return null;
  const bytes = Buffer.from(stored.slice(3), "base64url");
  if (bytes.length < 29) return null;
  try {
    const decipher = createDecipheriv("aes-256-gcm", returnPathKey(browserToken), bytes.subarray(0, 12));
    decipher.setAuthTag(bytes.subarray(12, 28));
    const path = Buffer.concat([decipher.update(bytes.subarray(28)), decipher.final()]).toString("utf8");
    return safeReturnPath(path);
  } catch {
    return null;
  }
}

function returnPathKey(browserToken: string): Buffer {
  return Buffer.from(hkdfSync("sha256", browserToken, "", "latch sso return path", 32));
}

export interface SsoSignInDeps {
  repo: SsoRepo;
  relyingParty: Pick<RelyingParty, "authorizationUrl" | "checkAnswerIssuer" | "finish">;
  sealingKey(): Promise<SealingPublicKey>;
  /** One transaction: its repo, and its audit append (the row commits with the change, or neither). */
  inTransaction<T>(fn: (tx: SsoTransaction) => Promise<T>): Promise<T>;
  baseUrl: string;
  now: () => Date;
}

export interface SignedInWithSso {
  operatorId: string;
  organisationId: string;
  /**
   * When the person last proved themselves to the provider (auth_time); null when the provider did
   * not say, which is then no verification for a step-up (a provider may reuse its own session).
   */
  verifiedAt: Date | null;
  returnTo: string | null;
}

function keysOf(row: SsoConnectionRow): ConnectionKeys {
  return {
    issuer: row.issuer,
    clientId: row.client_id,
    clientSecret: {
      itemName: "SSO client secret",
      keyId: row.sealing_key_id,
      sealedValue: Buffer.from(row.sealed_client_secret),
      username: "",
    },
    organisationId: row.organisation_id,
  };
}

export function createSsoSignInService(deps: SsoSignInDeps) {
  const redirectUri = `${deps.baseUrl}/sso/callback`;

  return {
    /** The provider's authorization URL for the organisation `slug`, bound to `browserToken`. */
    async start(input: {
      slug: string;
      browserToken: string;
      returnTo?: unknown;
      loginHint?: unknown;
      isStepUp?: boolean;
    }): Promise<URL> {
      const connection = await deps.repo.findConnectionBySlug(input.slug);
      if (!connection)
        throw new AppError("not_found", "this organisation does not sign in with single sign-on");
      const state = randomBytes(32).toString("base64url");
      const nonce = randomBytes(32).toString("base64url");
      const verifier = oidc.randomPKCECodeVerifier();
      // Only the proxy sends the verifier, at the token endpoint: it is kept sealed to it.
      const sealed = await sealValue(await deps.sealingKey(), verifier);
      const now = deps.now();
      const hint =
        typeof input.loginHint === "string" && input.loginHint.length <= 254 ? input.loginHint : undefined;
      const url = await deps.relyingParty.authorizationUrl(keysOf(connection), {
        redirectUri,
        state,
        nonce,
        codeChallenge: await oidc.calculatePKCECodeChallenge(verifier),
        ...(hint && /^[^\s@]+@[^\s@]+$/.test(hint) ? { loginHint: hint } : {}),
        // A step-up asks the provider to check the person again, not to reuse its own session,
        // and to say when it did: an answer without auth_time, or older, is no step-up.
        ...(input.isStepUp ? { prompt: "login", maxAge: STEP_UP_MAX_AGE_S } : {}),
      });
      const returnTo = safeReturnPath(input.returnTo);
      await deps.repo.insertState(
        {
          state,
          browserToken: input.browserToken,
          organisation_id: connection.organisation_id,
          nonce,
          sealed_verifier: sealed.sealed,
          sealing_key_id: sealed.keyId,
          return_to: returnTo && sealReturnPath(returnTo, input.browserToken),
          max_age_s: input.isStepUp ? STEP_UP_MAX_AGE_S : null,
          expires_at: new Date(now.getTime() + SSO_STATE_TTL_MS),
        },
        now,
      );
      return url;
    },

    /** The provider's answer at BASE_URL/sso/callback: the account it proves, in its organisation. */
    async finish(input: { browserToken: string | undefined; callbackUrl: URL }): Promise<SignedInWithSso> {
      const state = input.callbackUrl.searchParams.get("state");
      const now = deps.now();
      const flow =
        state && input.browserToken ? await deps.repo.takeState(state, input.browserToken, now) : undefined;
      // A state of another browser, used, expired or made up: nothing to finish.
      if (!flow) {
        throw new AppError(
          "sso_failed",
          "this sign-in was not started in this browser, was already used or has expired; start again",
        );
      }
      const connection = await deps.repo.findConnection(flow.organisation_id);
      if (!connection)
        throw new AppError("sso_failed", "this organisation no longer signs in with single sign-on");
      // The answer is this provider's (RFC 9207) before its code or its error is read: one redirect
      // URI serves every organisation, so another provider's answer may arrive with this state.
      await deps.relyingParty.checkAnswerIssuer(keysOf(connection), input.callbackUrl);
      const providerError = input.callbackUrl.searchParams.get("error");
      if (providerError) {
        const code = /^[A-Za-z0-9_.-]{1,64}$/.test(providerError) ? providerError : "error";
        throw new AppError("sso_failed", `the identity provider did not sign you in (${code})`);
      }
      const claims = await deps.relyingParty.finish(keysOf(connection), input.callbackUrl, {
        state: state!,
        nonce: flow.nonce,
        verifier: {
          itemName: "SSO PKCE verifier",
          keyId: flow.sealing_key_id,
          sealedValue: Buffer.from(flow.sealed_verifier),
          username: "",
        },
        ...(flow.max_age_s === null ? {} : { maxAge: flow.max_age_s }),
      });
      const email = checkedEmail(claims, connection.email_domains);
      const operatorId = await accountFor(connection, email, now);
      const authTime = typeof claims.auth_time === "number" ? new Date(claims.auth_time * 1000) : null;
      return {
        operatorId,
        organisationId: connection.organisation_id,
        verifiedAt: authTime === null ? null : authTime < now ? authTime : now,
        returnTo: openReturnPath(flow.return_to, input.browserToken!),
      };
    },

    /** "Sign in with SSO" by address: the one organisation whose connection lists its domain. */
    async discover(rawEmail: unknown): Promise<{ sso_url: string }> {
      const email = normaliseEmail(rawEmail);
      const domain = email.slice(email.lastIndexOf("@") + 1);
      const connections = await deps.repo.findConnectionsForDomain(domain);
      if (connections.length === 0) {
        throw new AppError(
          "not_found",
          `no organisation signs in ${domain} addresses with single sign-on here`,
        );
      }
      if (connections.length > 1) {
        throw new AppError(
          "ambiguous",
          `several organisations sign in ${domain} addresses with single sign-on; open your organisation's own link (${deps.baseUrl}/sso/<its name>)`,
        );
      }
      return { sso_url: `/sso/${connections[0]!.slug}?login_hint=${encodeURIComponent(email)}` };
    },

    /**
     * Refuses an email-code or passkey sign-in of a member whose organisation requires single
     * sign-on for the address's domain, naming where to sign in instead.
     */
    async refuseUnlessAllowed(operatorId: string, rawEmail: string): Promise<void> {
      const email = rawEmail.toLowerCase();
      const domain = email.slice(email.lastIndexOf("@") + 1);
      const [required] = await deps.repo.findRequiringMembership(operatorId, domain);
      if (!required) return;
      throw new AppError(
        "sso_required",
        `${email} signs in with ${required.name}'s single sign-on: open ${deps.baseUrl}/sso/${required.slug}`,
        { extra: { sso_url: `/sso/${required.slug}` } },
      );
    },
  };

  /** The account the provider's address is: a member here, or a new one joining with the default role. */
  async function accountFor(connection: SsoConnectionRow, email: string, now: Date): Promise<string> {
    const organisationId = connection.organisation_id;
    const existing = await deps.repo.findOperatorByEmail(email, organisationId);
    // Listing a domain proves nothing: only a domain whose TXT record the organisation published
    // signs in through its provider. Else any organisation could claim another's addresses before
    // their people come, and an owner's own provider could sign in as any member of a listed
    // domain (a whole sign-in, past their second factor: the second approval of a two-person rule).
    const domain = email.slice(email.lastIndexOf("@") + 1);
    if (!connection.verified_domains.includes(domain)) {
      throw new AppError(
        "sso_domain_unverified",
        existing?.role
          ? `this organisation has not proven it holds ${domain} yet, so its single sign-on cannot sign in ${email}: its owner publishes the DNS record shown under Members; until then, sign in with your email code`
          : `this organisation has not proven it holds ${domain} yet, so a new address of it cannot join through single sign-on: its owner publishes the DNS record shown under Members, or invites ${email}`,
      );
    }
    if (existing?.role) return existing.id;
    if (existing) throw notAMember(email);
    const id = newId("opr");
    await deps.inTransaction(async ({ repo, recordEvent }) => {
      if (
        !(await repo.insertOperatorWithMembership(
          { id, email },
          { organisationId, role: connection.default_role },
          now,
        ))
      ) {
        // The address signed up some other way this very moment: it is not this provider's to claim.
        throw notAMember(email);
      }
      await recordEvent({
        organisationId,
        actor: `operator:${id}`,
        action: "member_joined",
        detail: {
          operator_id: id,
          email,
          role: connection.default_role,
          via: "sso",
          issuer: connection.issuer,
        },
      });
    });
    return id;
  }
}

export type SsoSignInService = ReturnType<typeof createSsoSignInService>;

function notAMember(email: string): AppError {
  return new AppError(
    "forbidden",
    `${email} already has a Latch account that is not a member of this organisation: sign in with your email code and ask an owner to invite you`,
  );
}

/** The ID token's address: verified by the provider, and of one of the connection's domains. */
function checkedEmail(claims: Record<string, unknown>, domains: readonly string[]): string {
  if (typeof claims.email !== "string") {
    throw new AppError("sso_failed", "the identity provider sent no email address (ask for the email scope)");
  }
  // OpenID Connect Core 5.1: only a provider's own statement that it verified the address counts.
  if (claims.email_verified !== true && claims.email_verified !== "true") {
    throw new AppError("sso_failed", "the identity provider has not verified this email address");
  }
  // The address as the provider spells it, bar ASCII case, is the account's: normaliseEmail's
  // toLowerCase() and trim() would fold another address onto it (U+212A KELVIN SIGN lowercases to
  // "k", U+00A0 and U+FEFF are trimmed), and the provider vouched for that other address, another
  // person's mailbox there, not for this account's. Latch keeps ASCII addresses only.
  const invalid = () => new AppError("sso_failed", "the identity provider's email address is not valid");
  if (!/^[\x21-\x7e]+$/.test(claims.email)) throw invalid();
  let email: string;
  try {
    email = normaliseEmail(claims.email);
  } catch {
    throw invalid();
  }
  const domain = email.slice(email.lastIndexOf("@") + 1);
  if (!domains.includes(domain)) {
    throw new AppError(
      "sso_failed",
      `the identity provider signed in ${email}, an address outside this organisation's domains (${domains.join(", ")})`,
    );
  }
  return email;
}
