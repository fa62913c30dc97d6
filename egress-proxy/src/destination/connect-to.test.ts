import { AppError } from "@latch/shared/errors";
import { describe, expect, it } from "vitest";
import { findConnectToRule, parseConnectTo } from "./connect-to.ts";

describe("parseConnectTo", () => {
  it("parses an IPv4 target, a bracketed IPv6 target and an empty (DNS) target", () => {
    expect(
      parseConnectTo(
        "api.latch.test:443:127.0.0.1:8443, V6.latch.test:443:[::1]:9443,dns.latch.test:443::7443",
      ),
    ).toEqual([
      { host: "api.latch.test", port: 443, targetAddress: "127.0.0.1", targetPort: 8443 },
      { host: "v6.latch.test", port: 443, targetAddress: "::1", targetPort: 9443 },
      { host: "dns.latch.test", port: 443, targetAddress: undefined, targetPort: 7443 },
    ]);
  });

  it("keeps port 443 when the target port is empty and skips empty entries", () => {
    expect(parseConnectTo(" ,api.latch.test:443:127.0.0.2:,")).toEqual([
      { host: "api.latch.test", port: 443, targetAddress: "127.0.0.2", targetPort: undefined },
    ]);
  });

  it.each([
    ["api.latch.test:443:127.0.0.1", "expected host:443:ip:port"],
    ["api.latch.test:8443:127.0.0.1:443", "only port 443"],
    ["api.latch.test:443:backend.internal:443", "must be an IP address"],
    ["api.latch.test:443:::1:443", "expected host:443:ip:port"],
    ["api.latch.test:443:[127.0.0.1]:443", "only an IPv6 address goes in brackets"],
    ["api.latch.test:443:127.0.0.1:70000", "is not 1-65535"],
    ["api.latch.test:443:127.0.0.1:0", "is not 1-65535"],
    ["127.0.0.1:443:127.0.0.2:443", "not an IP address"],
    ["bad_host!:443:127.0.0.1:443", "the source must be a hostname"],
    [":443:127.0.0.1:443", "expected host:443:ip:port"],
    ["a.latch.test:443:127.0.0.1:1,a.latch.test:443:127.0.0.1:2", "a second rule for a.latch.test"],
  ])("refuses %s naming the entry", (text, why) => {
    let caught: unknown;
    try {
      parseConnectTo(text);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(AppError);
    expect((caught as AppError).code).toBe("invalid_request");
    expect((caught as AppError).message).toContain(why);
    expect((caught as AppError).message).toContain("EGRESS_CONNECT_TO entry");
  });

  it("finds the rule by host and port only", () => {
    const rules = parseConnectTo("api.latch.test:443:127.0.0.1:8443");
    expect(findConnectToRule(rules, "api.latch.test", 443)?.targetPort).toBe(8443);
    expect(findConnectToRule(rules, "other.latch.test", 443)).toBeUndefined();
    expect(findConnectToRule(rules, "api.latch.test", 80)).toBeUndefined();
  });
});
