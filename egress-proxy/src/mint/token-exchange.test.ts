import { ClientAuthentication, TokenGrant } from "@latch/proto/egress";
import { describe, expect, it } from "vitest";
import { MAX_ANSWER_SECRET_CHARS } from "./answer-secrets.ts";
import { buildTokenRequest } from "./token-request.ts";
import { readTokenAnswer } from "./token-response.ts";

const refresh = (clientAuthentication: ClientAuthentication, clientSecret: string | undefined) =>
  buildTokenRequest({
    grant: TokenGrant.TOKEN_GRANT_REFRESH_TOKEN,
    clientAuthentication,
    clientId: "client:id",
    clientSecret,
    refreshToken: "rt/1+2",
    scope: "",
  });

describe("buildTokenRequest", () => {
  it("basic: client id and secret form-encoded inside HTTP Basic (RFC 6749 2.3.1)", () => {
    const request = refresh(ClientAuthentication.CLIENT_AUTHENTICATION_BASIC, "s:e cret");
    const authorization = request.headers.find((h) => h.name === "authorization")?.value ?? "";
    expect(Buffer.from(authorization.replace("Basic ", ""), "base64").toString()).toBe(
      "client%3Aid:s%3Ae+cret",
    );
    expect(Buffer.from(request.body).toString()).toBe("grant_type=refresh_token&refresh_token=rt%2F1%2B2");
  });

  it("form: client_id and client_secret fields", () => {
    const body = Buffer.from(refresh(ClientAuthentication.CLIENT_AUTHENTICATION_FORM, "sec").body).toString();
    expect(new URLSearchParams(body).get("client_secret")).toBe("sec");
    expect(new URLSearchParams(body).get("client_id")).toBe("client:id");
  });

  it("secret_form: the client_secret field alone (Stripe)", () => {
    const params = new URLSearchParams(
      Buffer.from(refresh(ClientAuthentication.CLIENT_AUTHENTICATION_SECRET_FORM, "sk_x").body).toString(),
    );
    expect(params.get("client_secret")).toBe("sk_x");
    expect(params.has("client_id")).toBe(false);
  });

  it("public: client_id only, no secret anywhere", () => {
    const request = refresh(ClientAuthentication.CLIENT_AUTHENTICATION_PUBLIC, undefined);
    const params = new URLSearchParams(Buffer.from(request.body).toString());
    expect(params.get("client_id")).toBe("client:id");
    expect(params.has("client_secret")).toBe(false);
    expect(request.headers.some((h) => h.name === "authorization")).toBe(false);
  });

  it("refuses a confidential exchange without its secret", () => {
    expect(() => refresh(ClientAuthentication.CLIENT_AUTHENTICATION_FORM, undefined)).toThrow(
      /client secret/,
    );
  });

  it("client credentials carries the scope", () => {
    const request = buildTokenRequest({
      grant: TokenGrant.TOKEN_GRANT_CLIENT_CREDENTIALS,
      clientAuthentication: ClientAuthentication.CLIENT_AUTHENTICATION_BASIC,
      clientId: "id",
      clientSecret: "s",
      refreshToken: undefined,
      scope: "a b",
    });
    expect(Buffer.from(request.body).toString()).toBe("grant_type=client_credentials&scope=a+b");
  });
});

describe("readTokenAnswer", () => {
  const json = (value: unknown) => Buffer.from(JSON.stringify(value));
  it("reads RFC 6749 5.1", () => {
    expect(
      readTokenAnswer(
        200,
        "application/json",
        json({ access_token: "a", refresh_token: "r", expires_in: 3600, scope: "x y" }),
      ),
    ).toEqual({
      ok: true,
      tokens: {
        accessToken: "a",
        refreshToken: "r",
        expiresIn: 3600,
        scope: "x y",
        otherSecrets: ["a", "r"],
      },
    });
  });
  it("reads Slack's user token under authed_user", () => {
    const answer = readTokenAnswer(
      200,
      "application/json",
      json({ ok: true, authed_user: { access_token: "xoxp-1", refresh_token: "xoxe-1", expires_in: 43200 } }),
    );
    expect(answer).toEqual({
      ok: true,
      tokens: {
        accessToken: "xoxp-1",
        refreshToken: "xoxe-1",
        expiresIn: 43200,
        scope: "",
        otherSecrets: ["xoxp-1", "xoxe-1"],
      },
    });
  });
  it("lists Google's id_token for redaction, never token_type", () => {
    const answer = readTokenAnswer(
      200,
      "application/json",
      json({ access_token: "ya29.a", id_token: "eyJ.id.token", token_type: "Bearer", expires_in: 3599 }),
    );
    expect(answer.ok && answer.tokens.otherSecrets).toEqual(["ya29.a", "eyJ.id.token"]);
    // An OpenID Connect sign-in reads it (TokenExchange.id_token_only).
    expect(answer.ok && answer.tokens.idToken).toBe("eyJ.id.token");
  });
  it.each([
    [
      "invalid_grant at 400",
      400,
      "application/json",
      json({ error: "invalid_grant", error_description: "Refresh token revoked" }),
      "invalid_grant",
    ],
    [
      "Slack's ok:false at 200",
      200,
      "application/json",
      json({ ok: false, error: "invalid_refresh_token" }),
      "invalid_refresh_token",
    ],
    [
      "GitHub's error at 200",
      200,
      "application/json",
      json({ error: "bad_refresh_token" }),
      "bad_refresh_token",
    ],
    [
      "GitHub's form-encoded error",
      200,
      "application/x-www-form-urlencoded",
      Buffer.from("error=bad_verification_code&error_description=x"),
      "bad_verification_code",
    ],
    [
      "an error code that is not a token",
      400,
      "application/json",
      json({ error: "rt_secret value\nhere" }),
      "http_400",
    ],
    [
      "a client secret echoed as the error (Spotify's hex, Google's GOCSPX-)",
      400,
      "application/json",
      json({ error: "3f9a1c0b7d2e4f6a8b9c0d1e2f3a4b5c" }),
      "http_400",
    ],
    [
      "a GOCSPX- secret as the error",
      401,
      "application/json",
      json({ error: "GOCSPX-AbCdEf_123" }),
      "http_401",
    ],
    ["HTML", 502, "text/html", Buffer.from("<html>"), "http_502"],
  ])("refuses %s", (_label, status, contentType, body, code) => {
    expect(readTokenAnswer(status, contentType, body)).toEqual({
      ok: false,
      providerError: code,
      secrets: [],
    });
  });

  it("keeps a lifetime that fits its uint32 and a scope the database and console can hold", () => {
    const read = (fields: Record<string, unknown>) => {
      const answer = readTokenAnswer(200, "application/json", json({ access_token: "a", ...fields }));
      if (!answer.ok) throw new Error("not read");
      return answer.tokens;
    };
    expect(read({ expires_in: 5_000_000_000 }).expiresIn).toBe(365 * 24 * 3600);
    expect(read({ expires_in: 3600, scope: "chat:write,channels:read" })).toMatchObject({
      expiresIn: 3600,
      scope: "chat:write,channels:read",
    });
    expect(read({ scope: "read\u0000write" }).scope).toBe("");
    expect(read({ scope: "x".repeat(1025) }).scope).toBe("");
    expect(read({ scope: 'a"b' }).scope).toBe("");
  });
});

describe("readTokenAnswer lists every token in the answer (spec 4.2 rule 7: the agent may read it)", () => {
  const raw = (text: string) => Buffer.from(text);
  const listed = (answer: ReturnType<typeof readTokenAnswer>) =>
    answer.ok ? answer.tokens.otherSecrets : answer.secrets;

  it("refuses a name given twice (RFC 6749 3.1), listing every copy: JSON.parse keeps only the last", () => {
    const body = raw('{"access_token":"AAAA0000","refresh_token":"RRRR1111","refresh_token":""}');
    const answer = readTokenAnswer(200, "application/json", body);
    expect(answer).toMatchObject({ ok: false, providerError: "repeated_parameter" });
    expect(listed(answer)).toEqual(["AAAA0000", "RRRR1111"]);
  });

  it("a repeated name nested or in an error answer: refused, every copy listed, no error code repeated", () => {
    const nested = readTokenAnswer(
      200,
      "application/json",
      raw('{"access_token":"a","team":{"id":"T1","id":"T2","bot_token":"xoxb-9"}}'),
    );
    expect(nested).toMatchObject({ ok: false, providerError: "repeated_parameter" });
    expect(listed(nested)).toEqual(["a", "xoxb-9"]);
    const error = readTokenAnswer(
      400,
      "application/json",
      raw('{"error":"invalid_grant","refresh_token":"R-first","refresh_token":"R-last"}'),
    );
    expect(error).toEqual({ ok: false, providerError: "http_400", secrets: ["R-first", "R-last"] });
  });

  it("refuses a form-encoded answer (GitHub without Accept: json) with a field given twice", () => {
    const answer = readTokenAnswer(
      200,
      "application/x-www-form-urlencoded",
      raw("access_token=gho_a&refresh_token=ghr_first&token_type=bearer&refresh_token="),
    );
    expect(answer).toEqual({
      ok: false,
      providerError: "repeated_parameter",
      secrets: ["gho_a", "ghr_first"],
    });
  });

  it("lists tokens at any depth, not only at the top and under authed_user", () => {
    const answer = readTokenAnswer(
      200,
      "application/json",
      raw(
        '{"access_token":"a","team":{"id":"T1","refresh_token":"nested-rt"},"extra":[{"id_token":"deep-id"}]}',
      ),
    );
    expect(answer.ok).toBe(true);
    expect(listed(answer)).toEqual(["a", "nested-rt", "deep-id"]);
  });

  it("lists a token that is not a string: a number as written, the values inside an object or list (not their names, not short ones)", () => {
    const answer = readTokenAnswer(
      200,
      "application/json",
      raw(
        '{"access_token":"a","refresh_token":12345678901234,"tokens":{"bot":"xoxb-1-a-long-bot-token","all":["t-1-a-longer-token",2e9,"t-1"]},"token_type":"Bearer","expires_in":3600}',
      ),
    );
    expect(answer.ok).toBe(true);
    expect(listed(answer)).toEqual(["a", "12345678901234", "xoxb-1-a-long-bot-token", "t-1-a-longer-token"]);
  });

  it("refuses an answer crowded with token-like values (redaction of thousands would hold the proxy)", () => {
    const values = Array.from({ length: 300 }, (_, i) => `"token-value-${String(i).padStart(4, "0")}"`);
    const answer = readTokenAnswer(
      200,
      "application/json",
      raw(`{"access_token":"a-token-value","tokens":[${values.join(",")}]}`),
    );
    expect(answer).toEqual({ ok: false, providerError: "too_many_tokens", secrets: [] });
  });

  it("refuses an answer whose token-like values are over 16 KiB in all, in any form", () => {
    // One long repetitive token: hundreds of spellings of it, each kept whole by the automaton,
    // would hold the proxy for seconds and gigabytes. Refused before any is listed.
    const long = "aB3+/=%&\\e:- ".repeat(Math.ceil((MAX_ANSWER_SECRET_CHARS + 1) / 13));
    const json = (value: unknown) => raw(JSON.stringify(value));
    const crowded = { ok: false, providerError: "too_many_tokens", secrets: [] };
    expect(readTokenAnswer(200, "application/json", json({ access_token: long }))).toEqual(crowded);
    // Split over values that are each short enough, or over an ID token beside the access token.
    const half = long.slice(0, long.length / 2 + 1);
    expect(
      readTokenAnswer(200, "application/json", json({ access_token: half, id_token: `${half}x` })),
    ).toEqual(crowded);
    // Not an object (a list), or an error answer: still refused, not listed for redaction.
    expect(readTokenAnswer(400, "application/json", json([{ access_token: long }]))).toEqual(crowded);
    expect(
      readTokenAnswer(400, "application/json", json({ error: "invalid_grant", refresh_token: long })),
    ).toEqual(crowded);
    // Form-encoded (GitHub without Accept: json).
    expect(
      readTokenAnswer(
        200,
        "application/x-www-form-urlencoded",
        raw(new URLSearchParams({ access_token: long }).toString()),
      ),
    ).toEqual(crowded);
    // A large JWT access token and ID token, of a few kilobytes each, are read.
    const jwt = "eyJhbGciOiJSUzI1NiJ9.".padEnd(6 * 1024, "x");
    expect(
      readTokenAnswer(200, "application/json", json({ access_token: jwt, id_token: `${jwt}y` })).ok,
    ).toBe(true);
  });

  it("lists other credential names: id_token, *_secret, *_key, camelCase, Slack's incoming_webhook", () => {
    const answer = readTokenAnswer(
      200,
      "application/json",
      raw(
        JSON.stringify({
          access_token: "a",
          id_token: "eyJ.id",
          client_secret: "cs-1",
          api_key: "key-1",
          refreshToken: "camel-rt",
          incoming_webhook: { channel: "#general", url: "https://hooks.slack.com/services/T/B/X" },
          token_type: "Bearer",
          refresh_token_expires_in: 15897600,
          scope: "read",
        }),
      ),
    );
    expect(listed(answer)).toEqual([
      "a",
      "eyJ.id",
      "cs-1",
      "key-1",
      "camel-rt",
      "https://hooks.slack.com/services/T/B/X",
    ]);
  });

  it("lists a token escaped in a way no encoder writes in its spelling in the answer too", () => {
    const answer = readTokenAnswer(
      200,
      "application/json",
      raw('{"access_token":"a","refresh_token":"R\\u0052RR1111"}'),
    );
    expect(listed(answer)).toEqual(["a", "RRRR1111", "R\\u0052RR1111"]);
    const form = readTokenAnswer(
      200,
      "application/x-www-form-urlencoded",
      raw("access_token=a&refresh_token=RR%FF11"),
    );
    expect(listed(form)).toEqual(["a", "RR\uFFFD11", "RR%FF11"]);
  });

  it("refuses an answer that is not UTF-8: its tokens could not be spelled as they are written", () => {
    const body = Buffer.concat([
      raw('{"access_token":"a","refresh_token":"RR'),
      Buffer.from([0xff]),
      raw('11"}'),
    ]);
    expect(readTokenAnswer(200, "application/json", body)).toEqual({
      ok: false,
      providerError: "unreadable_response",
      secrets: [],
    });
  });

  it("still reads what the providers send: Slack's bot and user tokens, Stripe connect, GitHub's form", () => {
    const slack = readTokenAnswer(
      200,
      "application/json",
      raw(
        JSON.stringify({
          ok: true,
          app_id: "A1",
          authed_user: {
            id: "U1",
            scope: "chat:write",
            access_token: "xoxp-1",
            token_type: "user",
            refresh_token: "xoxe-1",
            expires_in: 43200,
          },
          scope: "commands",
          token_type: "bot",
          access_token: "xoxb-1",
          bot_user_id: "U2",
          refresh_token: "xoxe-2",
          expires_in: 43200,
          team: { id: "T1", name: "Acme" },
          enterprise: null,
          is_enterprise_install: false,
        }),
      ),
    );
    expect(slack).toMatchObject({ ok: true, tokens: { accessToken: "xoxb-1", refreshToken: "xoxe-2" } });
    expect(listed(slack)).toEqual(["xoxp-1", "xoxe-1", "xoxb-1", "xoxe-2"]);
    const stripe = readTokenAnswer(
      200,
      "application/json",
      raw(
        JSON.stringify({
          access_token: "sk_test_1",
          livemode: false,
          refresh_token: "rt_1",
          token_type: "bearer",
          stripe_publishable_key: "pk_test_1",
          stripe_user_id: "acct_1",
          scope: "read_write",
        }),
      ),
    );
    expect(stripe).toMatchObject({
      ok: true,
      tokens: { accessToken: "sk_test_1", refreshToken: "rt_1", expiresIn: 0 },
    });
    expect(listed(stripe)).toEqual(["sk_test_1", "rt_1", "pk_test_1"]);
    const github = readTokenAnswer(
      200,
      "application/x-www-form-urlencoded",
      raw(
        "access_token=gho_1&expires_in=28800&refresh_token=ghr_1&refresh_token_expires_in=15897600&scope=&token_type=bearer",
      ),
    );
    expect(github).toMatchObject({
      ok: true,
      tokens: { accessToken: "gho_1", refreshToken: "ghr_1", expiresIn: 28800 },
    });
    expect(listed(github)).toEqual(["gho_1", "ghr_1"]);
  });
});
