// The order of Execute's table and what its one log line says: the ticket is checked before it is
// spent, it is spent only right before anything leaves (after DNS, before the credential is
// opened), and nothing is opened for a ticket that fails either; a refused address is named in the
// call's single log line by its verdict; the OutgoingCall carries what a signing step needs.
import { Writable } from "node:stream";
import { type CallSpec, ExecuteResponse, type Ticket } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import pino from "pino";
import sodium from "sodium-native";
import { describe, expect, it } from "vitest";
import { classifyAddress, type DeniedVerdict } from "../destination/classify.ts";
import { AddressRefused } from "../destination/resolve.ts";
import { createMetrics } from "../metrics/metrics.ts";
import { createExecute, type ExecuteDeps } from "./execute.ts";
import { checkCall } from "./steps/check-call.ts";
import { injectIntoRequest } from "./steps/inject-credential.ts";
import { openCredentials } from "./steps/open-credentials.ts";
import type { StepDeps } from "./steps/outgoing-call.ts";
import type { CallTicket } from "./steps/verify-ticket.ts";

const SECRET = "sk_live_execute_table_canary_7e2f";

function spec(overrides: Partial<CallSpec> = {}): CallSpec {
  return {
    credential: { itemName: "API_KEY", keyId: "k1", sealedValue: Buffer.from([1]), username: "" },
    inject: "bearer",
    host: "api.example.com",
    allowedHosts: ["api.example.com"],
    method: "POST",
    path: "/v1/charges",
    body: Buffer.from('{"amount":1}'),
    contentType: "application/json",
    timeoutMs: 5_000,
    headers: [],
    redact: [],
    ...overrides,
  };
}

function ticket(call: CallSpec = spec()): CallTicket {
  return {
    id: "t".repeat(22),
    issuer: "i",
    audience: "a",
    issuedAtMs: 0,
    expiresAtMs: 0,
    call,
  } as CallTicket;
}

/** A harness recording the order of what Execute touched and every log line it wrote. */
function harness(overrides: Partial<ExecuteDeps> = {}) {
  const events: string[] = [];
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(String(chunk)) as Record<string, unknown>);
      done();
    },
  });
  const metrics = createMetrics();
  const deps: ExecuteDeps = {
    checkTicket: async () => {
      events.push("check");
      return ticket() as Ticket;
    },
    spendTicket: async () => {
      events.push("spend");
    },
    keyring: {
      current: { keyId: "k1", publicKey: new Uint8Array() },
      open: () => {
        events.push("open");
        return SECRET;
      },
    },
    resolver: {
      resolve: async (host) => {
        events.push("resolve");
        return { host, address: "93.184.216.34", family: 4, port: 443 };
      },
    },
    upstream: {
      call: async () => {
        events.push("dial");
        return { status: 200, headers: [], body: Buffer.from(`{"echo":"${SECRET}"}`) };
      },
      close: async () => {},
    },
    metrics,
    logger: pino({ level: "info" }, sink),
    ...overrides,
  };
  return { execute: createExecute(deps), events, lines, metrics };
}

describe("Execute's table: the ticket steps come first, in order", () => {
  it("checks, resolves, spends, opens and dials in that order, and redacts the answer", async () => {
    const { execute, events } = harness();
    const response = await execute(undefined);
    expect(events).toEqual(["check", "resolve", "spend", "open", "dial"]);
    expect(response.originStatus).toBe(200);
    expect(Buffer.from(response.body).toString()).toBe('{"echo":"[redacted]"}');
    expect(response.rotatedCredentials).toEqual([]);
  });

  it("spends nothing and opens nothing when the ticket fails its checks", async () => {
    const { execute, events } = harness({
      checkTicket: async () => {
        events.push("check");
        throw new AppError("ticket_signature", "the call ticket's signature does not verify");
      },
    });
    await expect(execute(undefined)).rejects.toMatchObject({ code: "ticket_signature" });
    expect(events).toEqual(["check"]);
  });

  it("opens nothing for a replayed ticket, and the refusal stays an error of the link", async () => {
    const { execute, events } = harness({
      spendTicket: async () => {
        events.push("spend");
        throw new AppError("ticket_replayed", "the call ticket was already used");
      },
    });
    await expect(execute(undefined)).rejects.toMatchObject({ code: "ticket_replayed" });
    expect(events).toEqual(["check", "resolve", "spend"]);
  });

  it("spends nothing when the destination is refused, so the ticket is not burnt by a refusal", async () => {
    const verdict = classifyAddress("10.0.0.1") as DeniedVerdict;
    const { execute, events } = harness({
      resolver: {
        resolve: async (host) => {
          events.push("resolve");
          throw new AddressRefused(host, verdict);
        },
      },
    });
    const response = await execute(undefined);
    expect(response.reachedOrigin).toBe(false);
    expect(events).toEqual(["check", "resolve"]);
  });
});

describe("an agent's own call to a token endpoint (rule 7)", () => {
  const exchangeSpec = spec({
    host: "oauth.example.com",
    allowedHosts: ["oauth.example.com"],
    path: "/token",
    inject: "refresh",
    exchange: {
      grant: 2,
      tokenHost: "oauth.example.com",
      tokenPath: "/token",
      clientAuthentication: 1,
      clientId: "client",
      clientSecret: { itemName: "APP", keyId: "k1", sealedValue: Buffer.from([2]), username: "" },
      refreshToken: { itemName: "APP_REFRESH", keyId: "k1", sealedValue: Buffer.from([3]), username: "" },
      headers: [],
      scope: "",
      answerIsExchange: true,
      accessItemName: "APP",
      code: "",
      redirectUri: "",
      codeVerifier: undefined,
      refreshItemName: "",
      idTokenOnly: false,
    },
  } as Partial<CallSpec>);
  // A real key to seal the minted tokens to (the proxy's current sealing key).
  const publicKey = new Uint8Array(sodium.crypto_box_PUBLICKEYBYTES);
  sodium.crypto_box_keypair(publicKey, new Uint8Array(sodium.crypto_box_SECRETKEYBYTES));
  const answering = (body: string, status = 200) =>
    harness({
      keyring: { current: { keyId: "k1", publicKey }, open: () => SECRET },
      checkTicket: async () => ticket(exchangeSpec) as Ticket,
      upstream: {
        call: async () => ({
          status,
          headers: [{ name: "content-type", value: "application/json" }],
          body: Buffer.from(body),
        }),
        close: async () => {},
      },
    });

  it("hands back an answer it cannot read only as a refusal, never its body", async () => {
    for (const body of [
      '\uFEFF{"access_token":"NEW_ACCESS_0123456789","refresh_token":"NEW_REFRESH_0123456789"}',
      '{"data":{"access_token":"NEW_ACCESS_0123456789","refresh_token":"NEW_REFRESH_0123456789"}}',
      "NEW_ACCESS_0123456789 NEW_REFRESH_0123456789",
    ]) {
      const response = await answering(body).execute(undefined);
      expect(response.error?.code, body).toBe("token_exchange_failed");
      // The provider was reached: the one-call approval stays spent.
      expect(response.reachedOrigin).toBe(true);
      expect(JSON.stringify(response)).not.toContain("NEW_");
    }
  });

  it("hands back an error answer crowded with token-like values only as a refusal, never its body", async () => {
    const values = Array.from({ length: 300 }, (_, i) => `"NEW_TOKEN_${String(i).padStart(6, "0")}"`);
    const body = `{"error":"invalid_grant","tokens":[${values.join(",")}]}`;
    const response = await answering(body, 400).execute(undefined);
    expect(response.error?.code).toBe("token_exchange_failed");
    expect(response.reachedOrigin).toBe(true);
    expect(JSON.stringify(response)).not.toContain("NEW_TOKEN");
  });

  it("answers a readable one redacted, its tokens sealed for the store", async () => {
    const response = await answering(
      '{"access_token":"NEW_ACCESS_0123456789","refresh_token":"NEW_REFRESH_0123456789","expires_in":3600}',
    ).execute(undefined);
    expect(response.error).toBeUndefined();
    expect(Buffer.from(response.body).toString()).not.toContain("NEW_");
    expect(response.rotatedCredentials.length).toBeGreaterThan(0);
  });

  it("redacts the client's Basic credentials from an endpoint that echoes them", async () => {
    // Form-encoding changes this secret before base64, so no spelling of the secret alone is it.
    const secret = "s3cr+t/with=chars!0123456789";
    const echoing = harness({
      keyring: { current: { keyId: "k1", publicKey }, open: () => secret },
      checkTicket: async () => ticket(exchangeSpec) as Ticket,
      upstream: {
        call: async (request) => ({
          status: 400,
          headers: [{ name: "content-type", value: "application/json" }],
          body: Buffer.from(
            JSON.stringify({
              error: "invalid_client",
              seen: request.headers.find((h) => h.name.toLowerCase() === "authorization")?.value,
            }),
          ),
        }),
        close: async () => {},
      },
    });
    const response = await echoing.execute(undefined);
    const body = Buffer.from(response.body).toString();
    expect(body).toContain("invalid_client");
    const basic = Buffer.from(`client:${encodeURIComponent(secret)}`).toString("base64");
    expect(body).not.toContain(basic);
    expect(body).toContain("[redacted]");
  });

  it("hands back tokens whose lifetime overflows a uint32 and whose scope holds a NUL, sealed and encodable", async () => {
    const response = await answering(
      JSON.stringify({
        access_token: "NEW_ACCESS_0123456789",
        refresh_token: "NEW_REFRESH_0123456789",
        expires_in: 5_000_000_000,
        scope: "read\u0000write",
      }),
    ).execute(undefined);
    expect(response.error).toBeUndefined();
    expect(response.rotatedCredentials.length).toBe(2);
    expect(response.rotatedCredentials[0]?.metadata).toMatchObject({
      expiresInS: 365 * 24 * 3600,
      scope: "",
    });
    expect(() => ExecuteResponse.encode(response).finish()).not.toThrow();
  });

  it("never repeats a provider error code that is a value the call opened", async () => {
    const secret = "lowercase_client_secret_value";
    const refused = harness({
      keyring: { current: { keyId: "k1", publicKey }, open: () => secret },
      checkTicket: async () =>
        ticket({
          ...exchangeSpec,
          exchange: { ...exchangeSpec.exchange!, answerIsExchange: false },
        }) as Ticket,
      upstream: {
        call: async () => ({
          status: 401,
          headers: [{ name: "content-type", value: "application/json" }],
          body: Buffer.from(JSON.stringify({ error: secret })),
        }),
        close: async () => {},
      },
    });
    const response = await refused.execute(undefined);
    expect(response.error?.code).toBe("token_exchange_failed");
    expect(JSON.stringify(response)).not.toContain(secret);
    expect(response.error?.message).toContain("provider_error");
  });

  it("refuses an answer holding a token over 16 KiB, at once and never its body", async () => {
    // Every spelling of a long repetitive token, kept whole by the redaction automaton, held the
    // event loop of every organisation for seconds and took gigabytes.
    const long = `NEW_${"aB3+/=%&\\e:- ".repeat(1_500)}`;
    const started = performance.now();
    const response = await answering(JSON.stringify({ access_token: long, token_type: "Bearer" })).execute(
      undefined,
    );
    expect(response.error?.code).toBe("token_exchange_failed");
    expect(response.reachedOrigin).toBe(true);
    expect(JSON.stringify(response)).not.toContain("NEW_");
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it("hands on a provider's error answer as it is", async () => {
    const response = await answering('{"error":"invalid_grant"}', 400).execute(undefined);
    expect(response.originStatus).toBe(400);
    expect(Buffer.from(response.body).toString()).toContain("invalid_grant");
  });
});

describe("Execute's one log line", () => {
  it("names the refused address's verdict, apart from the public message", async () => {
    const verdict = classifyAddress("169.254.169.254") as DeniedVerdict;
    const { execute, events, lines, metrics } = harness({
      resolver: {
        resolve: async (host) => {
          events.push("resolve");
          throw new AddressRefused(host, verdict);
        },
      },
    });
    const response = await execute(undefined);
    expect(response.error?.code).toBe("link_local");
    expect(response.reachedOrigin).toBe(false);
    expect(events).not.toContain("dial");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      msg: "call refused",
      code: "link_local",
      host: "api.example.com",
      verdict: { allowed: false, reason: "link_local", address: "169.254.169.254" },
    });
    expect(metrics.render()).toContain('latch_egress_denials_total{reason="link_local"} 1');
  });

  it("writes one line for an answered call, without the secret", async () => {
    const { execute, lines } = harness();
    await execute(undefined);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ msg: "call answered", status: 200, method: "POST" });
    expect(JSON.stringify(lines)).not.toContain(SECRET);
  });
});

describe("the OutgoingCall carries what a signing step needs", () => {
  const deps = {
    keyring: { current: { keyId: "k1", publicKey: new Uint8Array() }, open: () => SECRET },
  } as unknown as StepDeps;

  it("has the method, host, path, body, content type, clock and inject mode", () => {
    const call = checkCall(ticket(spec({ method: "put" })), { now: () => 1_700_000_000_000, startedAt: 0 });
    expect(call).toMatchObject({
      method: "PUT",
      host: "api.example.com",
      path: "/v1/charges",
      contentType: "application/json",
      inject: { kind: "bearer" },
    });
    expect(Buffer.from(call.body ?? []).toString()).toBe('{"amount":1}');
    expect(call.now()).toBe(1_700_000_000_000);
  });

  it("re-checks the spec itself: a host outside the allowed hosts is refused", () => {
    expect(() =>
      checkCall(ticket(spec({ host: "evil.example.net" })), { now: Date.now, startedAt: 0 }),
    ).toThrow(expect.objectContaining({ code: "host_mismatch" }));
  });

  it("opens the credential for redaction and injects it into the request", async () => {
    const call = checkCall(ticket(spec({ inject: "query:api_key" })), { now: Date.now, startedAt: 0 });
    await openCredentials(call, deps);
    expect(call.redactionValues).toEqual([{ secret: SECRET, username: undefined }]);
    await injectIntoRequest(call, deps);
    expect(call.path).toBe(`/v1/charges?api_key=${SECRET}`);
  });
});
