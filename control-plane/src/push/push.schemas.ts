// The Web Push routes' shapes (DECISIONS "Approvals that reach the operator").
import { safeString } from "@latch/shared/text/safe-string";
import { z } from "zod";

export const vapidPublicKeyAnswer = z.object({
  public_key: z
    .string()
    .describe("base64url of the P-256 point: PushManager.subscribe's applicationServerKey"),
});

/** As PushSubscription.toJSON() gives it (the browser's own shape); unknown fields are ignored. */
export const pushSubscriptionInput = z.object({
  endpoint: safeString().min(1).max(2048).describe("https, on a host PUSH_SERVICE_HOSTS lists"),
  keys: z.object({
    p256dh: safeString().min(1).max(200).describe("RFC 8291: the browser's P-256 public key, base64url"),
    auth: safeString().min(1).max(100).describe("RFC 8291: the browser's 16-byte auth secret, base64url"),
  }),
  expirationTime: z.number().nullable().optional().describe("ignored"),
});

export const pushSubscriptionAnswer = z.object({
  subscription: z.object({
    id: z.string(),
    service: z.string().describe("the push service's host"),
    created_at: z.string(),
  }),
});
