// The one value an Execute's steps advance: the request as it will be sent (method, host, path,
// headers, body, clock), the opened credential, the pinned destination and the origin's answer,
// each field filled by the step that owns it.
import type { CallSpec, ExecuteResponse, RotatedCredential } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import type { InjectMode } from "@latch/shared/inject/inject-mode";
import type { HeaderPair } from "@latch/shared/requests/headers";
import type { DeniedVerdict } from "../../destination/classify.ts";
import type { Destination, DestinationResolver } from "../../destination/resolve.ts";
import type { SealingKeyring } from "../../keys/sealing-keys.ts";
import type { RedactionValue } from "../../redact/redactor.ts";
import type { Upstream, UpstreamResponse } from "../../upstream/call.ts";

/** A credential opened for this call only; the plaintext is dropped with the call. */
export interface OpenedCredential {
  secret: string;
  /** HTTP Basic user id (or access key id for a signer); undefined when none. */
  username: string | undefined;
  /** For messages; never secret. */
  itemName: string;
}

export interface OutgoingCall {
  /** The verified ticket's id; its first 8 characters go to the log line. */
  readonly ticketId: string;
  /** The ticket's expiry, read again when the ticket is claimed right before anything is sent. */
  readonly ticketExpiresAtMs: number;
  /** The ticket's organisation ("" for none): whose upstream connections carry the call. */
  readonly organisationId: string;
  /** The call spec as the control plane signed it; steps read the sealed values from it. */
  readonly spec: CallSpec;
  /** Wall-clock milliseconds, for what a signer dates (SigV4 X-Amz-Date, HMAC timestamps). */
  readonly now: () => number;
  /** `performance.now()` when the Execute began: the deadline and duration count from here. */
  readonly startedAt: number;
  readonly method: string;
  /** The exact hostname, checked against the item's allowed hosts. */
  readonly host: string;
  /** Path and query as they will be sent; an inject step may add the credential's parameter. */
  path: string;
  /** Lowercase names, as they will be sent; an inject or signing step adds its own. */
  headers: HeaderPair[];
  /** The caller's headers as checked, before any step added one: what the agent itself chose. */
  readonly callerHeaders: readonly HeaderPair[];
  readonly body: Uint8Array | undefined;
  readonly contentType: string | undefined;
  readonly timeoutMs: number;
  readonly inject: InjectMode;
  /** Set by open-credentials: the value the inject (or a signing) step puts into the request. */
  credential: OpenedCredential | undefined;
  /** Every value whose spellings are redacted: the credential, the spec's extra values, and any
   * token minted on the way. */
  redactionValues: RedactionValue[];
  /**
   * Set by prepare-redaction, before anything is sent: every value whose spellings the answer is
   * redacted of (redactionValues and what a signing row added). redact-answer builds the
   * redactor from it over the answer's own bytes.
   */
  redaction: readonly RedactionValue[] | undefined;
  /** Set by resolve-destination: the one address the dial step may use. */
  destination: Destination | undefined;
  /** Set by resolve-destination when the public-address rule refused an answer; logged. */
  refusedAddress: DeniedVerdict | undefined;
  /** Set by dial-origin once the origin's answer is in hand: from then on the call was sent. */
  answer: UpstreamResponse | undefined;
  /** Set by redact-answer. */
  redactedAnswer: { headers: UpstreamResponse["headers"]; body: Buffer } | undefined;
  /** Credentials minted or rotated on the way, sealed; empty until a mint or refresh step exists. */
  rotatedCredentials: RotatedCredential[];
  /** Set by mint-token for an OpenID Connect sign-in (TokenExchange.id_token_only): its ID token. */
  idToken: string | undefined;
  /** Set by shape-response: what Execute answers. */
  response: ExecuteResponse | undefined;
}

/** What the steps may use; each step takes only the parts it names. */
export interface StepDeps {
  keyring: Pick<SealingKeyring, "current" | "open">;
  resolver: DestinationResolver;
  upstream: Upstream;
}

/** One row of the table: advances `call`, or throws an AppError with the reason code. */
export type CallStep = (call: OutgoingCall, deps: StepDeps) => void | Promise<void>;

/** A field an earlier row should have set; its absence is a bug in the table's order. */
export function requireStage<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new AppError("internal", `the call reached a step before its ${what}`);
  return value;
}
