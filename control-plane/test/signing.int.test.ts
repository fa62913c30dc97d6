// The signing inject modes through the real proxy to loopback TLS origins standing in for the real
// hosts: each origin checks the signature the way the real service does, from the bytes it
// received, and the signing key itself never reaches the origin, the answer or a log.
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { Hash } from "@smithy/core/serde";
import { SignatureV4 } from "@smithy/signature-v4";
import type { SourceData } from "@smithy/types";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RecordedRequest } from "../../egress-proxy/test/origin.ts";
import { type EgressHarness, startEgressHarness } from "./egress-harness.ts";

const AWS_HOST = "sqs.eu-west-1.amazonaws.com";
const S3_HOST = "photos.s3.eu-west-1.amazonaws.com";
const ACCESS_KEY_ID = "AKIDLATCHTEST0000001";
const SECRET_ACCESS_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYLATCHKEY01";

let harness: EgressHarness;

beforeAll(async () => {
  harness = await startEgressHarness({ providerHosts: [AWS_HOST, S3_HOST] });
}, 60_000);

afterAll(async () => {
  await harness.close();
});

class Sha256 extends Hash {
  constructor(secret?: SourceData) {
    super("sha256", secret);
  }
}

/**
 * What AWS does with a SigV4 request: read the scope and signed header list from Authorization,
 * rebuild the canonical request from the request as received, and compare signatures. The
 * payload hash header must be the SHA-256 of the body received.
 */
async function verifyAwsSignature(recorded: RecordedRequest, secret: string): Promise<string | undefined> {
  const authorization = String(recorded.headers.authorization ?? "");
  const match =
    /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(
      authorization,
    );
  if (!match) return "no SigV4 Authorization header";
  const [, accessKeyId, , region, service, signedHeaders, signature] = match as unknown as string[];
  const bodyHash = createHash("sha256").update(recorded.body).digest("hex");
  if (recorded.headers["x-amz-content-sha256"] !== bodyHash) return "payload hash does not match the body";
  const names = (signedHeaders ?? "").split(";");
  for (const required of ["host", "x-amz-date", "x-amz-content-sha256"]) {
    if (!names.includes(required)) return `${required} is not signed`;
  }
  const headers: Record<string, string> = {};
  for (const name of names) headers[name] = String(recorded.headers[name] ?? "");
  const url = new URL(recorded.url, "https://origin.invalid");
  const query: Record<string, string> = {};
  for (const [key, value] of url.searchParams) query[key] = value;
  const amzDate = String(recorded.headers["x-amz-date"]);
  const date = new Date(
    `${amzDate.slice(0, 4)}-${amzDate.slice(4, 6)}-${amzDate.slice(6, 8)}T${amzDate.slice(9, 11)}:${amzDate.slice(11, 13)}:${amzDate.slice(13, 15)}Z`,
  );
  const signer = new SignatureV4({
    service: service ?? "",
    region: region ?? "",
    credentials: { accessKeyId: accessKeyId ?? "", secretAccessKey: secret },
    sha256: Sha256,
    uriEscapePath: service !== "s3",
  });
  const expected = await signer.sign(
    {
      method: recorded.method,
      protocol: "https:",
      hostname: headers.host ?? "",
      path: url.pathname,
      query,
      headers,
      body: recorded.body,
    },
    { signingDate: date, signableHeaders: new Set(names) },
  );
  const expectedSignature = /Signature=([0-9a-f]{64})$/.exec(String(expected.headers.authorization))?.[1];
  return expectedSignature === signature ? undefined : "signature does not match";
}

function answerWithVerdict(verdict: (recorded: RecordedRequest) => Promise<string | undefined>) {
  return (_req: IncomingMessage, res: ServerResponse, recorded: RecordedRequest) => {
    void verdict(recorded).then((problem) => {
      res.writeHead(problem === undefined ? 200 : 403, { "content-type": "application/json" });
      // Echo what arrived, as a careless service might: the answer must still hold no key.
      res.end(JSON.stringify({ problem: problem ?? null, headers: recorded.headers, url: recorded.url }));
    });
  };
}

describe("sigv4", () => {
  it.each([
    ["a GET with a query", AWS_HOST, "GET", "/?Action=ListQueues&Version=2012-11-05", undefined],
    ["a form POST", AWS_HOST, "POST", "/", "Action=SendMessage&MessageBody=hello%20world"],
    ["an S3 object path", S3_HOST, "GET", "/albums/2026/cover%20art.jpg", undefined],
  ])("signs %s so that the service accepts it", async (_label, host, method, path, body) => {
    harness.setHandler(answerWithVerdict((recorded) => verifyAwsSignature(recorded, SECRET_ACCESS_KEY)));
    const spec = await harness.callSpec(SECRET_ACCESS_KEY, {
      inject: "sigv4",
      username: ACCESS_KEY_ID,
      host,
      allowedHosts: [host],
      method,
      path,
      body: body === undefined ? Buffer.alloc(0) : Buffer.from(body),
      contentType: body === undefined ? "" : "application/x-www-form-urlencoded",
      headers: [
        { name: "x-amz-content-sha256", value: "UNSIGNED-PAYLOAD" },
        { name: "x-amz-target", value: "AmazonSQS.ListQueues" },
      ],
    });
    const answer = await harness.client.execute(harness.minter.mintCallTicket(spec), 15_000);
    expect(answer.error).toBeUndefined();
    expect(JSON.parse(answer.body.toString()).problem).toBeNull();
    expect(answer.originStatus).toBe(200);
    const recorded = harness.origin.requests.at(-1);
    // The caller's payload-hash header was replaced: the body is signed, never UNSIGNED-PAYLOAD.
    expect(recorded?.headers["x-amz-content-sha256"]).not.toBe("UNSIGNED-PAYLOAD");
    expect(String(recorded?.headers.authorization)).toContain(`Credential=${ACCESS_KEY_ID}/`);
    expect(String(recorded?.headers.authorization)).toContain(
      host === S3_HOST ? "/eu-west-1/s3/aws4_request" : "/eu-west-1/sqs/aws4_request",
    );
    // The secret access key went into the signature only.
    expect(JSON.stringify(recorded)).not.toContain(SECRET_ACCESS_KEY);
    expect(harness.logs.text()).not.toContain(SECRET_ACCESS_KEY);
  });

  it("is checked for real: the fake service refuses the same call checked against another key", async () => {
    harness.setHandler(
      answerWithVerdict((recorded) => verifyAwsSignature(recorded, `${SECRET_ACCESS_KEY}x`)),
    );
    const spec = await harness.callSpec(SECRET_ACCESS_KEY, {
      inject: "sigv4",
      username: ACCESS_KEY_ID,
      host: AWS_HOST,
      allowedHosts: [AWS_HOST],
    });
    const answer = await harness.client.execute(harness.minter.mintCallTicket(spec), 15_000);
    expect(answer.originStatus).toBe(403);
    expect(JSON.parse(answer.body.toString()).problem).toBe("signature does not match");
  });

  it("is refused for a host whose region and service cannot be read, before anything is sent", async () => {
    const before = harness.origin.requests.length;
    const spec = await harness.callSpec(SECRET_ACCESS_KEY, { inject: "sigv4", username: ACCESS_KEY_ID });
    const answer = await harness.client.execute(harness.minter.mintCallTicket(spec), 15_000);
    expect(answer.error?.code).toBe("invalid_inject");
    expect(answer.reachedOrigin).toBe(false);
    expect(harness.origin.requests.length).toBe(before);
  });

  it("is refused without an access key id", async () => {
    const spec = await harness.callSpec(SECRET_ACCESS_KEY, {
      inject: "sigv4",
      host: AWS_HOST,
      allowedHosts: [AWS_HOST],
    });
    const answer = await harness.client.execute(harness.minter.mintCallTicket(spec), 15_000);
    expect(answer.error?.code).toBe("invalid_inject");
    expect(answer.reachedOrigin).toBe(false);
  });
});

const SIGNING_SECRET = "whsec_latch_signing_canary_0123456789";

function sameHex(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

const hmac = (secret: string, ...parts: (string | Buffer)[]) => {
  const mac = createHmac("sha256", secret);
  for (const part of parts) mac.update(part);
  return mac.digest("hex");
};

/** Each provider's receiver check, as its docs describe it (tolerance 5 minutes where dated). */
const RECEIVERS = {
  // Stripe: "t=<ts>,v1=<sig>[,v1=...]"; expected = HMAC(secret, "<ts>." + raw body).
  stripe: (recorded: RecordedRequest, secret: string): string | undefined => {
    const parts = String(recorded.headers["stripe-signature"] ?? "").split(",");
    const t = parts.find((part) => part.startsWith("t="))?.slice(2) ?? "";
    const v1 = parts.filter((part) => part.startsWith("v1=")).map((part) => part.slice(3));
    if (!/^\d+$/.test(t) || Math.abs(Date.now() / 1000 - Number(t)) > 300)
      return "timestamp outside tolerance";
    const expected = hmac(secret, `${t}.`, recorded.body);
    return v1.some((sig) => sameHex(sig, expected)) ? undefined : "no matching v1 signature";
  },
  // Slack: basestring "v0:<X-Slack-Request-Timestamp>:<raw body>", "v0=" + hex.
  slack: (recorded: RecordedRequest, secret: string): string | undefined => {
    const t = String(recorded.headers["x-slack-request-timestamp"] ?? "");
    if (!/^\d+$/.test(t) || Math.abs(Date.now() / 1000 - Number(t)) > 300)
      return "timestamp outside tolerance";
    const expected = `v0=${hmac(secret, `v0:${t}:`, recorded.body)}`;
    return sameHex(String(recorded.headers["x-slack-signature"] ?? ""), expected)
      ? undefined
      : "bad signature";
  },
  // GitHub: "sha256=" + hex HMAC of the raw payload.
  github: (recorded: RecordedRequest, secret: string): string | undefined => {
    const expected = `sha256=${hmac(secret, recorded.body)}`;
    return sameHex(String(recorded.headers["x-hub-signature-256"] ?? ""), expected)
      ? undefined
      : "bad signature";
  },
};

describe("hmac:<provider>_sig", () => {
  it.each([
    ["stripe", "application/json", '{"id":"evt_1","type":"invoice.paid","note":"Zoë ✓"}'],
    ["slack", "application/x-www-form-urlencoded", "command=%2Fdeploy&text=prod+now&user_name=zo%C3%AB"],
    ["github", "application/json", '{"action":"opened","number":7}'],
  ] as const)(
    "%s: the receiver accepts the delivery over the exact body bytes",
    async (provider, contentType, body) => {
      const receive = RECEIVERS[provider];
      harness.setHandler(answerWithVerdict(async (recorded) => receive(recorded, SIGNING_SECRET)));
      const spec = await harness.callSpec(SIGNING_SECRET, {
        inject: `hmac:${provider}_sig`,
        method: "POST",
        path: "/webhooks/incoming",
        body: Buffer.from(body),
        contentType,
        // An agent's own signature header is dropped, never forwarded beside ours.
        headers: [
          { name: provider === "stripe" ? "stripe-signature" : "x-hub-signature-256", value: "forged" },
        ],
      });
      const answer = await harness.client.execute(harness.minter.mintCallTicket(spec), 15_000);
      expect(answer.error).toBeUndefined();
      expect(JSON.parse(answer.body.toString()).problem).toBeNull();
      expect(answer.originStatus).toBe(200);
      const recorded = harness.origin.requests.at(-1);
      expect(recorded?.body.toString()).toBe(body);
      expect(JSON.stringify(recorded)).not.toContain("forged");
      expect(JSON.stringify(recorded)).not.toContain(SIGNING_SECRET);
      expect(answer.body.toString()).not.toContain(SIGNING_SECRET);
      expect(harness.logs.text()).not.toContain(SIGNING_SECRET);
    },
  );

  it("is checked for real: a receiver holding another secret refuses the delivery", async () => {
    harness.setHandler(
      answerWithVerdict(async (recorded) => RECEIVERS.github(recorded, `${SIGNING_SECRET}x`)),
    );
    const spec = await harness.callSpec(SIGNING_SECRET, {
      inject: "hmac:github_sig",
      method: "POST",
      path: "/webhooks/incoming",
      body: Buffer.from("{}"),
      contentType: "application/json",
    });
    const answer = await harness.client.execute(harness.minter.mintCallTicket(spec), 15_000);
    expect(answer.originStatus).toBe(403);
  });
});

/**
 * An origin that echoes the request as a careless (or hostile) service might: the headers in the
 * body, and the signature header of its choice again in x-request-id.
 */
function echoing(signatureHeader: string) {
  return (_req: IncomingMessage, res: ServerResponse, recorded: RecordedRequest) => {
    res.writeHead(200, {
      "content-type": "application/json",
      "x-request-id": String(recorded.headers[signatureHeader] ?? ""),
    });
    res.end(JSON.stringify({ headers: recorded.headers, url: recorded.url }));
  };
}

describe("what a signing mode adds is a credential too (issue 21 item 4)", () => {
  it.each([
    ["stripe", ["stripe-signature"]],
    ["slack", ["x-slack-signature", "x-slack-request-timestamp"]],
    ["github", ["x-hub-signature-256"]],
  ] as const)("hmac:%s_sig: every header the proxy added comes back [redacted]", async (provider, added) => {
    harness.setHandler(echoing(added[0]));
    const spec = await harness.callSpec(SIGNING_SECRET, {
      inject: `hmac:${provider}_sig`,
      method: "POST",
      path: "/webhooks/echo",
      body: Buffer.from('{"chosen":"by the agent"}'),
      contentType: "application/json",
      headers: [{ name: "x-agent-header", value: "kept-as-sent" }],
    });
    const answer = await harness.client.execute(harness.minter.mintCallTicket(spec), 15_000);
    expect(answer.error).toBeUndefined();
    const recorded = harness.origin.requests.at(-1)!;
    const echoed = JSON.parse(answer.body.toString()) as { headers: Record<string, string> };
    for (const name of added) {
      const sent = String(recorded.headers[name]);
      expect(sent.length).toBeGreaterThan(0);
      expect(echoed.headers[name], name).toBe("[redacted]");
      expect(answer.body.toString()).not.toContain(sent);
    }
    // The signature's hex alone, as an origin's error message might quote it, is redacted too.
    const hex = /[0-9a-f]{64}/.exec(String(recorded.headers[added[0]]))![0];
    expect(answer.body.toString()).not.toContain(hex);
    expect(answer.headers.find((h) => h.name === "x-request-id")?.value).toBe("[redacted]");
    // What the agent itself sent is not a credential and comes back as it was.
    expect(echoed.headers["x-agent-header"]).toBe("kept-as-sent");
  });

  it("sigv4: the Authorization header and its signature come back [redacted]", async () => {
    harness.setHandler(echoing("authorization"));
    const spec = await harness.callSpec(SECRET_ACCESS_KEY, {
      inject: "sigv4",
      username: ACCESS_KEY_ID,
      host: AWS_HOST,
      allowedHosts: [AWS_HOST],
      path: "/?Action=ListQueues",
    });
    const answer = await harness.client.execute(harness.minter.mintCallTicket(spec), 15_000);
    expect(answer.error).toBeUndefined();
    const recorded = harness.origin.requests.at(-1)!;
    const authorization = String(recorded.headers.authorization);
    const signature = /Signature=([0-9a-f]{64})$/.exec(authorization)![1]!;
    const echoed = JSON.parse(answer.body.toString()) as { headers: Record<string, string> };
    expect(echoed.headers.authorization).toBe("[redacted]");
    expect(answer.body.toString()).not.toContain(signature);
    expect(answer.headers.find((h) => h.name === "x-request-id")?.value).toBe("[redacted]");
  });

  it.each(["X-Amz-Signature", "x-amz-credential", "X-Amz-Security-Token", "X%2DAmz%2DSignature"])(
    "sigv4: an agent's %s query parameter is refused before anything is sent",
    async (parameter) => {
      const before = harness.origin.requests.length;
      const spec = await harness.callSpec(SECRET_ACCESS_KEY, {
        inject: "sigv4",
        username: ACCESS_KEY_ID,
        host: AWS_HOST,
        allowedHosts: [AWS_HOST],
        path: `/?Action=ListQueues&${parameter}=chosen`,
      });
      const answer = await harness.client.execute(harness.minter.mintCallTicket(spec), 15_000);
      expect(answer.error?.code).toBe("invalid_path");
      expect(answer.error?.message).toMatch(/presigned/);
      expect(answer.reachedOrigin).toBe(false);
      expect(harness.origin.requests.length).toBe(before);
    },
  );
});
