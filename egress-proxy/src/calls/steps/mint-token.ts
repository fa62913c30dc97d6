// The mint-or-refresh row (spec 4.2 rule 7, DECISIONS "Providers"): a provider token exchange
// made here, between opening and preparing redaction, so that every token it yields is redacted
// from the answer. Its results leave only sealed, in rotated_credentials, with their metadata.
import { TokenGrant, TokenKind } from "@latch/proto/egress";
import { sealValue } from "@latch/shared/crypto/seal";
import { AppError } from "@latch/shared/errors";
import { validateCallerHeaders } from "@latch/shared/requests/headers";
import { checkHostname } from "@latch/shared/requests/host";
import { validateRequestPath } from "@latch/shared/requests/path";
import { buildTokenRequest } from "../../mint/token-request.ts";
import {
  exchangeFailed,
  type MintedTokens,
  readTokenAnswer,
  type TokenAnswer,
} from "../../mint/token-response.ts";
import type { CallStep, OutgoingCall, StepDeps } from "./outgoing-call.ts";

/** Under 12 characters nothing is shown (as for stored values), nor four that are not printable ASCII. */
function lastFourOf(token: string): string {
  const last = token.slice(-4);
  return token.length >= 12 && /^[\x21-\x7E]{4}$/.test(last) ? last : "";
}

export const mintToken: CallStep = async (call, deps) => {
  const exchange = call.spec.exchange;
  if (!exchange) return;
  // A sign-in is a code exchange answered with its ID token, nothing else.
  if (exchange.idTokenOnly && exchange.grant !== TokenGrant.TOKEN_GRANT_AUTHORIZATION_CODE) {
    throw new AppError("invalid_request", "an ID-token exchange is an authorization code exchange");
  }
  const host = checkHostname(exchange.tokenHost);
  if (!host.ok) throw new AppError(host.code, host.message);
  // The token URL is one of the item's allowed hosts, like any other destination (rule 7: both
  // items must allow the provider token host).
  if (!call.spec.allowedHosts.includes(host.host)) {
    throw new AppError("host_mismatch", `the credential is not allowed for host ${host.host}`);
  }
  const path = validateRequestPath(exchange.tokenPath);
  if (!path.ok) throw new AppError(path.code, path.message);

  const open = (sealed: typeof exchange.clientSecret) => {
    if (!sealed) return undefined;
    const value = deps.keyring.open(sealed.keyId, sealed.sealedValue);
    call.redactionValues.push({ secret: value, username: undefined });
    return value;
  };
  const request = buildTokenRequest({
    grant: exchange.grant,
    clientAuthentication: exchange.clientAuthentication,
    clientId: exchange.clientId,
    clientSecret: open(exchange.clientSecret),
    refreshToken: open(exchange.refreshToken),
    scope: exchange.scope,
    code: exchange.code,
    redirectUri: exchange.redirectUri,
    codeVerifier: open(exchange.codeVerifier),
  });
  // The client's Basic credentials are the secret in another spelling (form-encoded, then base64):
  // an endpoint that echoes the header must not show them.
  for (const header of request.headers) {
    const basic = /^basic\s+(\S+)$/i.exec(header.value);
    if (header.name.toLowerCase() === "authorization" && basic) {
      call.redactionValues.push({ secret: basic[1]!, username: undefined });
    }
  }
  const headers = [...validateCallerHeaders(exchange.headers), ...request.headers];
  const send = async () => {
    const destination = await deps.resolver.resolve(
      host.host,
      call.timeoutMs - (performance.now() - call.startedAt),
    );
    return deps.upstream.call({
      organisationId: call.organisationId,
      destination,
      method: "POST",
      path: path.path,
      headers: dedupe(headers),
      body: request.body,
      contentType: "application/x-www-form-urlencoded",
      timeoutMs: Math.max(1, call.timeoutMs - (performance.now() - call.startedAt)),
    });
  };
  // The agent's call was the exchange: its failures are the call's (reached_origin as upstream
  // says). Before another call, a failed exchange means the approved request was never sent.
  const answer = exchange.answerIsExchange
    ? await send()
    : await send().catch((caught: unknown) => {
        const code = caught instanceof AppError ? caught.code : "internal";
        throw exchangeFailed(code);
      });
  const contentType = answer.headers.find((h) => h.name === "content-type")?.value ?? "";
  const read = withSafeError(readTokenAnswer(answer.status, contentType, answer.body), call);

  if (exchange.idTokenOnly) {
    // An OpenID Connect sign-in: the ID token is the answer; every token is still redacted from
    // the body (which is not returned), and none is sealed or kept.
    call.answer = answer;
    if (!read.ok) {
      listSecrets(call, read.secrets);
      return;
    }
    for (const secret of new Set([read.tokens.accessToken, ...read.tokens.otherSecrets])) {
      call.redactionValues.push({ secret, username: undefined });
    }
    if (read.tokens.refreshToken)
      call.redactionValues.push({ secret: read.tokens.refreshToken, username: undefined });
    call.idToken = read.tokens.idToken;
    return;
  }
  if (exchange.answerIsExchange) {
    // The agent posted to the token endpoint itself: the answer is the endpoint's, redacted like
    // any other (every token in it is listed below before redaction is prepared).
    call.answer = answer;
    if (read.ok) {
      await keepTokens(call, deps, read.tokens);
      return;
    }
    // A success this proxy cannot read (a byte-order mark, a name given twice, a type it does
    // not know) may hold tokens it could not list for redaction, or could not tell which copy
    // to keep, a rotated refresh token among them: it is not handed on. The request did reach
    // the provider (the answer is set).
    if ((answer.status >= 200 && answer.status < 300) || read.providerError === "too_many_tokens") {
      throw unreadableExchange(read.providerError);
    }
    // An error answer is handed on, without any token-like value it holds.
    listSecrets(call, read.secrets);
    return;
  }
  if (!read.ok) throw exchangeFailed(read.providerError);
  await keepTokens(call, deps, read.tokens);
  // The minted access token is the credential the inject row puts in (as bearer).
  call.credential = {
    secret: read.tokens.accessToken,
    username: undefined,
    itemName: exchange.accessItemName || call.credential?.itemName || "",
  };
};

/**
 * The provider's error code is repeated to the agent, outside redaction: never one that holds a
 * value this call opened (an endpoint echoing the client secret as its "error").
 */
function withSafeError(read: TokenAnswer, call: OutgoingCall): TokenAnswer {
  if (read.ok) return read;
  const code = read.providerError;
  const isSecret = call.redactionValues.some(
    (v) => v.secret.length > 0 && (code.includes(v.secret) || v.secret.includes(code)),
  );
  return isSecret ? { ok: false, providerError: "provider_error", secrets: read.secrets } : read;
}

function listSecrets(call: OutgoingCall, secrets: readonly string[]): void {
  for (const secret of secrets) call.redactionValues.push({ secret, username: undefined });
}

function unreadableExchange(providerError: string): AppError {
  return new AppError(
    "token_exchange_failed",
    `the provider's token answer could not be read (${providerError}), so it is not shown: it may hold tokens that could not be redacted`,
    { extra: { provider_error: providerError } },
  );
}

/** Redacts the tokens and hands them back sealed, with what may be shown about them. */
async function keepTokens(call: OutgoingCall, deps: StepDeps, tokens: MintedTokens): Promise<void> {
  const exchange = call.spec.exchange;
  if (!exchange) return;
  for (const secret of new Set([tokens.accessToken, ...tokens.otherSecrets])) {
    call.redactionValues.push({ secret, username: undefined });
  }
  const issuedAtMs = call.now();
  const key = { keyId: deps.keyring.current.keyId, publicKey: deps.keyring.current.publicKey };
  const access = await sealValue(key, tokens.accessToken);
  call.rotatedCredentials.push({
    credential: {
      itemName: exchange.accessItemName,
      keyId: access.keyId,
      sealedValue: Buffer.from(access.sealed),
      username: "",
    },
    kind: TokenKind.TOKEN_KIND_ACCESS,
    metadata: {
      expiresInS: tokens.expiresIn,
      scope: tokens.scope,
      tokenLast4: lastFourOf(tokens.accessToken),
      issuedAtMs,
    },
  });
  const { refreshToken } = tokens;
  if (refreshToken === undefined) return;
  call.redactionValues.push({ secret: refreshToken, username: undefined });
  const previous = exchange.refreshToken;
  // The same refresh token given back is not a rotation; a new one replaces the stored one.
  if (previous && deps.keyring.open(previous.keyId, previous.sealedValue) === refreshToken) return;
  const sealed = await sealValue(key, refreshToken);
  call.rotatedCredentials.push({
    credential: {
      itemName: previous?.itemName || exchange.refreshItemName,
      keyId: sealed.keyId,
      sealedValue: Buffer.from(sealed.sealed),
      username: "",
    },
    kind: TokenKind.TOKEN_KIND_REFRESH,
    metadata: { expiresInS: 0, scope: tokens.scope, tokenLast4: lastFourOf(refreshToken), issuedAtMs },
  });
}

/** One copy of each header name, the exchange's own last (it owns accept and authorization). */
function dedupe(headers: { name: string; value: string }[]): { name: string; value: string }[] {
  const byName = new Map<string, { name: string; value: string }>();
  for (const header of headers) byName.set(header.name.toLowerCase(), header);
  return [...byName.values()];
}
