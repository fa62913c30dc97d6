// Lists every value opened or minted so far, and every header value a signing row added, before
// the request leaves: what the answer is redacted of is fixed before anything is sent. The
// redactor is built from this list over the answer's own bytes (redact-answer.ts), so that only
// the spellings that can occur in it are compiled. A signature (Stripe-Signature, a SigV4
// Authorization) is a credential for the minutes it is valid: an origin that echoes the request
// must not hand the agent a valid signature over a body it chose (issue 21 item 4).
import { isSigningMode } from "@latch/shared/inject/inject-mode";
import type { HeaderPair } from "@latch/shared/requests/headers";
import type { RedactionValue } from "../../redact/redactor.ts";
import type { CallStep } from "./outgoing-call.ts";

/** Shorter added values (none of the schemes writes one) would redact ordinary words. */
const MIN_ADDED_LENGTH = 8;
/** A MAC or signature in hex inside an added value, listed alone so a quoted fragment is caught. */
const HEX_DIGEST = /[0-9a-f]{32,}/gi;

export const prepareRedaction: CallStep = (call) => {
  call.redaction = [
    ...call.redactionValues,
    // A slot mode (bearer, basic, header, cookie) adds the credential itself, already listed; a
    // signing mode adds values derived from it, listed here.
    ...(isSigningMode(call.inject) ? addedHeaderValues(call.callerHeaders, call.headers) : []),
  ];
};

/**
 * The values of `sent` that the caller did not send itself (same name and value), with each hex
 * digest inside them. What the agent chose is not a secret and is left alone.
 */
export function addedHeaderValues(
  caller: readonly HeaderPair[],
  sent: readonly HeaderPair[],
): RedactionValue[] {
  const own = new Set(caller.map((header) => `${header.name.toLowerCase()}\0${header.value}`));
  const values = new Set<string>();
  for (const header of sent) {
    if (own.has(`${header.name.toLowerCase()}\0${header.value}`)) continue;
    if (header.value.length >= MIN_ADDED_LENGTH) values.add(header.value);
    for (const digest of header.value.match(HEX_DIGEST) ?? []) values.add(digest);
  }
  return [...values].map((secret) => ({ secret, username: undefined }));
}
