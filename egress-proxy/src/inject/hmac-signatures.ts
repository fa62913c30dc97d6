// `hmac:<provider>_sig`: the outgoing body signed the way that provider signs its webhooks
// (DECISIONS "Providers"), so an agent can deliver a webhook a receiver will accept without ever
// holding the signing secret. The HMAC is over the exact body bytes the upstream sends.
import { createHmac } from "node:crypto";
import { AppError } from "@latch/shared/errors";
import type { HmacProvider } from "@latch/shared/inject/inject-mode";
import type { HeaderPair } from "@latch/shared/requests/headers";

/** Every header any scheme writes; a caller's copy of any of them is dropped first, so the
 * receiver reads exactly one signature and it is ours. */
const SIGNATURE_HEADERS: ReadonlySet<string> = new Set([
  "stripe-signature",
  "x-slack-signature",
  "x-slack-request-timestamp",
  "x-hub-signature",
  "x-hub-signature-256",
]);

function hmacHex(secret: string, ...parts: (string | Uint8Array)[]): string {
  const mac = createHmac("sha256", secret);
  for (const part of parts) mac.update(part);
  return mac.digest("hex");
}

/**
 * Returns `headers` (lowercase names) with the provider's signature headers, dated `nowMs`:
 * - stripe: `stripe-signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">`
 * - slack: `x-slack-request-timestamp: <unix>` and `x-slack-signature: v0=<hex HMAC-SHA256 of "v0:<t>:<body>">`
 * - github: `x-hub-signature-256: sha256=<hex HMAC-SHA256 of body>`
 * The secret goes into the HMAC only.
 *
 * @example signLikeWebhook("github", "It's a Secret to Everybody", [], Buffer.from("Hello, World!"), Date.now())
 *   // [{ name: "x-hub-signature-256", value: "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17" }]
 */
export function signLikeWebhook(
  provider: HmacProvider,
  secret: string,
  headers: readonly HeaderPair[],
  body: Uint8Array | undefined,
  nowMs: number,
): HeaderPair[] {
  if (secret.length === 0) throw new AppError("empty_value", "the stored signing secret is empty");
  const bytes = body ?? new Uint8Array(0);
  const kept = headers.filter((header) => !SIGNATURE_HEADERS.has(header.name.toLowerCase()));
  const t = String(Math.floor(nowMs / 1000));
  switch (provider) {
    case "stripe":
      return [...kept, { name: "stripe-signature", value: `t=${t},v1=${hmacHex(secret, `${t}.`, bytes)}` }];
    case "slack":
      return [
        ...kept,
        { name: "x-slack-request-timestamp", value: t },
        { name: "x-slack-signature", value: `v0=${hmacHex(secret, `v0:${t}:`, bytes)}` },
      ];
    case "github":
      return [...kept, { name: "x-hub-signature-256", value: `sha256=${hmacHex(secret, bytes)}` }];
  }
}
