// WebAuthn for the passkey tests: Chromium's DevTools virtual authenticator (CDP WebAuthn domain,
// through playwright-core's CDP session), and assertions signed in the test with a key that
// authenticator holds, so that what no honest browser would send (another RP's answer, a counter
// gone backwards, a replay) can be sent on purpose.
import {
  createHash,
  createPrivateKey,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
  sign,
} from "node:crypto";
import type { CDPSession, Page } from "playwright-core";

export interface VirtualAuthenticator {
  cdp: CDPSession;
  authenticatorId: string;
  /** The credentials it holds, as CDP reports them (standard base64). */
  credentials(): Promise<CdpCredential[]>;
  /** Moves a credential's signature counter (after a test signed answers with its key itself). */
  setSignCount(credential: CdpCredential, signCount: number): Promise<void>;
}

export interface CdpCredential {
  credentialId: string;
  isResidentCredential: boolean;
  rpId: string;
  privateKey: string;
  userHandle?: string;
  signCount: number;
}

/**
 * A platform authenticator that verifies its user (as a fingerprint reader would) and answers at
 * once: `WebAuthn.enable`, then `WebAuthn.addVirtualAuthenticator`.
 */
export async function addVirtualAuthenticator(page: Page): Promise<VirtualAuthenticator> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("WebAuthn.enable", { enableUI: false });
  const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
    options: {
      protocol: "ctap2",
      transport: "internal",
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  });
  return {
    cdp,
    authenticatorId,
    async credentials() {
      const answer = await cdp.send("WebAuthn.getCredentials", { authenticatorId });
      return answer.credentials as CdpCredential[];
    },
    async setSignCount(credential, signCount) {
      await cdp.send("WebAuthn.removeCredential", { authenticatorId, credentialId: credential.credentialId });
      await cdp.send("WebAuthn.addCredential", { authenticatorId, credential: { ...credential, signCount } });
    },
  };
}

const b64url = (bytes: Buffer | Uint8Array) => Buffer.from(bytes).toString("base64url");
const sha256 = (bytes: Buffer | string) => createHash("sha256").update(bytes).digest();

/**
 * An assertion (AuthenticationResponseJSON) signed with `credential`'s private key: as the
 * authenticator would sign it for `rpId`, with the counter and origin given.
 */
export function signAssertion(options: {
  credential: CdpCredential;
  challenge: string;
  rpId: string;
  origin: string;
  counter: number;
  /** User present and verified unless told otherwise. */
  flags?: number;
}) {
  const { credential } = options;
  const counter = Buffer.alloc(4);
  counter.writeUInt32BE(options.counter);
  const authenticatorData = Buffer.concat([
    sha256(options.rpId),
    Buffer.from([options.flags ?? 0x05]),
    counter,
  ]);
  const clientDataJSON = Buffer.from(
    JSON.stringify({
      type: "webauthn.get",
      challenge: options.challenge,
      origin: options.origin,
      crossOrigin: false,
    }),
  );
  const key = createPrivateKey({
    key: Buffer.from(credential.privateKey, "base64"),
    format: "der",
    type: "pkcs8",
  });
  // ES256 and RS256 sign a SHA-256 digest; EdDSA and ML-DSA-44 (which Chromium's virtual
  // authenticator picks when the RP offers it, as @simplewebauthn/server does first) hash inside.
  const signed = Buffer.concat([authenticatorData, sha256(clientDataJSON)]);
  const digest = key.asymmetricKeyType === "ec" || key.asymmetricKeyType === "rsa" ? "sha256" : null;
  const signature = sign(digest, signed, key);
  const id = b64url(Buffer.from(credential.credentialId, "base64"));
  return {
    id,
    rawId: id,
    type: "public-key",
    response: {
      clientDataJSON: b64url(clientDataJSON),
      authenticatorData: b64url(authenticatorData),
      signature: b64url(signature),
      ...(credential.userHandle ? { userHandle: b64url(Buffer.from(credential.userHandle, "base64")) } : {}),
    },
    clientExtensionResults: {},
    authenticatorAttachment: "platform",
  };
}

/**
 * A registration answer for `challenge` on `origin`, as a platform authenticator makes one (ES256,
 * "none" attestation), built by hand so that a test can make its authenticator data carry
 * `attested` as the credential id while the answer itself names `named` (the same by default).
 */
export function noneAttestationRegistration(
  challenge: string,
  origin: string,
  attested: Buffer = randomBytes(32),
  named: Buffer = attested,
) {
  const { publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  return registrationAnswer(challenge, origin, attested, named, publicKey);
}

/**
 * A new passkey as noneAttestationRegistration makes it, with the key it holds: `response` for
 * POST /api/auth/passkeys, `credential` for signAssertion.
 */
export function noneAttestationPasskey(challenge: string, origin: string) {
  const { publicKey, privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const id = randomBytes(32);
  const credential: CdpCredential = {
    credentialId: id.toString("base64"),
    isResidentCredential: true,
    rpId: new URL(origin).hostname,
    privateKey: privateKey.export({ format: "der", type: "pkcs8" }).toString("base64"),
    signCount: 0,
  };
  return { response: registrationAnswer(challenge, origin, id, id, publicKey), credential };
}

function registrationAnswer(
  challenge: string,
  origin: string,
  attested: Buffer,
  named: Buffer,
  publicKey: KeyObject,
) {
  const jwk = publicKey.export({ format: "jwk" });
  // COSE_Key: kty EC2, alg ES256, crv P-256, x, y.
  const cose = Buffer.concat([
    Buffer.from([0xa5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21, 0x58, 0x20]),
    Buffer.from(jwk.x!, "base64url"),
    Buffer.from([0x22, 0x58, 0x20]),
    Buffer.from(jwk.y!, "base64url"),
  ]);
  const idLength = Buffer.alloc(2);
  idLength.writeUInt16BE(attested.length);
  // rpIdHash, flags (UP, UV, AT), sign count 0, AAGUID 0, the credential id, its key.
  const authData = Buffer.concat([
    sha256(new URL(origin).hostname),
    Buffer.from([0x45]),
    Buffer.alloc(4),
    Buffer.alloc(16),
    idLength,
    attested,
    cose,
  ]);
  const dataLength = Buffer.alloc(4);
  dataLength.writeUInt32BE(authData.length);
  // CBOR {fmt: "none", attStmt: {}, authData: bytes (a 4-byte length, any size)}.
  const attestation = Buffer.concat([
    Buffer.from([0xa3, 0x63]),
    Buffer.from("fmt"),
    Buffer.from([0x64]),
    Buffer.from("none"),
    Buffer.from([0x67]),
    Buffer.from("attStmt"),
    Buffer.from([0xa0]),
    Buffer.from([0x68]),
    Buffer.from("authData"),
    Buffer.from([0x5a]),
    dataLength,
    authData,
  ]);
  const clientData = Buffer.from(
    JSON.stringify({ type: "webauthn.create", challenge, origin, crossOrigin: false }),
  );
  const id = named.toString("base64url");
  return {
    id,
    rawId: id,
    type: "public-key",
    response: {
      clientDataJSON: clientData.toString("base64url"),
      attestationObject: attestation.toString("base64url"),
      transports: ["internal"],
    },
    clientExtensionResults: {},
  };
}
