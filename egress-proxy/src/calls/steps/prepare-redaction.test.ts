import { describe, expect, it } from "vitest";
import { addedHeaderValues } from "./prepare-redaction.ts";

const secrets = (values: { secret: string }[]) => values.map((v) => v.secret);

describe("addedHeaderValues (issue 21 item 4)", () => {
  it("lists what the proxy added, with each hex digest inside it, and leaves the caller's own", () => {
    const caller = [
      { name: "x-agent", value: "chosen-by-the-agent" },
      { name: "content-type", value: "application/json" },
    ];
    const digest = "a".repeat(64);
    const sent = [
      ...caller,
      { name: "stripe-signature", value: `t=1795663848,v1=${digest}` },
      { name: "x-slack-request-timestamp", value: "1795663848" },
    ];
    expect(secrets(addedHeaderValues(caller, sent))).toEqual([
      `t=1795663848,v1=${digest}`,
      digest,
      "1795663848",
    ]);
  });

  it("treats a caller header the proxy replaced as added (same name, another value)", () => {
    const caller = [{ name: "Authorization", value: "Bearer agent-chosen" }];
    const sent = [{ name: "authorization", value: "AWS4-HMAC-SHA256 Credential=AKID/x, Signature=abc" }];
    expect(secrets(addedHeaderValues(caller, sent))).toEqual([sent[0]!.value]);
  });

  it("skips values too short to be a credential", () => {
    expect(addedHeaderValues([], [{ name: "x-short", value: "1234567" }])).toEqual([]);
  });
});
