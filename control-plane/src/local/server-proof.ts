// How a `vault` command knows the process at runtime.json's address is the vault that wrote the
// file before it sends that process a bearer. The address alone proves nothing: a `vault serve`
// that died leaves its loopback port free for any local user, and its pid may be reused. So each
// start writes a fresh key into runtime.json (owner-only, DATA_DIR/local is 0700); the command sends
// a random challenge to GET /health and the server answers HMAC-SHA256(key, challenge). Only the
// key's holder can answer, the key never crosses the wire, and a recorded answer is worth nothing
// for the next challenge.
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/** The request header that carries the challenge, and the answer's header. */
export const CHALLENGE_HEADER = "x-latch-challenge";
export const PROOF_HEADER = "x-latch-proof";

/** 32 random bytes, base64url: what a challenge and a key look like. */
const TOKEN_32 = /^[A-Za-z0-9_-]{43}$/;

/** A fresh key for one start of a local server (what runtime.json carries as `proof_key`). */
export function newServerProofKey(): string {
  return randomBytes(32).toString("base64url");
}

/** A fresh challenge, one per proof. */
export function newChallenge(): string {
  return randomBytes(32).toString("base64url");
}

/** Whether `text` has the shape of a key or challenge (the server answers nothing else). */
export function isProofToken(text: string | undefined): text is string {
  return text !== undefined && TOKEN_32.test(text);
}

/** The server's answer to `challenge`; domain-separated so the MAC is good for nothing else. */
export function answerChallenge(key: string, challenge: string): string {
  return createHmac("sha256", Buffer.from(key, "base64url"))
    .update(`latch-local-server-proof-v1\n${challenge}`)
    .digest("base64url");
}

/** Whether `proof` is the answer to `challenge` under `key`, compared in constant time. */
export function isProofOf(key: string, challenge: string, proof: string | null | undefined): boolean {
  if (!proof) return false;
  const expected = Buffer.from(answerChallenge(key, challenge));
  const presented = Buffer.from(proof);
  return presented.length === expected.length && timingSafeEqual(presented, expected);
}

/**
 * Asks the server at `url` to prove it holds `key`, sending nothing but a fresh challenge.
 * "unreachable": nothing answered /health (a server that stopped); "unproven": something answered
 * but not with the proof, so it is not the vault that wrote runtime.json and gets no bearer.
 */
export async function askServerProof(
  url: string,
  key: string,
): Promise<"proven" | "unreachable" | "unproven"> {
  const challenge = newChallenge();
  let response: Response;
  try {
    response = await fetch(`${url}/health`, {
      headers: { [CHALLENGE_HEADER]: challenge },
      redirect: "manual",
      signal: AbortSignal.timeout(2000),
    });
    await response.body?.cancel();
  } catch {
    return "unreachable";
  }
  return isProofOf(key, challenge, response.headers.get(PROOF_HEADER)) ? "proven" : "unproven";
}
