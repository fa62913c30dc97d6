// A new passkey's answer as a hostile browser may write it (auth/passkeys.service.ts register): the
// credential id Latch keeps is the one the answer names (`id`, what every later sign-in looks the
// passkey up by) and the authenticator's data carries, at most 1023 bytes (W3C WebAuthn Level 3,
// 7.1); an authenticator's data naming another id, or a longer one, is refused as
// passkey_invalid, never a 500 from the database's unique index. An account holds at most
// MAX_PASSKEYS, also when two registrations land at once.
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { newId } from "@latch/shared/ids";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HostedHarness, signUpOperator, startHosted } from "../../test/hosted.ts";
import { noneAttestationRegistration } from "../../test/webauthn.ts";
import { createPasskeysRepo } from "./passkeys.repo.ts";
import { MAX_PASSKEYS } from "./passkeys.service.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
}, 120_000);
afterAll(async () => {
  await h?.close();
});

const BASE = "http://localhost:8787";

async function addPasskey(attested: Buffer, named?: Buffer) {
  const { browser } = await signUpOperator(h, { label: "passkey-id" });
  const options = await browser.request("POST", "/api/auth/passkeys/options", {});
  expect(options.statusCode, options.body).toBe(200);
  const added = await browser.request("POST", "/api/auth/passkeys", {
    name: "Laptop",
    response: noneAttestationRegistration(options.json().challenge, BASE, attested, named),
  });
  return { browser, added };
}

describe("a new passkey's credential id", () => {
  it("is refused when the authenticator's data carries an id over 1023 bytes", async () => {
    const { browser, added } = await addPasskey(randomBytes(40_000), randomBytes(32));
    expect(added.statusCode, added.body).toBe(401);
    expect(added.json().error.code).toBe("passkey_invalid");
    expect((await browser.request("GET", "/api/auth/passkeys")).json().passkeys).toEqual([]);

    // Named so in the answer too, one byte over: the same refusal, nothing kept.
    const long = randomBytes(1_024);
    const again = await addPasskey(long, long);
    expect(again.added.statusCode, again.added.body).toBe(401);
    expect(again.added.json().error.code).toBe("passkey_invalid");
  });

  it("is refused when the authenticator's data names another id than the answer", async () => {
    const { browser, added } = await addPasskey(randomBytes(32), randomBytes(32));
    expect(added.statusCode, added.body).toBe(401);
    expect(added.json().error.code).toBe("passkey_invalid");
    expect((await browser.request("GET", "/api/auth/passkeys")).json().passkeys).toEqual([]);
  });

  it("is kept as the answer names it when the two agree, up to 1023 bytes", async () => {
    for (const length of [16, 1_023]) {
      const { browser, added } = await addPasskey(randomBytes(length));
      expect(added.statusCode, added.body).toBe(201);
      expect((await browser.request("GET", "/api/auth/passkeys")).json().passkeys).toHaveLength(1);
    }
  });
});

describe("the passkey limit", () => {
  it("two registrations at once, at one under the limit: one is stored, the other is plan_limit", async () => {
    const { browser } = await signUpOperator(h, { label: "passkey-limit" });
    const operatorId = (await browser.request("GET", "/api/orgs/members")).json().members[0]
      .operator_id as string;
    // Two ceremonies of the one session, each with its own challenge (asked while the account had
    // none, as the options need a fresh verification once it has one), answered at the same time
    // once it holds one under the limit.
    const challenges: string[] = [];
    for (const _ of [1, 2]) {
      const options = await browser.request("POST", "/api/auth/passkeys/options", {});
      expect(options.statusCode, options.body).toBe(200);
      challenges.push(options.json().challenge as string);
    }
    const repo = createPasskeysRepo(h.plane.database.db);
    for (let n = 1; n < MAX_PASSKEYS; n++) {
      const { publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
      await repo.insertPasskey({
        id: newId("pky"),
        operatorId,
        credentialId: randomBytes(16).toString("base64url"),
        publicKey: publicKey.export({ format: "der", type: "spki" }),
        signCount: 0,
        transports: ["internal"],
        deviceType: "singleDevice",
        backedUp: false,
        aaguid: null,
        name: `Key ${n}`,
        createdAt: h.clock.now,
      });
    }
    const added = await Promise.all(
      challenges.map((challenge, i) =>
        browser.request("POST", "/api/auth/passkeys", {
          name: `Racing ${i}`,
          response: noneAttestationRegistration(challenge, BASE, randomBytes(16)),
        }),
      ),
    );
    expect(added.map((a) => a.statusCode).sort()).toEqual([201, 402]);
    expect(added.find((a) => a.statusCode === 402)?.json().error.code).toBe("plan_limit");
    expect((await browser.request("GET", "/api/auth/passkeys")).json().passkeys).toHaveLength(MAX_PASSKEYS);
  });
});
