// Puts the opened credential into the one slot its inject mode names (header, query,
// cookie, Basic, Bearer). A signing mode (SigV4, HMAC) is its own step file and row beside this
// one, over the same OutgoingCall (method, host, path, headers, body and clock are all there).
import { isSigningMode } from "@latch/shared/inject/inject-mode";
import { injectCredential } from "../../inject/inject.ts";
import { type CallStep, requireStage } from "./outgoing-call.ts";

export const injectIntoRequest: CallStep = (call) => {
  if (isSigningMode(call.inject)) return; // sign-request.ts
  const credential = requireStage(call.credential, "credential was opened");
  const injected = injectCredential({ path: call.path, headers: call.headers }, call.inject, credential);
  call.path = injected.path;
  call.headers = injected.headers;
};
