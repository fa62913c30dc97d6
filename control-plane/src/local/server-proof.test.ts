// The proof a local server gives before a `vault` command sends it a bearer (server-proof.ts).
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import {
  answerChallenge,
  askServerProof,
  CHALLENGE_HEADER,
  isProofOf,
  newChallenge,
  newServerProofKey,
  PROOF_HEADER,
} from "./server-proof.ts";

async function serving(
  answer: (challenge: string) => string | undefined,
): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    const proof = answer(String(req.headers[CHALLENGE_HEADER] ?? ""));
    res.writeHead(200, { "content-type": "application/json", ...(proof ? { [PROOF_HEADER]: proof } : {}) });
    res.end('{"ok":true,"product":"Latch"}');
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe("the local server's proof", () => {
  it("is accepted only for its challenge under its key", () => {
    const key = newServerProofKey();
    const challenge = newChallenge();
    const proof = answerChallenge(key, challenge);
    expect(isProofOf(key, challenge, proof)).toBe(true);
    expect(isProofOf(key, newChallenge(), proof)).toBe(false);
    expect(isProofOf(newServerProofKey(), challenge, proof)).toBe(false);
    expect(isProofOf(key, challenge, null)).toBe(false);
    expect(isProofOf(key, challenge, `${proof}x`)).toBe(false);
  });

  it("tells a server with the key from one without it, and from nothing listening", async () => {
    const key = newServerProofKey();
    const real = await serving((challenge) => answerChallenge(key, challenge));
    const other = await serving((challenge) => answerChallenge(newServerProofKey(), challenge));
    const replaying = await serving(() => answerChallenge(key, newChallenge()));
    try {
      expect(await askServerProof(real.url, key)).toBe("proven");
      expect(await askServerProof(other.url, key)).toBe("unproven");
      expect(await askServerProof(replaying.url, key)).toBe("unproven");
    } finally {
      await Promise.all([real.close(), other.close(), replaying.close()]);
    }
    expect(await askServerProof(real.url, key)).toBe("unreachable");
  });
});
