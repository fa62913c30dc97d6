// The SigV4 signature covers the request Latch sends: every query pair of the path signed as it
// goes out, and a pair AWS's signer cannot sign refused before anything is sent.
import { AppError } from "@latch/shared/errors";
import { describe, expect, it } from "vitest";
import { signSigV4 } from "./sigv4.ts";

const SCOPE = { service: "sqs", region: "eu-west-1" };
const CREDENTIAL = { username: "AKIDEXAMPLE", secret: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" };

async function canonicalQueryOf(path: string): Promise<string> {
  let canonical = "";
  await signSigV4(
    { method: "GET", host: "sqs.eu-west-1.amazonaws.com", path, headers: [], body: undefined },
    CREDENTIAL,
    SCOPE,
    {
      date: new Date("2026-11-28T00:00:00Z"),
      trace: (step) => {
        canonical = step.canonicalRequest;
      },
    },
  );
  // Method, path, then the canonical query (SigV4 "Create a canonical request").
  return canonical.split("\n")[2] ?? "";
}

async function refusalOf(path: string): Promise<AppError> {
  try {
    await canonicalQueryOf(path);
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error("signed");
}

describe("signSigV4: the query it signs is the query that is sent", () => {
  it.each([
    ["/?Action=ListQueues&constructor=1", "Action=ListQueues&constructor=1"],
    ["/?toString&hasOwnProperty=2", "hasOwnProperty=2&toString="],
    ["/?a=1&a=0", "a=0&a=1"],
  ])("signs every pair of %s", async (path, canonical) => {
    expect(await canonicalQueryOf(path)).toBe(canonical);
  });

  it.each([
    ["/?__proto__=1"],
    ["/?Action=ListQueues&__proto__"],
    ["/?%5F%5Fproto%5F%5F=1"],
    ["/?a=1&__proto__=x&b=2"],
  ])("refuses %s, which the signer would sign as something else", async (path) => {
    const refusal = await refusalOf(path);
    expect(refusal.code).toBe("invalid_path");
    expect(refusal.message).toContain("__proto__");
  });

  it("keeps names that only contain the word", async () => {
    expect(await canonicalQueryOf("/?__proto__x=1&proto=2")).toBe("__proto__x=1&proto=2");
  });
});
