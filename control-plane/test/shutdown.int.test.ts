// SIGTERM on the control plane process (a rolling update): it stops listening, finishes the request
// in flight, and exits 0. The process runs as in a container: its key files (made by
// deploy/make-keys.ts) mounted read-only from a secret store, not created in DATA_DIR.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, statSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const MAIN = new URL("../src/main.ts", import.meta.url).pathname;
const MAKE_KEYS = new URL("../../deploy/make-keys.ts", import.meta.url).pathname;

let child: ChildProcess;
let baseUrl: string;
let output = "";
let exited: Promise<number | null>;
let keys: string;
let keysBefore: string[];
let dataRoot: string;
const keyFiles = () => [
  join(keys, "control-plane", "ticket-signing-key.pem"),
  join(keys, "control-plane", "kek.json"),
  join(keys, "oauth", "jwks.json"),
  join(keys, "audit", "signing-keys.json"),
];

beforeAll(async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "latch-shutdown-"));
  keys = join(dataDir, "keys");
  execFileSync(process.execPath, [MAKE_KEYS, keys], { stdio: "ignore" });
  for (const dir of ["control-plane", "oauth", "audit"]) chmodSync(join(keys, dir), 0o500);
  keysBefore = keyFiles().map((file) => readFileSync(file, "utf8"));
  dataRoot = join(dataDir, "data");
  child = spawn(process.execPath, [MAIN], {
    env: {
      ...process.env,
      BASE_URL: "http://localhost:8787",
      DATA_DIR: dataRoot,
      PORT: "0",
      EGRESS_PORT: "0",
      NODE_ENV: "development",
      SHUTDOWN_TIMEOUT_MS: "10000",
      TICKET_SIGNING_KEY_FILE: join(keys, "control-plane", "ticket-signing-key.pem"),
      KEK_KEYRING_FILE: join(keys, "control-plane", "kek.json"),
      OAUTH_JWKS_FILE: join(keys, "oauth", "jwks.json"),
      AUDIT_SIGNING_KEYS_FILE: join(keys, "audit", "signing-keys.json"),
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  exited = new Promise((resolve) => child.once("exit", (code) => resolve(code)));
  child.stderr!.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  baseUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no start within 60 s:\n${output}`)), 60_000);
    child.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      const match = /Latch is running at \S+ \(listening on (http:\/\/[^\s;]+);/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    void exited.then((code) => reject(new Error(`exited with ${code}:\n${output}`)));
  });
}, 90_000);

afterAll(async () => {
  if (child && child.exitCode === null) child.kill("SIGKILL");
});

describe("the control plane with its key files from a secret store", () => {
  it("reads them as they are and creates none of its own in DATA_DIR", () => {
    expect(keyFiles().map((file) => readFileSync(file, "utf8"))).toEqual(keysBefore);
    for (const file of ["ticket-signing-key.pem", "kek.json"]) {
      expect(() => statSync(join(dataRoot, "control-plane", file))).toThrow();
    }
    expect(() => statSync(join(dataRoot, "oauth", "jwks.json"))).toThrow();
    expect(() => statSync(join(dataRoot, "audit", "signing-keys.json"))).toThrow();
    // The public half is still written for a proxy sharing DATA_DIR, from the mounted key.
    expect(readFileSync(join(dataRoot, "control-plane", "ticket-public-keys.txt"), "utf8")).toBe(
      readFileSync(join(keys, "control-plane", "ticket-public-keys.txt"), "utf8"),
    );
  });
});

describe("the control plane on SIGTERM", () => {
  it("finishes a request in flight, refuses new connections, and exits 0", async () => {
    const { hostname, port } = new URL(baseUrl);
    const body = JSON.stringify({ email: "drain@example.com" });
    // A request whose body is still arriving when the signal comes.
    const socket = connect(Number(port), hostname);
    await new Promise((resolve) => socket.once("connect", resolve));
    let answer = "";
    socket.on("data", (chunk: Buffer) => {
      answer += chunk.toString();
    });
    const closed = new Promise((resolve) => socket.once("close", resolve));
    socket.write(
      `POST /api/auth/otp/send HTTP/1.1\r\nHost: localhost:8787\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body.slice(0, 5)}`,
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    child.kill("SIGTERM");
    await new Promise((resolve) => setTimeout(resolve, 500));

    // No new connection is taken any more...
    const refused = await fetch(`${baseUrl}/health`).then(
      () => "answered",
      (error: Error) => String((error.cause as { code?: string })?.code ?? error.message),
    );
    expect(refused).toBe("ECONNREFUSED");
    // ...but the request in flight gets its whole answer.
    socket.write(body.slice(5));
    await closed;
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toContain('{"ok":true}');
    expect(await exited).toBe(0);
    expect(output).toContain("control plane stopped");
  }, 30_000);
});
