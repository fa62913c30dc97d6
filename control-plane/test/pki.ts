// Test fixture: an inter-tier CA that keeps its key (deploy/scripts/make-certs.sh deletes it on
// purpose), so a test can renew a certificate in place, as cert-manager does, and issue one to
// another identity of the same CA. openssl, as CI installs it.
import { execFileSync } from "node:child_process";
import { mkdtempSync, renameSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface TestPki {
  dir: string;
  caPath: string;
  /**
   * Writes `name.pem` and `name-key.pem` for these SANs (`DNS:x`, `URI:y`, `IP:z`), replacing any
   * earlier pair atomically (a rename, as a Kubernetes Secret volume swaps its files). Answers the
   * certificate's serial, in the uppercase hex Node reports.
   */
  issue(name: string, sans: string[], usage: "serverAuth" | "clientAuth"): string;
}

const openssl = (args: string[], cwd: string) =>
  execFileSync("openssl", args, { cwd, stdio: ["ignore", "pipe", "pipe"] }).toString();

export function createTestPki(): TestPki {
  const dir = mkdtempSync(join(tmpdir(), "latch-pki-"));
  openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "ca.key"], dir);
  writeFileSync(
    join(dir, "ca.ext"),
    "basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\n",
  );
  openssl(["req", "-new", "-key", "ca.key", "-subj", "/CN=Latch test inter-tier CA", "-out", "ca.csr"], dir);
  openssl(
    [
      "x509",
      "-req",
      "-in",
      "ca.csr",
      "-signkey",
      "ca.key",
      "-days",
      "2",
      "-sha256",
      "-extfile",
      "ca.ext",
      "-out",
      "ca.pem",
    ],
    dir,
  );
  let serial = 0;
  return {
    dir,
    caPath: join(dir, "ca.pem"),
    issue(name, sans, usage) {
      const n = ++serial;
      // An even number of hex digits, with no leading zero: the way Node prints a serial.
      const hex =
        `1${Date.now().toString(16).padStart(12, "0")}${n.toString(16).padStart(3, "0")}`.toUpperCase();
      writeFileSync(
        join(dir, `${name}.${n}.ext`),
        `basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=${usage}\nsubjectAltName=${sans.join(",")}\n`,
      );
      openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", `${name}.${n}.raw`], dir);
      openssl(["pkcs8", "-topk8", "-nocrypt", "-in", `${name}.${n}.raw`, "-out", `${name}.${n}.key`], dir);
      openssl(
        ["req", "-new", "-key", `${name}.${n}.key`, "-subj", `/CN=${name}`, "-out", `${name}.${n}.csr`],
        dir,
      );
      openssl(
        [
          "x509",
          "-req",
          "-in",
          `${name}.${n}.csr`,
          "-CA",
          "ca.pem",
          "-CAkey",
          "ca.key",
          "-set_serial",
          `0x${hex}`,
          "-days",
          "2",
          "-sha256",
          "-extfile",
          `${name}.${n}.ext`,
          "-out",
          `${name}.${n}.pem`,
        ],
        dir,
      );
      // Key first, then certificate: a reader between the two renames sees a pair that does not
      // match at worst for one refresh, never a half-written file.
      renameSync(join(dir, `${name}.${n}.key`), join(dir, `${name}-key.pem`));
      renameSync(join(dir, `${name}.${n}.pem`), join(dir, `${name}.pem`));
      return hex;
    },
  };
}
