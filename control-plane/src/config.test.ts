// BASE_URL as every check reads it: an https deployment written with capitals in its scheme or
// host must still set __Host- Secure cookies and match its own Origin.
import { expect, it } from "vitest";
import { loadConfig } from "./config.ts";

it("writes BASE_URL's scheme and host as the URL standard does, without a trailing slash", () => {
  expect(loadConfig({ BASE_URL: "HTTPS://Latch.Example.com/" }).BASE_URL).toBe("https://latch.example.com");
  expect(loadConfig({ BASE_URL: "https://latch.example.com:443" }).BASE_URL).toBe(
    "https://latch.example.com",
  );
  expect(loadConfig({ BASE_URL: "http://localhost:8787//" }).BASE_URL).toBe("http://localhost:8787");
  expect(loadConfig({}).BASE_URL).toBe("http://localhost:8787");
  expect(() => loadConfig({ BASE_URL: "ftp://latch.example.com" })).toThrow(/BASE_URL/);
});

/** The control plane's mTLS client files, only named: the configuration does not read them. */
const mtls = {
  EGRESS_CLIENT_TLS_CA: "/etc/latch/mtls/ca.crt",
  EGRESS_CLIENT_TLS_CERT: "/etc/latch/mtls/tls.crt",
  EGRESS_CLIENT_TLS_KEY: "/etc/latch/mtls/tls.key",
};

it("refuses, in production, to start a proxy of its own or to turn certificate checks off", () => {
  const production = { NODE_ENV: "production", SMTP_URL: "smtp://127.0.0.1:2525", ...mtls };
  expect(() => loadConfig(production)).toThrow(
    "Latch cannot start: the egress proxy runs as its own process in production; set EGRESS_URL.",
  );
  const withProxy = { ...production, EGRESS_URL: "127.0.0.1:50051" };
  expect(loadConfig(withProxy).EGRESS_URL).toBe("127.0.0.1:50051");
  for (const value of ["0", "", "false"]) {
    expect(() => loadConfig({ ...withProxy, NODE_TLS_REJECT_UNAUTHORIZED: value }), value).toThrow(
      "Latch cannot start: NODE_TLS_REJECT_UNAUTHORIZED other than 1 turns certificate checks off and is refused when NODE_ENV=production.",
    );
  }
  expect(loadConfig({ ...withProxy, NODE_TLS_REJECT_UNAUTHORIZED: "1" }).NODE_ENV).toBe("production");
  // A laptop starts its proxy alongside, whatever it does with its own TLS.
  expect(
    loadConfig({ NODE_ENV: "development", NODE_TLS_REJECT_UNAUTHORIZED: "0" }).EGRESS_URL,
  ).toBeUndefined();
});

// DECISIONS: the gRPC link uses mTLS in deployments; plaintext only on loopback in development and
// tests. A production control plane reaches its proxies over mTLS only, wherever EGRESS_URL points.
it("refuses, in production, to reach the egress proxy without mTLS, on loopback too", () => {
  const production = { NODE_ENV: "production", SMTP_URL: "smtp://127.0.0.1:2525" };
  const refused =
    "Latch cannot start: EGRESS_CLIENT_TLS_CA, EGRESS_CLIENT_TLS_CERT and EGRESS_CLIENT_TLS_KEY must be set when NODE_ENV=production: the control plane reaches the egress proxy over mTLS only, on loopback too.";
  for (const url of ["127.0.0.1:50051", "localhost:50051", "[::1]:50051", "egress.latch.svc:50051"]) {
    expect(() => loadConfig({ ...production, EGRESS_URL: url }), url).toThrow(refused);
  }
  // One file missing is no mTLS either, and the sentence names no path.
  const { EGRESS_CLIENT_TLS_KEY: _, ...partial } = mtls;
  expect(() => loadConfig({ ...production, EGRESS_URL: "127.0.0.1:50051", ...partial })).toThrow(refused);
  expect(loadConfig({ ...production, EGRESS_URL: "127.0.0.1:50051", ...mtls }).EGRESS_CLIENT_TLS_CA).toBe(
    mtls.EGRESS_CLIENT_TLS_CA,
  );
  expect(loadConfig({ ...production, EGRESS_URL: "egress.latch.svc:50051", ...mtls }).NODE_ENV).toBe(
    "production",
  );
});

it("keeps plaintext on loopback for development and tests, and mTLS off it", () => {
  for (const NODE_ENV of ["development", "test"]) {
    expect(loadConfig({ NODE_ENV, EGRESS_URL: "127.0.0.1:50051" }).EGRESS_URL, NODE_ENV).toBe(
      "127.0.0.1:50051",
    );
    expect(() => loadConfig({ NODE_ENV, EGRESS_URL: "egress.latch.svc:50051" }), NODE_ENV).toThrow(
      "Latch cannot start: EGRESS_URL off loopback is reached over mTLS only, so EGRESS_CLIENT_TLS_CA, EGRESS_CLIENT_TLS_CERT and EGRESS_CLIENT_TLS_KEY must be set.",
    );
    expect(() => loadConfig({ NODE_ENV, EGRESS_CLIENT_TLS_CA: mtls.EGRESS_CLIENT_TLS_CA }), NODE_ENV).toThrow(
      "Latch cannot start: EGRESS_CLIENT_TLS_CA, EGRESS_CLIENT_TLS_CERT and EGRESS_CLIENT_TLS_KEY must be set together.",
    );
  }
});
