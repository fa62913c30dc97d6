import { describe, expect, it } from "vitest";
import { findPresignParameter } from "./aws-presign.ts";

describe("findPresignParameter", () => {
  it.each([
    ["/?X-Amz-Signature=abc", "X-Amz-Signature"],
    ["/bucket/key?x-amz-credential=AKID%2F20260101", "X-Amz-Credential"],
    ["/?Action=List&X-AMZ-SECURITY-TOKEN=t", "X-Amz-Security-Token"],
    ["/?X%2DAmz%2DSignature=abc", "X-Amz-Signature"],
    ["/?a=1;X-Amz-Signature=abc", "X-Amz-Signature"],
    ["/?X-Amz-Signature[]=abc", "X-Amz-Signature"],
    ["/?X-Amz-Signature%00=abc", "X-Amz-Signature"],
    ["/?X-Amz-Signature", "X-Amz-Signature"],
  ])("finds it in %s", (path, name) => {
    expect(findPresignParameter(path)).toBe(name);
  });

  it.each([
    "/",
    "/?Action=ListQueues&Version=2012-11-05",
    "/X-Amz-Signature/object",
    "/?prefix=X-Amz-Signature",
    "/?X-Amz-Date=20260101T000000Z&X-Amz-SignedHeaders=host",
  ])("finds nothing in %s", (path) => {
    expect(findPresignParameter(path)).toBeUndefined();
  });
});
