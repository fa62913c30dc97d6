// The shapes of the connect routes (spec 4.3 "Items and collect").
import { safeString } from "@latch/shared/text/safe-string";
import { z } from "zod";

export const providerParams = z.object({ provider: safeString().min(1).max(32) });

export const connectStart = z
  .object({
    item_name: safeString().min(1).max(128),
    environment: safeString().max(32).optional(),
    client_id: safeString().min(1).max(256).optional(),
    redirect_uri: safeString().max(2048).optional(),
    agent_client_id: safeString().max(64).optional(),
    need_id: safeString().max(64).optional(),
  })
  .strict();

export const connectStartAnswer = z.object({
  authorize_url: z.string(),
  redirect_uri: z.string(),
  provider: z.string(),
});

/** The state a start made (32 random bytes, base64url), or a stranger's text of at most 256. */
export const callbackState = safeString().max(256);

/** What a provider sends back to the redirect URI (RFC 6749 4.1.2 and 4.1.2.1). */
export const connectCallbackQuery = z
  .object({
    code: safeString().max(2048).optional(),
    state: callbackState.optional(),
    error: safeString().max(256).optional(),
    error_description: safeString().max(2048).optional(),
    error_uri: safeString().max(2048).optional(),
    scope: safeString().max(2048).optional(),
    // Google adds these; Slack and GitHub may add others: unknown fields are ignored.
  })
  .passthrough();
