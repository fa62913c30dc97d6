// Opens the call's credential and the spec's extra values to redact. The plaintext lives
// on this call only; every opened value is listed for redaction before anything is sent.
import type { CallStep } from "./outgoing-call.ts";

export const openCredentials: CallStep = (call, deps) => {
  const sealed = call.spec.credential;
  if (!sealed) return; // verify-ticket refuses a call without one; nothing to open
  const username = sealed.username || undefined;
  const secret = deps.keyring.open(sealed.keyId, sealed.sealedValue);
  call.credential = { secret, username, itemName: sealed.itemName };
  call.redactionValues.push(
    { secret, username },
    ...call.spec.redact.map((extra) => ({
      secret: deps.keyring.open(extra.keyId, extra.sealedValue),
      username: extra.username || undefined,
    })),
  );
};
