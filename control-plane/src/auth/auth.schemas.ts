// The shapes of the sign-in, account, organisation and access routes (spec 4.3 "Sign-in and
// account", 3.3) at the edge. Addresses and codes go on to their services as typed: an address is
// invalid_email there, and a wrong code of any form counts against the operator's limit.
import { safeString } from "@latch/shared/text/safe-string";
import { z } from "zod";
import { stringJudgedByService } from "../http/route-schemas.ts";

const email = stringJudgedByService("the operator's email address");
const authenticatorCode = stringJudgedByService("a 6-digit authenticator code or a backup code");

export const otpSend = z.object({ email });
export const otpVerify = z.object({ email, otp: stringJudgedByService("the code mailed to the address") });
/** Replacing an authenticator on a ready session needs a current code. */
export const totpStart = z.object({ current_code: authenticatorCode });
export const totpCode = z.object({ code: authenticatorCode });
/** The name's length is the service's rule (1 to 80 after trimming). */
export const orgInput = z.object({ name: safeString().optional() });
export const orgDeletion = z.object({
  confirm_name: stringJudgedByService("the organisation's name, typed back exactly"),
});

export const signedIn = z.object({
  ok: z.literal(true),
  enroll: z.boolean(),
  verify: z.boolean(),
  csrf_token: z.string(),
});
export const enrollment = z.object({ otpauth_url: z.string(), qr_svg: z.string(), expires_at: z.string() });
export const confirmedTotp = z.object({ ok: z.literal(true), backup_codes: z.array(z.string()) });
export const verifiedTotp = z.object({ ok: z.literal(true), used_backup_code: z.boolean() });
export const backupCodes = z.object({ backup_codes: z.array(z.string()) });

/** An organisation with its slug and the operator's role in it. */
const organisation = z.object({ id: z.string(), name: z.string(), slug: z.string(), role: z.string() });
export const me = z.object({
  email: z.string(),
  totp_enabled: z.boolean(),
  backup_codes_remaining: z.number(),
  created_at: z.string(),
  session_ready: z.boolean(),
  organisation: organisation.nullable(),
  /** What the operator's role lets them do there (auth/permissions.ts): the console shows those controls. */
  permissions: z.array(z.string()),
  /** Every organisation the operator belongs to, with their role in each, for the console's switcher. */
  organisations: z.array(organisation),
});
export const orgSwitch = z.object({ organisation_id: safeString().max(64) });
export const createdOrg = z.object({ organisation });

/** Clients and grants come from their features' listings; the snapshot passes them on whole. */
const listing = z.array(z.record(z.string(), z.unknown()));
export const accessSnapshot = z.object({
  clients: listing,
  grants: listing,
  operators: z.array(
    z.object({
      operator_id: z.string(),
      email: z.string(),
      role: z.string(),
      created_at: z.string(),
      first_access_at: z.string().nullable(),
      last_access_at: z.string().nullable(),
    }),
  ),
  sessions: z.array(
    z.object({
      session_id: z.string(),
      operator_id: z.string(),
      email: z.string(),
      user_agent: z.string().nullable(),
      created_at: z.string(),
      last_access_at: z.string(),
      ready: z.boolean(),
      current: z.boolean(),
    }),
  ),
});
export const accessEvents = z.object({ events: listing });
export const othersRevoked = z.object({ ok: z.literal(true), revoked: z.number() });
