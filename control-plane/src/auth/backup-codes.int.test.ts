// New backup codes (spec 4.3 POST /api/auth/backup-codes/regenerate) for an account whose second
// factor is a passkey alone: it has no authenticator code to give, so the passkey step-up of the
// last 5 minutes is the proof (totp.service.ts regenerateBackupCodes). An account with an
// authenticator app still gives a current code, passkey or not. The passkey here is a real key pair
// stored as a registration stores it, and each step-up a real assertion signed with it.
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { newId } from "@latch/shared/ids";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  Browser,
  type HostedHarness,
  signInWithEmailCode,
  signUpOperator,
  startHosted,
} from "../../test/hosted.ts";
import { signAssertion } from "../../test/webauthn.ts";
import { createPasskeysRepo } from "./passkeys.repo.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
}, 60_000);
afterAll(async () => {
  await h?.close();
});

const MINUTE = 60_000;
const BASE = "http://localhost:8787";

/** A passkey key pair stored on the browser's account; answers what signs with it. */
async function addPasskey(browser: Browser) {
  const operatorId = (await browser.request("GET", "/api/orgs/members")).json().members[0].operator_id;
  const { publicKey, privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const jwk = publicKey.export({ format: "jwk" });
  // The COSE_Key of an ES256 key (RFC 9053): {1: 2 (EC2), 3: -7 (ES256), -1: 1 (P-256), -2: x, -3: y}.
  const cose = Buffer.concat([
    Buffer.from([0xa5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21, 0x58, 0x20]),
    Buffer.from(jwk.x!, "base64url"),
    Buffer.from([0x22, 0x58, 0x20]),
    Buffer.from(jwk.y!, "base64url"),
  ]);
  const credentialId = randomBytes(32).toString("base64url");
  await createPasskeysRepo(h.plane.database.db).insertPasskey({
    id: newId("pky"),
    operatorId,
    credentialId,
    publicKey: cose,
    signCount: 0,
    transports: ["internal"],
    deviceType: "singleDevice",
    backedUp: false,
    aaguid: null,
    name: "Laptop",
    createdAt: h.clock.now,
  });
  return {
    credentialId,
    isResidentCredential: true,
    rpId: "localhost",
    privateKey: privateKey.export({ format: "der", type: "pkcs8" }).toString("base64"),
    signCount: 0,
  };
}

/** A passkey step-up of `browser`'s ready session: a fresh assertion through the real routes. */
async function stepUpWithPasskey(browser: Browser, credential: Awaited<ReturnType<typeof addPasskey>>) {
  const options = await browser.request("POST", "/api/auth/passkey/options", {});
  expect(options.statusCode, options.body).toBe(200);
  credential.signCount += 1;
  const verified = await browser.request("POST", "/api/auth/passkey/verify", {
    response: signAssertion({
      credential,
      challenge: options.json().challenge,
      rpId: "localhost",
      origin: BASE,
      counter: credential.signCount,
    }),
  });
  expect(verified.statusCode, verified.body).toBe(200);
  expect(verified.json().purpose).toBe("step_up");
}

describe("POST /api/auth/backup-codes/regenerate", () => {
  it("makes new codes for a passkey-only account after a passkey step-up, and not without one", async () => {
    const { browser, email } = await signUpOperator(h, { label: "passkey-only" });
    const passkey = await addPasskey(browser);
    await stepUpWithPasskey(browser, passkey);
    expect((await browser.request("DELETE", "/api/auth/totp")).statusCode).toBe(200);
    expect((await browser.request("GET", "/api/auth/me")).json()).toMatchObject({
      totp_enabled: false,
      passkeys: 1,
    });

    // The step-up is more than 5 minutes old: refused, whatever code the body holds.
    h.clock.advance(6 * MINUTE);
    for (const body of [{}, { code: "123456" }]) {
      const stale = await browser.request("POST", "/api/auth/backup-codes/regenerate", body);
      expect(stale.statusCode, stale.body).toBe(403);
      expect(stale.json().error).toMatchObject({ code: "step_up_required", methods: ["passkey"] });
    }

    // A fresh passkey verification is the proof: no authenticator code is asked for.
    await stepUpWithPasskey(browser, passkey);
    const renewed = await browser.request("POST", "/api/auth/backup-codes/regenerate", {});
    expect(renewed.statusCode, renewed.body).toBe(200);
    const codes = renewed.json().backup_codes as string[];
    expect(codes).toHaveLength(10);
    expect((await browser.request("GET", "/api/auth/me")).json().backup_codes_remaining).toBe(10);

    // And a new code is the way back in on the second step of a sign-in.
    const elsewhere = await signInWithEmailCode(h, new Browser(h.app), email);
    const second = await elsewhere.request("POST", "/api/auth/totp/verify", { code: codes[0] });
    expect(second.statusCode, second.body).toBe(200);
    expect(second.json()).toMatchObject({ used_backup_code: true });
  });

  it("still asks an account with an authenticator app for a current code after its passkey step-up", async () => {
    const { browser, totp } = await signUpOperator(h, { label: "passkey-and-app" });
    const passkey = await addPasskey(browser);
    await stepUpWithPasskey(browser, passkey);
    const missing = await browser.request("POST", "/api/auth/backup-codes/regenerate", {});
    expect(missing.statusCode, missing.body).toBe(401);
    expect(missing.json().error.code).toBe("totp_invalid");
    const wrong = await browser.request("POST", "/api/auth/backup-codes/regenerate", { code: "000000" });
    expect(wrong.json().error.code).toBe("totp_invalid");
    h.clock.advance(31_000);
    const renewed = await browser.request("POST", "/api/auth/backup-codes/regenerate", {
      code: totp.generate({ timestamp: h.clock.now.getTime() }),
    });
    expect(renewed.statusCode, renewed.body).toBe(200);
    expect(renewed.json().backup_codes).toHaveLength(10);
  });
});
