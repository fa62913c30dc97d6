// The signing modes' row, beside inject: a signature over the request as it will be sent
// (method, host, path, headers, exact body bytes), dated by the call's clock. The signing key
// goes into the signature only; the origin and the answer never see it.
import { AppError } from "@latch/shared/errors";
import { readAwsSigningScope } from "@latch/shared/inject/aws-host";
import { sigv4QueryRefusal } from "@latch/shared/inject/aws-presign";
import { signLikeWebhook } from "../../inject/hmac-signatures.ts";
import { signSigV4 } from "../../inject/sigv4.ts";
import { type CallStep, requireStage } from "./outgoing-call.ts";

export const signRequest: CallStep = async (call) => {
  if (call.inject.kind === "hmac") {
    const credential = requireStage(call.credential, "credential was opened");
    // call.body is the Uint8Array the upstream writes as is: the HMAC covers those bytes.
    call.headers = signLikeWebhook(
      call.inject.provider,
      credential.secret,
      call.headers,
      call.body,
      call.now(),
    );
    return;
  }
  if (call.inject.kind !== "sigv4") return;
  // The control plane refuses these before asking for an approval; the proxy does not trust it to.
  const refusal = sigv4QueryRefusal(call.path);
  if (refusal !== undefined) throw new AppError("invalid_path", refusal);
  const credential = requireStage(call.credential, "credential was opened");
  const scope = readAwsSigningScope(call.host);
  if (scope === undefined) {
    throw new AppError(
      "invalid_inject",
      `sigv4 signs for AWS hosts only (<service>.<region>.amazonaws.com); ${call.host} is not one`,
    );
  }
  // Content-Type is the upstream's to send (call.contentType, the same value): signed here so
  // that it cannot be changed on the way, then left to the upstream.
  const contentType =
    call.contentType === undefined ? [] : [{ name: "content-type", value: call.contentType }];
  const signed = await signSigV4(
    {
      method: call.method,
      host: call.host,
      path: call.path,
      headers: [...call.headers.filter((header) => header.name !== "content-type"), ...contentType],
      body: call.body,
    },
    credential,
    scope,
    { date: new Date(call.now()) },
  );
  call.headers = signed.filter((header) => header.name !== "content-type");
};
