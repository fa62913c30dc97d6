// The shapes of the passkey routes at the edge. A WebAuthn answer is judged whole by the passkeys
// service (@simplewebauthn/server), so the schema documents it and refuses only what is not an
// object; the options a ceremony starts with are what the browser helper takes as they are.
import { z } from "zod";
import { stringJudgedByService } from "../http/route-schemas.ts";

/** The JSON form of a PublicKeyCredential (W3C WebAuthn Level 3, toJSON()). */
const credentialJson = z
  .unknown()
  .refine((value) => typeof value === "object" && value !== null && !Array.isArray(value), {
    message: "is a WebAuthn credential (an object)",
  })
  .meta({
    type: "object",
    description: "the browser's PublicKeyCredential as JSON (@simplewebauthn/browser's answer)",
  });

export const assertionInput = z.object({ response: credentialJson });
export const registrationInput = z.object({
  name: stringJudgedByService("a name for the passkey, 1 to 80 characters"),
  response: credentialJson,
});

/**
 * PublicKeyCredentialRequestOptionsJSON, for navigator.credentials.get() (the answer carries every
 * field of the W3C dictionary; these are the ones a client relies on).
 */
export const requestOptions = z.object({
  challenge: z.string(),
  rpId: z.string().optional(),
  userVerification: z.string().optional().describe("always required"),
  allowCredentials: z.array(z.object({ id: z.string(), type: z.string() })).optional(),
  timeout: z.number().optional(),
});
/** PublicKeyCredentialCreationOptionsJSON, for navigator.credentials.create(). */
export const creationOptions = z.object({
  challenge: z.string(),
  rp: z.object({ id: z.string().optional(), name: z.string() }),
  user: z.object({ id: z.string(), name: z.string(), displayName: z.string() }),
});

export const passkey = z.object({
  id: z.string(),
  name: z.string(),
  created_at: z.string(),
  last_used_at: z.string().nullable(),
  backed_up: z.boolean().describe("synced between the operator's devices"),
  device_type: z.enum(["singleDevice", "multiDevice"]),
});
export const passkeyList = z.object({ passkeys: z.array(passkey) });
export const addedPasskey = z.object({ passkey });
export const passkeySignedIn = z.object({ ok: z.literal(true), csrf_token: z.string() });
export const passkeyVerified = z.object({
  ok: z.literal(true),
  /** What the answer proved: the second step of sign-in, or a step-up. */
  purpose: z.enum(["second_factor", "step_up"]),
});
