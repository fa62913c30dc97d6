// `vault audit verify FILE [--keys URL|FILE] [--not-before TIME]` checks a ledger export offline (DECISIONS "Ledger and
// telemetry"): every hash recomputed, the links, the seqs, with the published keys every
// checkpoint's signature, and the checkpoint every export ends with over its last row (without it
// the file was cut short or added to; an empty file is no ledger). A checkpoint signed by a retired
// key after its retirement is named as ignored: it vouches for nothing, the next one covers its rows. Exit 0 when the chain holds,
// naming its organisation; 1 printing `first bad seq N` when not. With --not-before (the `at` of the
// newest row the reader knows the ledger holds: every checkpoint covering that row was signed after
// it), a file whose last checkpoint was signed before then is refused: cut back to an hourly
// checkpoint, it would otherwise look whole. Not the export's own time: an export of a ledger with
// no row since its last hourly checkpoint ends with that stored checkpoint.
// Also `vault audit export --output FILE` (written whole, 0600, or not at all) and `vault audit-rotate-keys`.
import { randomBytes } from "node:crypto";
import { createReadStream } from "node:fs";
import { open, readFile, rename, unlink } from "node:fs/promises";
import { isIPv4 } from "node:net";
import { basename, dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import type { LedgerLine } from "@latch/shared/ledger/ledger-format";
import { toSafeText } from "@latch/shared/text/safe-text";
import { auditKeysPath, rotateAuditKeys } from "../audit/audit-keys.ts";
import { type AuditKeysDocument, createLedgerVerifier, verifyingKeys } from "../audit/ledger-verify.ts";
import { loadConfig } from "../config.ts";

/** A keys document is small; anything bigger is not one. */
const MAX_KEYS_BYTES = 1024 * 1024;

export async function runAuditVerify(
  file: string,
  keysSource: string | undefined,
  print: (line: string) => void,
  /**
   * `notBefore`: the time of the newest row the reader knows the ledger holds. A checkpoint covering
   * it was signed after it; a file cut back to an earlier (hourly) checkpoint ends with one signed
   * before, which alone looks whole.
   */
  options: { notBefore?: Date } = {},
): Promise<number> {
  // Sentences quote what the file says (a seq, a key id, a time): its control characters (a
  // terminal's escapes, which could redraw the screen to read "chain holds") never reach the
  // terminal as such.
  const out = (line: string) => print(toSafeText(line));
  const keys = keysSource ? verifyingKeys(await readKeysDocument(keysSource)) : undefined;
  const verifier = createLedgerVerifier({ keys });
  const lines = createInterface({ input: createReadStream(file, { encoding: "utf8" }), crlfDelay: Infinity });
  let lineNumber = 0;
  for await (const text of lines) {
    lineNumber += 1;
    if (text.trim() === "") continue;
    let line: LedgerLine;
    try {
      line = JSON.parse(text) as LedgerLine;
    } catch {
      const seq = verifier.result().last_seq + 1;
      verifier.fail(seq, `line ${lineNumber} is not JSON`);
      continue;
    }
    verifier.push(line);
  }
  verifier.requireClosingCheckpoint();
  const result = verifier.result();
  const organisationId = verifier.organisation();
  // Said whether or not the chain holds: a replica that signed with a retired key is worth a look.
  for (const ignored of result.ignored_checkpoints ?? []) {
    out(`checkpoint of seq ${ignored.seq} ignored (it vouches for nothing): ${ignored.reason}`);
  }
  if (!result.ok) {
    out(`first bad seq ${result.first_bad_seq}`);
    if (result.problem) out(result.problem);
    if (organisationId !== undefined) out(`the file's first line names organisation ${organisationId}`);
    return 1;
  }
  const checkpoint = result.last_checkpoint;
  if (options.notBefore && checkpoint && Date.parse(checkpoint.at) < options.notBefore.getTime()) {
    out(
      `the last checkpoint (seq ${checkpoint.seq}) was signed at ${checkpoint.at}, before --not-before ${options.notBefore.toISOString()}: the file may have been cut back to an earlier checkpoint`,
    );
    return 1;
  }
  out(`chain holds: ${result.rows} rows of organisation ${organisationId}, seq 1 to ${result.last_seq}`);
  if (!keys) {
    out(
      "checkpoint signatures were not checked (no --keys given; pass the service's /.well-known/latch-audit-keys.json URL or a copy of it)",
    );
  } else if (checkpoint) {
    // Always there: requireClosingCheckpoint refused a file whose last row none covers.
    out(
      `checkpoints verified; the last covers seq ${checkpoint.seq}, signed ${checkpoint.at} by key ${checkpoint.key_id}`,
    );
  }
  return 0;
}

async function readKeysDocument(source: string): Promise<AuditKeysDocument> {
  let text: string;
  if (/^https?:\/\//i.test(source)) {
    text = await fetchKeysDocument(source);
  } else {
    text = await readFile(source, "utf8");
  }
  if (text.length > MAX_KEYS_BYTES) throw new Error("--keys: that is not a keys document (too large)");
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error("--keys: that is not a keys document (not JSON)");
  }
  if (!Array.isArray((parsed as AuditKeysDocument)?.keys)) {
    throw new Error("--keys: that is not a keys document (no keys array)");
  }
  return parsed as AuditKeysDocument;
}

/**
 * The keys document decides which checkpoint signatures count: whoever can swap it in makes a
 * forged ledger verify. So it comes over https only (plain http just from this machine's loopback,
 * a test's or a local service's), and a redirect is refused rather than followed: an https URL that
 * answers 30x to an http one would hand the choice of keys to anyone on the path.
 */
async function fetchKeysDocument(source: string): Promise<string> {
  let url: URL;
  try {
    url = new URL(source);
  } catch {
    throw new Error("--keys: that is not a URL");
  }
  if (url.protocol !== "https:" && !isLoopbackHost(url.hostname)) {
    throw new Error(
      `--keys: ${url.origin} is plain http; give the keys document's https URL (http only for 127.0.0.1, ::1 or localhost)`,
    );
  }
  let response: Response;
  try {
    response = await fetch(url, { signal: AbortSignal.timeout(15_000), redirect: "manual" });
  } catch {
    throw new Error(`--keys: ${url.origin} did not answer`);
  }
  if (response.type === "opaqueredirect" || (response.status >= 300 && response.status < 400)) {
    await response.body?.cancel();
    throw new Error(
      `--keys: ${url.origin} answered with a redirect (HTTP ${response.status}), which is not followed; give the keys document's own URL`,
    );
  }
  if (!response.ok) {
    await response.body?.cancel();
    throw new Error(`--keys: ${url.origin} answered ${response.status}`);
  }
  return response.text();
}

/** 127.0.0.0/8, ::1 or localhost: an address that never leaves this machine. */
function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase();
  if (host === "localhost" || host === "[::1]") return true;
  return isIPv4(host) && host.startsWith("127.");
}

/** Lines are gathered up to this many characters per write: a ledger may hold millions of rows. */
const EXPORT_WRITE_CHARS = 64 * 1024;

/**
 * `vault audit export --output FILE`: the export goes to a new file beside FILE, created exclusively
 * with mode 0600 (never through a symlink planted under its name), and is renamed over FILE once
 * every line is on disk. Writing FILE in place would keep an existing file's mode (a 0644 export of
 * the ledger, readable by every user) and follow a symlink at FILE to wherever it points; an export
 * that fails half way would leave half a ledger that `vault audit verify` then calls cut short. The
 * rename replaces FILE itself (a symlink there included, never its target) and leaves FILE as it was
 * until the export is whole.
 */
export async function writeLedgerExport(output: string, lines: AsyncIterable<string>): Promise<void> {
  const temporary = join(dirname(output), `.${basename(output)}.${randomBytes(6).toString("hex")}.tmp`);
  const file = await open(temporary, "wx", 0o600);
  try {
    let pending = "";
    for await (const text of lines) {
      pending += text;
      if (pending.length >= EXPORT_WRITE_CHARS) {
        await file.write(pending);
        pending = "";
      }
    }
    if (pending) await file.write(pending);
    await file.sync();
    await file.close();
    await rename(temporary, output);
  } catch (error) {
    await file.close().catch(() => {});
    await unlink(temporary).catch(() => {});
    throw error;
  }
}

/**
 * `vault audit-rotate-keys [--local]`: a new checkpoint signing key first; the others keep
 * verifying. The hosted service's DATA_DIR (as npm start reads it), or with --local the vault's.
 */
export async function runAuditRotateKeys(
  env: NodeJS.ProcessEnv,
  localDataDir: string | undefined,
  progress: (line: string) => void,
): Promise<number> {
  const config = localDataDir ? undefined : loadConfig(env);
  const dataDir = localDataDir ?? resolve(config!.DATA_DIR);
  const keyFile = config?.AUDIT_SIGNING_KEYS_FILE;
  progress(`rotating the audit checkpoint keys in ${auditKeysPath(dataDir, keyFile)}`);
  const result = await rotateAuditKeys(dataDir, new Date(), keyFile);
  progress(`new signing key ${result.newKeyId}`);
  for (const id of result.retiredKeyIds) {
    progress(`retired (still published, so its checkpoints keep verifying; its private half is gone): ${id}`);
  }
  progress(
    localDataDir
      ? "restart vault serve (or vault mcp) so that it signs with the new key"
      : "a control plane that reads this file signs with the new key at its next checkpoint; roll the ones given a copy of it",
  );
  return 0;
}
