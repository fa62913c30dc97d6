// `npm start` as a newcomer runs it: both tiers come up on the embedded database (or DATABASE_URL
// in the PostgreSQL pass), keys are generated owner-only, /health and /ready answer.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, statSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const MAIN = new URL("../src/main.ts", import.meta.url).pathname;

let child: ChildProcess;
let baseUrl: string;
let dataDir: string;
let output = "";

/** The environment the first process started with (BASE_URL differs from the bind address). */
function startEnv(): NodeJS.ProcessEnv {
  return {
    ...process.env,
    // Vitest sets BASE_URL=/ for Vite; a user's shell does not.
    BASE_URL: "http://localhost:8787",
    DATA_DIR: join(dataDir, "data"),
    PORT: "0",
    EGRESS_PORT: "0",
    NODE_ENV: "development",
  };
}

/** Runs main.ts once more to its exit: its exit code and what it wrote to stderr and stdout. */
function runMain(env: NodeJS.ProcessEnv): Promise<{ code: number | null; stderr: string; stdout: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [MAIN], { env, timeout: 120_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? ((error as { code?: number }).code ?? null) : 0, stderr, stdout });
    });
  });
}

/** A start-up refusal as a person reads it: one sentence on one line, no JSON log entry. */
function expectOneSentence(stderr: string): void {
  expect(stderr.trim().split("\n")).toHaveLength(1);
  expect(stderr).not.toContain("{");
  expect(stderr.trim()).toMatch(/^Latch cannot start: .+\.$/);
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "latch-start-"));
  child = spawn(process.execPath, [MAIN], {
    env: startEnv(),
    stdio: ["ignore", "pipe", "pipe"],
  });
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
    child.once("exit", (code) => reject(new Error(`exited with ${code}:\n${output}`)));
  });
}, 90_000);

afterAll(async () => {
  if (child && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    await exited;
  }
});

describe("npm start", () => {
  it("answers /health with exactly the product and nothing about keys", async () => {
    const response = await fetch(`${baseUrl}/health`);
    expect(response.status).toBe(200);
    expect(await response.text()).toBe('{"ok":true,"product":"Latch"}');
  });

  it("is ready: the database and the egress proxy both answer", async () => {
    const response = await fetch(`${baseUrl}/ready`);
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ ok: true, checks: { database: "ok", egress: "ok" } });
  });

  it("writes every key file owner-only, and the data directory too", () => {
    const root = join(dataDir, "data");
    expect(statSync(root).mode & 0o777).toBe(0o700);
    const keyFiles = [
      join(root, "control-plane", "ticket-signing-key.pem"),
      join(root, "egress", "sealing-keys.json"),
    ];
    for (const file of keyFiles) expect(statSync(file).mode & 0o777, file).toBe(0o600);
    if (!process.env.DATABASE_URL) {
      // PGlite writes its files 0666 whatever the umask; its directory keeps everyone else out.
      expect(statSync(join(root, "pgdata")).mode & 0o777).toBe(0o700);
    }
    // The control plane never holds the proxy's private key.
    expect(readFileSync(keyFiles[1]!, "utf8")).not.toBe("");
    expect(readdirSync(join(root, "control-plane"))).not.toContain("sealing-keys.json");
  });

  it("answers an unknown route with the JSON error envelope", async () => {
    const response = await fetch(`${baseUrl}/nope`);
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({ error: { code: "not_found", message: "no such route" } });
  });
});

describe("the words of start-up", () => {
  it("prints BASE_URL as the address to open, the bind address only beside it", () => {
    expect(output).toContain(
      `Latch is running at http://localhost:8787 (listening on ${baseUrl}; health: http://localhost:8787/health)`,
    );
    expect(output).toContain("Sign up or sign in at http://localhost:8787/sign-up");
  });

  it("refuses a bad setting with one sentence naming it, and exit code 1", async () => {
    const { code, stderr } = await runMain({ ...startEnv(), PORT: "eighty", LOG_LEVEL: "loud" });
    expect(code).toBe(1);
    expectOneSentence(stderr);
    expect(stderr).toContain("PORT must be a port number from 0 to 65535");
    expect(stderr).toContain("LOG_LEVEL must be one of");
  });

  it.skipIf(Boolean(process.env.DATABASE_URL))(
    "refuses a second start on the same data directory with one sentence, and exit code 1",
    async () => {
      const { code, stderr } = await runMain(startEnv());
      expect(code).toBe(1);
      expectOneSentence(stderr);
      expect(stderr).toContain(`another Latch process (pid ${child.pid}) is already running`);
      expect(stderr).toContain("set DATA_DIR to another directory");
    },
  );

  it("names the busy port and the PORT setting when the port is taken, and exits 1", async () => {
    const busyPort = new URL(baseUrl).port;
    const { code, stderr } = await runMain({
      ...startEnv(),
      DATA_DIR: join(dataDir, "second"),
      PORT: busyPort,
      // The proxy child's start-up lines (info) are progress, not part of the refusal.
      LOG_LEVEL: "warn",
    });
    expect(code).toBe(1);
    expectOneSentence(stderr);
    expect(stderr).toContain(`port ${busyPort} on 127.0.0.1 is already in use`);
    expect(stderr).toContain("set PORT to a free port");
  }, 120_000);

  it("refuses a bad egress setting in the proxy's one sentence, naming the variable, and exits 1", async () => {
    const { code, stderr } = await runMain({
      ...startEnv(),
      DATA_DIR: join(dataDir, "fourth"),
      EGRESS_ALLOW_CIDRS: "10.0.0.1/8",
      LOG_LEVEL: "warn",
    });
    expect(code).toBe(1);
    const lines = stderr.trim().split("\n");
    expect(lines, stderr).toHaveLength(1);
    expect(lines[0]).toMatch(/^Latch's egress proxy cannot start: EGRESS_ALLOW_CIDRS: .+\.$/);
    expect(stderr).not.toContain("{");
  }, 120_000);

  it("names the egress proxy's port and EGRESS_PORT when that port is taken, and exits 1", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const busyPort = (taken.address() as { port: number }).port;
    try {
      const { code, stderr } = await runMain({
        ...startEnv(),
        DATA_DIR: join(dataDir, "third"),
        EGRESS_PORT: String(busyPort),
        LOG_LEVEL: "warn",
      });
      expect(code).toBe(1);
      expectOneSentence(stderr);
      expect(stderr).toContain(`port ${busyPort} (the egress proxy's, on 127.0.0.1) is already in use`);
      expect(stderr).toContain("set EGRESS_PORT to a free port");
    } finally {
      taken.close();
    }
  }, 120_000);
});

describe("a control plane killed outright", () => {
  it("takes its egress proxy with it: no proxy holding the opening key outlives it", async () => {
    // Linux lists a process's children here; the spawned proxy is the control plane's one child.
    const children = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, "utf8").trim().split(" ");
    expect(children).toHaveLength(1);
    const proxyPid = Number(children[0]);
    const isAlive = () => {
      try {
        process.kill(proxyPid, 0);
        return true;
      } catch {
        return false;
      }
    };
    expect(isAlive()).toBe(true);
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
    await expect.poll(isAlive, { timeout: 10_000, interval: 100 }).toBe(false);
  }, 30_000);
});
