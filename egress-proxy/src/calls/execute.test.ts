// Execute's one promise to the control plane's approvals: once the origin has answered, no later
// failure inside the proxy (redaction, shaping) may report the request as unsent, or a spent
// one-call approval would be given back and the same request could go out again.
import type { CallSpec, Ticket } from "@latch/proto/egress";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { createMetrics } from "../metrics/metrics.ts";
import type { UpstreamResponse } from "../upstream/call.ts";
import { createExecute, type ExecuteDeps } from "./execute.ts";

const SECRET = "sk_live_execute_unit_canary_0c1d";

function spec(): CallSpec {
  return {
    credential: { itemName: "API_KEY", keyId: "k1", sealedValue: new Uint8Array([1]), username: "" },
    inject: "bearer",
    host: "api.example.com",
    allowedHosts: ["api.example.com"],
    method: "DELETE",
    path: "/v1/everything",
    body: new Uint8Array(),
    contentType: "",
    timeoutMs: 5_000,
    headers: [],
    redact: [],
  } as unknown as CallSpec;
}

function executeWith(upstreamCall: () => Promise<UpstreamResponse>) {
  const deps = {
    checkTicket: async () =>
      ({
        id: "t".repeat(22),
        issuer: "i",
        audience: "a",
        issuedAtMs: 0,
        expiresAtMs: 0,
        call: spec(),
      }) as Ticket,
    spendTicket: async () => {},
    keyring: { current: { keyId: "k1", publicKey: new Uint8Array() }, open: () => SECRET },
    resolver: {
      resolve: async () => ({ host: "api.example.com", address: "93.184.216.34", family: 4, port: 443 }),
    },
    upstream: { call: upstreamCall, close: async () => {} },
    metrics: createMetrics(),
    logger: pino({ level: "silent" }),
  } as unknown as ExecuteDeps;
  return createExecute(deps);
}

describe("Execute after the origin answered", () => {
  it("reports reached_origin when a step after the answer throws", async () => {
    const execute = executeWith(async () => ({
      status: 200,
      body: Buffer.from("{}"),
      // Reading the headers fails, as any bug in redaction or shaping might.
      get headers(): never {
        throw new Error("shaping failed");
      },
    }));
    const response = await execute(undefined);
    expect(response.error?.code).toBe("internal");
    expect(response.reachedOrigin).toBe(true);
  });

  it("still reports an unsent request as unsent (a connect failure before the answer)", async () => {
    const execute = executeWith(async () => {
      throw new Error("connect ECONNREFUSED");
    });
    const response = await execute(undefined);
    expect(response.reachedOrigin).toBe(false);
  });
});
