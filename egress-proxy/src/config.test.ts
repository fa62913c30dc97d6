// In production the proxy refuses Node's own ways around the ban on EGRESS_EXTRA_CA: a setting
// that turns certificate checks off, adds CAs, swaps the trust store or OpenSSL's configuration,
// or weakens TLS. Outside production they are left to the developer.
import { describe, expect, it } from "vitest";
import { EgressConfigError, loadEgressConfig } from "./config.ts";

const production = { NODE_ENV: "production" };

/** The sentence a start with these settings is refused with, or "started". */
function verdict(env: NodeJS.ProcessEnv, execArgv: readonly string[] = []): string {
  try {
    loadEgressConfig(env, execArgv);
    return "started";
  } catch (error) {
    if (!(error instanceof EgressConfigError)) throw error;
    return error.message;
  }
}

describe("Node's TLS settings in production", () => {
  it("refuses certificate checks turned off, in one sentence naming the variable", () => {
    expect(verdict({ ...production, NODE_TLS_REJECT_UNAUTHORIZED: "0" })).toBe(
      "Latch's egress proxy cannot start: NODE_TLS_REJECT_UNAUTHORIZED (other than 1): Node settings that change which origins' certificates are trusted are refused when NODE_ENV=production, as EGRESS_EXTRA_CA is.",
    );
    for (const value of ["", "false", "no"]) {
      expect(verdict({ ...production, NODE_TLS_REJECT_UNAUTHORIZED: value }), value).toMatch(
        /NODE_TLS_REJECT_UNAUTHORIZED/,
      );
    }
    expect(verdict({ ...production, NODE_TLS_REJECT_UNAUTHORIZED: "1" })).toBe("started");
  });

  it("refuses extra CAs and an OpenSSL configuration, never echoing the path", () => {
    const refused = verdict({ ...production, NODE_EXTRA_CA_CERTS: "/secret/origin-ca.pem" });
    expect(refused).toMatch(/NODE_EXTRA_CA_CERTS: Node settings/);
    expect(refused).not.toContain("/secret");
    expect(verdict({ ...production, OPENSSL_CONF: "/etc/ssl/weak.cnf" })).toMatch(/OPENSSL_CONF/);
    // --use-system-ca by its environment name, which also reads SSL_CERT_FILE.
    expect(verdict({ ...production, NODE_USE_SYSTEM_CA: "1" })).toMatch(/NODE_USE_SYSTEM_CA: Node settings/);
    expect(verdict({ ...production, NODE_USE_SYSTEM_CA: "0" })).toBe("started");
  });

  it("refuses NODE_OPTIONS that swap the trust store or weaken TLS, and allows the bundled CAs", () => {
    const cases: [string, string][] = [
      ["--use-openssl-ca", "--use-openssl-ca"],
      ["--use-system-ca", "--use-system-ca"],
      ["--use_openssl_ca", "--use-openssl-ca"],
      ["--openssl-config=/etc/ssl/x.cnf", "--openssl-config"],
      ["--openssl-shared-config", "--openssl-shared-config"],
      ["--openssl-legacy-provider", "--openssl-legacy-provider"],
      ["--tls-min-v1.0", "--tls-min-v1.0"],
      ["--tls-max-v1.2", "--tls-max-v1.2"],
      ["--tls-cipher-list=NULL", "--tls-cipher-list"],
      ["--max-old-space-size=512 --tls-keylog=/tmp/keys.log", "--tls-keylog"],
    ];
    for (const [options, named] of cases) {
      const refused = verdict({ ...production, NODE_OPTIONS: options });
      expect(refused, options).toContain(`NODE_OPTIONS ${named}:`);
      expect(refused, options).not.toMatch(/\/etc|\/tmp|NULL/);
    }
    for (const fine of ["--use-bundled-ca", "--max-old-space-size=512", "--enable-source-maps", ""]) {
      expect(verdict({ ...production, NODE_OPTIONS: fine }), fine).toBe("started");
    }
  });

  it("refuses the same flags given to node on its command line", () => {
    expect(verdict(production, ["--use-system-ca"])).toMatch(/the node flag --use-system-ca:/);
    expect(verdict(production, ["--enable-source-maps"])).toBe("started");
  });

  it("names every override at once, with the development knobs", () => {
    const refused = verdict({
      ...production,
      EGRESS_EXTRA_CA: "/ca.pem",
      NODE_TLS_REJECT_UNAUTHORIZED: "0",
      NODE_EXTRA_CA_CERTS: "/ca.pem",
      NODE_OPTIONS: "--use-openssl-ca",
    });
    expect(refused).toContain("EGRESS_EXTRA_CA: development/test knobs are refused");
    expect(refused).toContain(
      "NODE_TLS_REJECT_UNAUTHORIZED (other than 1), NODE_EXTRA_CA_CERTS, NODE_OPTIONS --use-openssl-ca:",
    );
  });

  it("leaves them to the developer outside production", () => {
    expect(
      verdict({ NODE_ENV: "test", NODE_TLS_REJECT_UNAUTHORIZED: "0", NODE_EXTRA_CA_CERTS: "/ca.pem" }, [
        "--use-system-ca",
      ]),
    ).toBe("started");
  });
});
