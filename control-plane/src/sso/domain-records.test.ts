import { describe, expect, it } from "vitest";
import { txtText, verificationRecord } from "./domain-records.ts";

describe("a TXT record's text as a DNS-over-HTTPS JSON API gives it", () => {
  it("joins the quoted strings of a long record, undoes escapes, and takes bare text as it is", () => {
    expect(txtText('"latch-verification=abc"')).toBe("latch-verification=abc");
    expect(txtText('"latch-verification=" "abc"')).toBe("latch-verification=abc");
    expect(txtText('"say \\"hi\\" \\\\ there"')).toBe('say "hi" \\ there');
    expect(txtText("latch-verification=abc")).toBe("latch-verification=abc");
    expect(txtText('""')).toBe("");
  });

  it("names the record under the domain, with the connection's token as its value", () => {
    expect(verificationRecord("example.com", "t0k")).toEqual({
      name: "_latch-verification.example.com",
      value: "latch-verification=t0k",
    });
  });
});
