// The key files the README's deploy steps make (the KEK keyring, the ticket, OAuth, audit and push
// signing keys, the proxies' sealing keyring, the inter-tier mTLS keys) land only where git ignores
// them: a folder of the checkout that git does not ignore would go into the next `git add -A`.
// Every folder given to make-keys.ts or make-certs.sh and every file a `--from-file` reads is
// checked with git's own rules (`git check-ignore --no-index`, which needs no such file).
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const ROOT = new URL("../", import.meta.url).pathname;
const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");

/** The paths the README writes key files to or reads them from (placeholders such as DIR left out). */
function keyPaths(): string[] {
  const paths = [
    ...[...readme.matchAll(/make-keys\.ts\s+([^\s`]+)/g)].map((m) => `${m[1]}/control-plane/kek.json`),
    ...[...readme.matchAll(/make-certs\.sh\s+([^\s`]+)/g)].map((m) => `${m[1]}/egress-key.pem`),
    ...[...readme.matchAll(/--from-file=(?:[\w.-]+=)?([^\s`\\]+)/g)].map((m) => m[1]!),
  ];
  return paths.filter((p) => !/^[A-Z_]+(\/|$)/.test(p));
}

/** Whether git's ignore rules (the repository's .gitignore files) cover `path`. */
function isIgnored(path: string): boolean {
  const result = spawnSync("git", ["check-ignore", "--no-index", "-q", path], { cwd: ROOT });
  if (result.status !== 0 && result.status !== 1) {
    throw new Error(`git check-ignore failed: ${result.stderr?.toString() ?? result.error?.message}`);
  }
  return result.status === 0;
}

describe("the README's key files", () => {
  it("names the folders it makes keys in and the files it reads them from", () => {
    const paths = keyPaths();
    expect(paths.some((p) => p.endsWith("kek.json"))).toBe(true);
    expect(paths.some((p) => p.endsWith("sealing-keys.json"))).toBe(true);
    expect(paths.some((p) => p.endsWith("egress-key.pem"))).toBe(true);
  });

  it("makes and reads them only where git ignores them", () => {
    const exposed = keyPaths().filter((p) => !isIgnored(p));
    expect(exposed).toEqual([]);
  });
});
