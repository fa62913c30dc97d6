// In production the proxy refuses Node's own ways around the ban on EGRESS_EXTRA_CA: a setting
// that turns certificate checks off, adds CAs, swaps the trust store or OpenSSL's configuration,
// or weakens TLS. Outside production they are left to the developer.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { EgressConfigError, loadEgressConfig, readTrustedTicketKeysText } from "./config.ts";

/** The listener's mTLS files, only named: the configuration does not read them. */
const mtls = {
  EGRESS_TLS_CERT: "/etc/latch/mtls/tls.crt",
  EGRESS_TLS_KEY: "/etc/latch/mtls/tls.key",
  EGRESS_TLS_CLIENT_CA: "/etc/latch/mtls/ca.crt",
};
const production = { NODE_ENV: "production", ...mtls };

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

// DECISIONS: the gRPC link uses mTLS in deployments; plaintext only on loopback in development and
// tests. A production proxy takes no plaintext call, even on loopback.
describe("the gRPC listener's mTLS", () => {
  const REFUSED =
    "Latch's egress proxy cannot start: EGRESS_TLS_CERT, EGRESS_TLS_KEY and EGRESS_TLS_CLIENT_CA must be set when NODE_ENV=production: the gRPC listener takes calls over mTLS only, on loopback too.";

  it("refuses, in production, a listener without mTLS, on loopback too, naming the three variables", () => {
    expect(verdict({ NODE_ENV: "production" })).toBe(REFUSED);
    for (const listen of ["127.0.0.1:50051", "[::1]:50051", "localhost:0", "0.0.0.0:50051"]) {
      expect(verdict({ NODE_ENV: "production", EGRESS_LISTEN: listen }), listen).toBe(REFUSED);
    }
    // One file missing is no mTLS either; the sentence names no path.
    const partial = verdict({
      NODE_ENV: "production",
      EGRESS_TLS_CERT: mtls.EGRESS_TLS_CERT,
      EGRESS_TLS_KEY: mtls.EGRESS_TLS_KEY,
    });
    expect(partial).toBe(REFUSED);
    expect(partial).not.toContain("/etc/latch");
    expect(verdict(production)).toBe("started");
    expect(verdict({ ...production, EGRESS_LISTEN: "0.0.0.0:50051" })).toBe("started");
  });

  it("refuses, in production, the mark of a proxy its control plane spawned", () => {
    // The mark exempts a proxy from the restart replay check (ticket_predates_proxy); a production
    // control plane never spawns one, so set there it could only switch that check off.
    expect(verdict({ ...production, LATCH_EGRESS_SPAWNED: "1" })).toBe(
      "Latch's egress proxy cannot start: LATCH_EGRESS_SPAWNED: only a control plane that starts its own proxy sets it, and none does when NODE_ENV=production.",
    );
    expect(verdict({ ...production, LATCH_EGRESS_SPAWNED: "0" })).toBe("started");
    expect(verdict({ NODE_ENV: "development", LATCH_EGRESS_SPAWNED: "1" })).toBe("started");
  });

  it("keeps plaintext on loopback for development and tests, and mTLS off it", () => {
    for (const NODE_ENV of ["development", "test"]) {
      expect(verdict({ NODE_ENV }), NODE_ENV).toBe("started");
      expect(verdict({ NODE_ENV, EGRESS_LISTEN: "[::1]:50051" }), NODE_ENV).toBe("started");
      expect(verdict({ NODE_ENV, EGRESS_LISTEN: "0.0.0.0:50051" }), NODE_ENV).toBe(
        "Latch's egress proxy cannot start: EGRESS_LISTEN: a non-loopback listener needs mTLS (EGRESS_TLS_CERT, EGRESS_TLS_KEY, EGRESS_TLS_CLIENT_CA).",
      );
      expect(verdict({ NODE_ENV, EGRESS_LISTEN: "0.0.0.0:50051", ...mtls }), NODE_ENV).toBe("started");
    }
  });

  // Plaintext with the client identity check keyed on the certificate alone refused every call.
  it("refuses, outside production too, some of the mTLS files without the others, naming what is missing", () => {
    for (const NODE_ENV of ["development", "test"]) {
      const certOnly = verdict({ NODE_ENV, EGRESS_TLS_CERT: mtls.EGRESS_TLS_CERT });
      expect(certOnly, NODE_ENV).toBe(
        "Latch's egress proxy cannot start: EGRESS_TLS_KEY, EGRESS_TLS_CLIENT_CA: mTLS needs EGRESS_TLS_CERT, EGRESS_TLS_KEY and EGRESS_TLS_CLIENT_CA together, and only EGRESS_TLS_CERT is set; set the others, or unset it for plaintext on loopback.",
      );
      expect(certOnly).not.toContain("/etc/latch");
      expect(
        verdict({
          NODE_ENV,
          EGRESS_TLS_KEY: mtls.EGRESS_TLS_KEY,
          EGRESS_TLS_CLIENT_CA: mtls.EGRESS_TLS_CLIENT_CA,
        }),
        NODE_ENV,
      ).toBe(
        "Latch's egress proxy cannot start: EGRESS_TLS_CERT: mTLS needs EGRESS_TLS_CERT, EGRESS_TLS_KEY and EGRESS_TLS_CLIENT_CA together, and only EGRESS_TLS_KEY, EGRESS_TLS_CLIENT_CA are set; set the others, or unset them for plaintext on loopback.",
      );
      // A blank value counts as unset, as everywhere in this configuration.
      expect(verdict({ NODE_ENV, ...mtls, EGRESS_TLS_KEY: " " }), NODE_ENV).toMatch(
        /^[^/]*EGRESS_TLS_KEY: mTLS needs/,
      );
      expect(verdict({ NODE_ENV, ...mtls }), NODE_ENV).toBe("started");
    }
  });
});

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

// Each tier holds only its own keys: a production proxy refuses a DATA_DIR from which it can read
// the control plane's private keys (shared with the control plane), and still reads the public
// ticket keys the control plane wrote there otherwise.
describe("the control plane's keys in the proxy's DATA_DIR", () => {
  const PUBLIC_KEYS = "k1=AAAA";
  const made: string[] = [];
  afterAll(() => {
    for (const dir of made) rmSync(dir, { recursive: true, force: true });
  });

  /** A DATA_DIR holding these files (paths relative to it), the public ticket keys always. */
  function dataDirWith(...files: string[]): string {
    const dir = mkdtempSync(join(tmpdir(), "latch-egress-data-"));
    made.push(dir);
    for (const file of ["control-plane/ticket-public-keys.txt", ...files]) {
      mkdirSync(dirname(join(dir, file)), { recursive: true });
      writeFileSync(join(dir, file), file.endsWith(".txt") ? PUBLIC_KEYS : "private", { mode: 0o600 });
    }
    return dir;
  }

  /** The ticket keys read at start, or the sentence the start is refused with. */
  function keysOrRefusal(env: NodeJS.ProcessEnv): string {
    try {
      return readTrustedTicketKeysText(loadEgressConfig(env, []));
    } catch (error) {
      if (!(error instanceof EgressConfigError)) throw error;
      return error.message;
    }
  }

  it("refuses, in production, a DATA_DIR where it can read the control plane's private keys", () => {
    const dataDir = dataDirWith("control-plane/ticket-signing-key.pem", "control-plane/kek.json");
    const refused = keysOrRefusal({ ...production, DATA_DIR: dataDir });
    expect(refused).toBe(
      "Latch's egress proxy cannot start: DATA_DIR holds the control plane's private keys (control-plane/ticket-signing-key.pem, control-plane/kek.json) and this process can read them, but the egress proxy never holds the control plane's keys; give the proxy a DATA_DIR of its own and the ticket keys through EGRESS_TICKET_PUBLIC_KEYS.",
    );
    expect(refused).not.toContain(dataDir);
    // Given the public keys another way, the shared directory is refused all the same.
    expect(keysOrRefusal({ ...production, DATA_DIR: dataDir, EGRESS_TICKET_PUBLIC_KEYS: "k2=BBBB" })).toBe(
      refused,
    );
    for (const file of ["oauth/jwks.json", "audit/signing-keys.json", "push/vapid.json"]) {
      expect(keysOrRefusal({ ...production, DATA_DIR: dataDirWith(file) }), file).toContain(
        `DATA_DIR holds the control plane's private keys (${file})`,
      );
    }
  });

  it("reads the public ticket keys from a DATA_DIR without them, and leaves development alone", () => {
    expect(keysOrRefusal({ ...production, DATA_DIR: dataDirWith() })).toBe(PUBLIC_KEYS);
    const shared = dataDirWith("control-plane/ticket-signing-key.pem");
    expect(keysOrRefusal({ NODE_ENV: "development", DATA_DIR: shared })).toBe(PUBLIC_KEYS);
  });
});
