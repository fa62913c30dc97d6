// EGRESS_CLIENT_IDENTITY: which SAN of the client certificate names the control plane.
import { describe, expect, it } from "vitest";
import { certificateNames, parseClientIdentity } from "./server-tls.ts";

describe("the control plane's identity in a client certificate", () => {
  it("reads a DNS name, a URI (a SPIFFE id), or an explicit kind", () => {
    expect(parseClientIdentity("latch-control-plane")).toEqual({ kind: "DNS", value: "latch-control-plane" });
    expect(parseClientIdentity("spiffe://cluster.local/ns/latch/sa/latch-control-plane")).toEqual({
      kind: "URI",
      value: "spiffe://cluster.local/ns/latch/sa/latch-control-plane",
    });
    expect(parseClientIdentity("uri:urn:latch:control-plane")).toEqual({
      kind: "URI",
      value: "urn:latch:control-plane",
    });
    expect(parseClientIdentity("DNS:cp.latch.svc")).toEqual({ kind: "DNS", value: "cp.latch.svc" });
  });

  it("matches one SAN exactly: no suffix, prefix or kind confusion", () => {
    const dns = parseClientIdentity("latch-control-plane");
    expect(certificateNames("DNS:latch-control-plane", dns)).toBe(true);
    expect(certificateNames("DNS:other, DNS:LATCH-control-plane", dns)).toBe(true);
    expect(certificateNames("DNS:latch-control-plane.evil.test", dns)).toBe(false);
    expect(certificateNames("DNS:evil-latch-control-plane", dns)).toBe(false);
    expect(certificateNames("URI:latch-control-plane", dns)).toBe(false);
    expect(certificateNames("IP Address:127.0.0.1", dns)).toBe(false);
    expect(certificateNames(undefined, dns)).toBe(false);
    const uri = parseClientIdentity("spiffe://latch.test/control-plane");
    expect(certificateNames("DNS:a, URI:spiffe://latch.test/control-plane", uri)).toBe(true);
    expect(certificateNames("URI:spiffe://latch.test/control-plane/x", uri)).toBe(false);
    expect(certificateNames("URI:SPIFFE://latch.test/control-plane", uri)).toBe(false);
  });
});
