// Passkeys (WebAuthn Level 3, DECISIONS "Passkeys and single sign-on") with @simplewebauthn/server:
// the relying party is BASE_URL (RP id its host, origin its origin), user verification is required
// in every ceremony, and nothing secret is stored (a public key, a counter, the backup flags).
// Every ceremony's challenge is single use, lives 5 minutes and is bound to the session that asked
// for it, or before any session to a cookie of the browser that did (passkeys.repo.ts).
import { randomBytes } from "node:crypto";
import { AppError } from "@latch/shared/errors";
import { newId } from "@latch/shared/ids";
import { refuseUnsafeText } from "@latch/shared/text/safe-string";
import {
  type AuthenticationResponseJSON,
  type AuthenticatorTransport,
  generateAuthenticationOptions,
  generateRegistrationOptions,
  type PublicKeyCredentialCreationOptionsJSON,
  type PublicKeyCredentialRequestOptionsJSON,
  type RegistrationResponseJSON,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
} from "@simplewebauthn/server";
import { isUniqueViolation } from "../db/database.ts";
import type { PasskeyRow } from "../db/schema.ts";
import type { ChallengeBinding, ChallengePurpose, PasskeysRepo } from "./passkeys.repo.ts";

/** A challenge lives this long; the browser's own prompt gives up after TIMEOUT_MS. */
export const CHALLENGE_TTL_MS = 5 * 60_000;
const TIMEOUT_MS = 120_000;
export const MAX_PASSKEYS = 20;
/** W3C WebAuthn Level 3, 7.1: a longer credential id fails the registration ceremony. */
const MAX_CREDENTIAL_ID_BYTES = 1023;

export interface RelyingParty {
  /** The host of BASE_URL (W3C WebAuthn 5.1.2: an RP id is a host, no scheme or port). */
  id: string;
  /** BASE_URL's origin: the only origin an answer may come from. */
  origin: string;
  name: string;
}

export function relyingPartyOf(baseUrl: string): RelyingParty {
  const url = new URL(baseUrl);
  return { id: url.hostname, origin: url.origin, name: "Latch" };
}

/** What Access shows of a passkey: never its key. */
export interface PasskeyView {
  id: string;
  name: string;
  created_at: string;
  last_used_at: string | null;
  /** Synced between the operator's devices (a multi-device credential that is backed up). */
  backed_up: boolean;
  device_type: "singleDevice" | "multiDevice";
}

export function passkeyView(row: PasskeyRow): PasskeyView {
  return {
    id: row.id,
    name: row.name,
    created_at: row.created_at.toISOString(),
    last_used_at: row.last_used_at ? row.last_used_at.toISOString() : null,
    backed_up: row.backed_up,
    device_type: row.device_type,
  };
}

/** The WebAuthn user handle of an operator: its id's bytes, which name nobody outside Latch. */
export function userHandleOf(operatorId: string): Uint8Array<ArrayBuffer> {
  return new Uint8Array(Buffer.from(operatorId, "utf8"));
}

export interface PasskeysDeps {
  repo: PasskeysRepo;
  rp: RelyingParty;
  now: () => Date;
}

/**
 * What a WebAuthn library's refusal may tell the log: its words, not the values it quotes (it
 * quotes the expected challenge, which may still be live for another session or browser).
 */
export function passkeyFailureCause(error: unknown): Error {
  const message = error instanceof Error ? error.message : String(error);
  return new Error(message.replace(/"[^"]*"|'[^']*'|`[^`]*`/g, '"…"').slice(0, 300));
}

/** WebAuthn's authenticator transports (Level 3); the browser's list is kept to these, each once. */
const TRANSPORTS: ReadonlySet<string> = new Set([
  "ble",
  "cable",
  "hybrid",
  "internal",
  "nfc",
  "smart-card",
  "usb",
]);

/** The transports a new passkey's answer names, as stored and handed back in allow lists. */
export function knownTransports(raw: unknown): AuthenticatorTransport[] {
  if (!Array.isArray(raw)) return [];
  return [
    ...new Set(raw.filter((t): t is AuthenticatorTransport => typeof t === "string" && TRANSPORTS.has(t))),
  ];
}

/** The one refusal of an answer that does not verify: which check failed is logged, not told. */
function refused(cause?: unknown): AppError {
  return new AppError("passkey_invalid", "the passkey's answer was not accepted; try again", {
    cause: cause === undefined || typeof cause === "string" ? cause : passkeyFailureCause(cause),
  });
}

export function checkPasskeyName(raw: unknown): string {
  refuseUnsafeText("name", raw);
  const name = typeof raw === "string" ? raw.trim() : "";
  if (name.length < 1 || name.length > 80) {
    throw new AppError("invalid_request", "a passkey's name is 1 to 80 characters");
  }
  return name;
}

/** An answer from the browser, checked for the shape WebAuthn gives it before anything reads it. */
function credentialId(response: unknown): string {
  const id = (response as { id?: unknown } | null)?.id;
  if (typeof id !== "string" || !/^[A-Za-z0-9_-]{16,1366}$/.test(id)) {
    throw new AppError("invalid_request", "response is not a WebAuthn credential");
  }
  return id;
}

export function createPasskeysService(deps: PasskeysDeps) {
  const { repo, rp } = deps;

  /**
   * 32 random bytes; stored by the hash of their base64url form, which is what the browser's
   * clientDataJSON carries back and what the expectedChallenge check is given.
   */
  async function newChallenge(
    purpose: ChallengePurpose,
    binding: ChallengeBinding,
  ): Promise<Uint8Array<ArrayBuffer>> {
    const challenge = new Uint8Array(randomBytes(32));
    const now = deps.now();
    await repo.insertChallenge(
      Buffer.from(challenge).toString("base64url"),
      purpose,
      binding,
      new Date(now.getTime() + CHALLENGE_TTL_MS),
      now,
    );
    return challenge;
  }

  /** The expectedChallenge check: takes the challenge (once) and remembers what it was for. */
  function challengeTaker(purposes: readonly ChallengePurpose[], binding: ChallengeBinding) {
    const taken: { purpose?: ChallengePurpose } = {};
    const check = async (challenge: string) => {
      taken.purpose = await repo.takeChallenge(challenge, purposes, binding, deps.now());
      return taken.purpose !== undefined;
    };
    return { check, taken };
  }

  return {
    async registrationOptions(
      operator: { id: string; email: string },
      sessionId: string,
    ): Promise<PublicKeyCredentialCreationOptionsJSON> {
      const existing = await repo.findPasskeysOf(operator.id);
      if (existing.length >= MAX_PASSKEYS) {
        throw new AppError("plan_limit", `an account has at most ${MAX_PASSKEYS} passkeys`);
      }
      return generateRegistrationOptions({
        rpName: rp.name,
        rpID: rp.id,
        userName: operator.email,
        userDisplayName: operator.email,
        userID: userHandleOf(operator.id),
        challenge: await newChallenge("register", { sessionId }),
        timeout: TIMEOUT_MS,
        attestationType: "none",
        // The same authenticator twice would be one factor counted as two.
        excludeCredentials: existing.map((p) => ({ id: p.credential_id, transports: p.transports })),
        // A discoverable credential (it signs in with no email) that verifies its user.
        authenticatorSelection: { residentKey: "required", userVerification: "required" },
      });
    },

    /** Verifies a registration answered to this session's challenge and stores the passkey. */
    async register(
      operatorId: string,
      sessionId: string,
      input: { name: unknown; response: unknown },
    ): Promise<PasskeyView> {
      const name = checkPasskeyName(input.name);
      const named = credentialId(input.response);
      const challenge = challengeTaker(["register"], { sessionId });
      let verified: Awaited<ReturnType<typeof verifyRegistrationResponse>>;
      try {
        verified = await verifyRegistrationResponse({
          response: input.response as RegistrationResponseJSON,
          expectedChallenge: challenge.check,
          expectedOrigin: rp.origin,
          expectedRPID: rp.id,
          requireUserVerification: true,
        });
      } catch (error) {
        throw new AppError("passkey_invalid", "the new passkey's answer was not accepted; add it again", {
          cause: passkeyFailureCause(error),
        });
      }
      if (!verified.verified) throw refused();
      const info = verified.registrationInfo;
      // The id kept is the one every sign-in looks the passkey up by (the answer's `id`): the
      // authenticator's data must carry that same id, and at most 1023 bytes of it. The library
      // reads the data's own id and compares it with nothing; an unchecked one of up to 64 KiB
      // would reach the database's unique index, too long for it (a 500).
      if (info.credential.id !== named || Buffer.from(named, "base64url").length > MAX_CREDENTIAL_ID_BYTES) {
        throw refused("the authenticator's data names another or an over-long credential id");
      }
      const id = newId("pky");
      const createdAt = deps.now();
      let isStored: boolean;
      try {
        // Counted and inserted under the operator's row lock: two registrations at once (each
        // answering its own challenge) cannot both pass the count at MAX_PASSKEYS - 1.
        isStored = await repo.insertPasskeyUnderLimit(
          {
            id,
            operatorId,
            credentialId: info.credential.id,
            publicKey: info.credential.publicKey,
            signCount: info.credential.counter,
            transports: knownTransports(info.credential.transports),
            deviceType: info.credentialDeviceType,
            backedUp: info.credentialBackedUp,
            aaguid: info.aaguid,
            name,
            createdAt,
          },
          MAX_PASSKEYS,
        );
      } catch (error) {
        // One credential id belongs to one account: a key already registered (here or to another
        // account) is refused, never moved.
        if (isUniqueViolation(error)) {
          throw new AppError("duplicate_passkey", "this passkey is already registered with Latch");
        }
        throw error;
      }
      if (!isStored) throw new AppError("plan_limit", `an account has at most ${MAX_PASSKEYS} passkeys`);
      const row = await repo.findPasskeyByCredentialId(info.credential.id);
      return passkeyView(row!);
    },

    /**
     * Options for a sign-in or verification. Signed out (`browserToken`): any discoverable passkey of
     * this site, no account named. With a session: only that operator's passkeys.
     */
    async assertionOptions(
      purpose: Exclude<ChallengePurpose, "register">,
      binding: ChallengeBinding,
      operatorId?: string,
    ): Promise<PublicKeyCredentialRequestOptionsJSON> {
      const allow = operatorId ? await repo.findPasskeysOf(operatorId) : [];
      if (operatorId && allow.length === 0) {
        throw new AppError("not_found", "this account has no passkey; add one under Access");
      }
      return generateAuthenticationOptions({
        rpID: rp.id,
        challenge: await newChallenge(purpose, binding),
        timeout: TIMEOUT_MS,
        userVerification: "required",
        allowCredentials: allow.map((p) => ({ id: p.credential_id, transports: p.transports })),
      });
    },

    /**
     * Verifies an assertion against a challenge of `purposes` bound to `binding`, and, with
     * `operatorId`, that the passkey is that operator's. Answers the operator it proves and the
     * purpose of the challenge it answered.
     */
    async verifyAssertion(
      purposes: readonly Exclude<ChallengePurpose, "register">[],
      binding: ChallengeBinding,
      response: unknown,
      operatorId?: string,
    ): Promise<{ operatorId: string; purpose: ChallengePurpose; passkey: PasskeyView }> {
      const id = credentialId(response);
      const passkey = await repo.findPasskeyByCredentialId(id);
      // A removed passkey, another site's, another account's: all the same refusal.
      if (!passkey || (operatorId !== undefined && passkey.operator_id !== operatorId)) {
        throw new AppError("passkey_invalid", "this passkey is not registered to this Latch account");
      }
      // A discoverable credential names its user: it must be the passkey's own account.
      const userHandle = (response as AuthenticationResponseJSON).response?.userHandle;
      if (
        userHandle !== undefined &&
        userHandle !== Buffer.from(userHandleOf(passkey.operator_id)).toString("base64url")
      ) {
        throw refused("the user handle names another account");
      }
      const challenge = challengeTaker(purposes, binding);
      const from = Number(passkey.sign_count);
      let verified: Awaited<ReturnType<typeof verifyAuthenticationResponse>>;
      try {
        verified = await verifyAuthenticationResponse({
          response: response as AuthenticationResponseJSON,
          expectedChallenge: challenge.check,
          expectedOrigin: rp.origin,
          expectedRPID: rp.id,
          credential: {
            id: passkey.credential_id,
            publicKey: new Uint8Array(passkey.public_key),
            counter: from,
            transports: passkey.transports as never,
          },
          requireUserVerification: true,
        });
      } catch (error) {
        throw refused(error);
      }
      if (!verified.verified || !challenge.taken.purpose) throw refused();
      const info = verified.authenticationInfo;
      const now = deps.now();
      if (
        !(await repo.updatePasskeyUsed(
          passkey.id,
          from,
          info.newCounter,
          { backedUp: info.credentialBackedUp },
          now,
        ))
      ) {
        throw refused("the signature counter did not move forward");
      }
      return {
        operatorId: passkey.operator_id,
        purpose: challenge.taken.purpose,
        passkey: passkeyView({ ...passkey, last_used_at: now, backed_up: info.credentialBackedUp }),
      };
    },

    async list(operatorId: string): Promise<PasskeyView[]> {
      return (await repo.findPasskeysOf(operatorId)).map(passkeyView);
    },

    count: (operatorId: string): Promise<number> => repo.findPasskeyCount(operatorId),

    async rename(operatorId: string, id: string, rawName: unknown): Promise<void> {
      const name = checkPasskeyName(rawName);
      if (!(await repo.updatePasskeyName(operatorId, id, name))) {
        throw new AppError("not_found", "no such passkey");
      }
    },

    /** Removes a passkey; never the account's last factor (no authenticator, no other passkey). */
    async remove(operatorId: string, id: string): Promise<void> {
      const outcome = await repo.deletePasskeyUnlessLast(operatorId, id);
      if (outcome === "not_found") throw new AppError("not_found", "no such passkey");
      if (outcome === "last_factor") {
        throw new AppError(
          "last_factor",
          "this is your only way to sign in besides the email code; add another passkey or an authenticator app first",
        );
      }
    },
  };
}

export type PasskeysService = ReturnType<typeof createPasskeysService>;
