// One Web Push message as the control plane makes it (DECISIONS "Approvals that reach the
// operator"): the subscription checked (an https endpoint on a host PUSH_SERVICE_HOSTS lists, RFC
// 8291 keys of the right form), the payload (no secret, no approval code), encrypted (RFC 8291
// aes128gcm) with a VAPID JWT (RFC 8292) by the web-push library, and cut into what the egress
// proxy's SendPush takes. The control plane never opens the connection itself.
import { createPublicKey } from "node:crypto";
import type { PushSpec } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import { checkHostname } from "@latch/shared/requests/host";
import { isHostMatch } from "@latch/shared/requests/host-pattern";
import { validateRequestPath } from "@latch/shared/requests/path";
import webpush from "web-push";
import type { VapidKeys } from "./vapid-keys.ts";

/** DECISIONS: a push lives 600 s at the push service; an approval request older is stale anyway. */
export const PUSH_TTL_S = 600;
/** Each push is one short call to the push service. */
export const PUSH_TIMEOUT_MS = 5_000;
const MAX_ENDPOINT_LENGTH = 2048;

export interface PushTarget {
  host: string;
  /** Path with its query, as the push service issued it. */
  path: string;
}

/**
 * Where a subscription's endpoint points, if Latch may push there: `https`, port 443, a host
 * PUSH_SERVICE_HOSTS lists (exact or by suffix), no user info, a path the proxy would send.
 * Anything else is refused at subscription, so that the push path cannot be aimed at any host.
 */
export function checkPushEndpoint(endpoint: string, allowedHosts: readonly string[]): PushTarget {
  const refuse = (why: string) => new AppError("invalid_request", `invalid endpoint: ${why}`);
  if (endpoint.length > MAX_ENDPOINT_LENGTH) throw refuse(`longer than ${MAX_ENDPOINT_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw refuse("not a URL");
  }
  if (url.protocol !== "https:") throw refuse("a push endpoint is https");
  if (url.username || url.password) throw refuse("no user info");
  if (url.port !== "" && url.port !== "443") throw refuse("port 443 only");
  if (url.hash) throw refuse("no fragment");
  const host = checkHostname(url.hostname);
  if (!host.ok) throw refuse("the host is not a domain name");
  if (!allowedHosts.some((pattern) => isHostMatch(pattern, host.host))) {
    throw refuse(`${host.host} is not a push service this server sends to (PUSH_SERVICE_HOSTS)`);
  }
  const path = validateRequestPath(`${url.pathname}${url.search}`);
  if (!path.ok) throw refuse("its path is not one Latch sends");
  return { host: host.host, path: path.path };
}

/**
 * RFC 8291 3.2: `p256dh` is the user agent's P-256 public key (65 bytes, uncompressed) and `auth`
 * its 16-byte secret, both base64url. A point off the curve is refused here, not at send time.
 */
export function checkSubscriptionKeys(keys: { p256dh: string; auth: string }): void {
  const base64url = /^[A-Za-z0-9_-]+={0,2}$/;
  const p256dh = base64url.test(keys.p256dh) ? Buffer.from(keys.p256dh, "base64url") : Buffer.alloc(0);
  const auth = base64url.test(keys.auth) ? Buffer.from(keys.auth, "base64url") : Buffer.alloc(0);
  if (auth.length !== 16) throw new AppError("invalid_request", "invalid keys.auth: 16 bytes, base64url");
  if (p256dh.length !== 65 || p256dh[0] !== 0x04) {
    throw new AppError("invalid_request", "invalid keys.p256dh: an uncompressed P-256 point, base64url");
  }
  try {
    // Importing the point checks that it lies on the curve.
    createPublicKey({
      key: {
        kty: "EC",
        crv: "P-256",
        x: p256dh.subarray(1, 33).toString("base64url"),
        y: p256dh.subarray(33, 65).toString("base64url"),
      },
      format: "jwk",
    });
  } catch {
    throw new AppError("invalid_request", "invalid keys.p256dh: not a point on P-256");
  }
}

/** What a push says about an approval request (DECISIONS): no secret, no approval code. */
export interface ApprovalPushPayload {
  grant_id: string;
  agent: string;
  item: string;
  method: string | null;
  host: string | null;
  path: string | null;
  /** The approval page on BASE_URL (sign-in first when needed). */
  url: string;
}

/** Bounds each field so that the encrypted record stays well under 4096 bytes (RFC 8030 7.2). */
export function boundedPayload(payload: ApprovalPushPayload): ApprovalPushPayload {
  const cut = (text: string | null, max: number) => (text === null ? null : text.slice(0, max));
  return {
    grant_id: payload.grant_id.slice(0, 64),
    agent: payload.agent.slice(0, 100),
    item: payload.item.slice(0, 128),
    method: cut(payload.method, 10),
    host: cut(payload.host, 253),
    path: cut(payload.path, 1024),
    url: payload.url.slice(0, 512),
  };
}

/**
 * The SendPush spec for one subscription: the payload encrypted to its keys, the VAPID JWT for the
 * push service's origin (`aud`), the headers a push service reads.
 */
export function pushSpecFor(
  subscription: { endpoint: string; p256dh: string; auth: string },
  target: PushTarget,
  payload: ApprovalPushPayload,
  vapid: VapidKeys & { subject: string },
): PushSpec {
  const details = webpush.generateRequestDetails(
    { endpoint: subscription.endpoint, keys: { p256dh: subscription.p256dh, auth: subscription.auth } },
    JSON.stringify(boundedPayload(payload)),
    {
      TTL: PUSH_TTL_S,
      contentEncoding: "aes128gcm",
      urgency: "high",
      vapidDetails: { subject: vapid.subject, publicKey: vapid.publicKey, privateKey: vapid.privateKey },
    },
  );
  const wanted = new Set(["ttl", "urgency", "topic", "content-encoding", "authorization"]);
  const headers = Object.entries(details.headers as Record<string, string | number>)
    .filter(([name]) => wanted.has(name.toLowerCase()))
    .map(([name, value]) => ({ name: name.toLowerCase(), value: String(value) }));
  return {
    host: target.host,
    path: target.path,
    headers,
    body: Buffer.from(details.body ?? Buffer.alloc(0)),
    timeoutMs: PUSH_TIMEOUT_MS,
  };
}
