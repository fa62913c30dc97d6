// The local variant as a user runs it: real `vault` processes. `vault set` reads the value from
// stdin, `vault mcp` serves the official MCP SDK client over stdio (and spawns its own egress
// proxy), `vault approve` in "another terminal" reaches it, and a canary never shows up in any
// output, log or database file.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningOrigin, startOrigin } from "../../egress-proxy/test/origin.ts";

const VAULT = new URL("../src/cli/vault.ts", import.meta.url).pathname;
const PKI_CA = new URL("../../egress-proxy/test/pki/trusted-ca.pem", import.meta.url).pathname;
const CANARY = "ghp_stdiocanary_9f8e7d6c5b4a3210";

let origin: RunningOrigin;
let env: Record<string, string>;
let dataDir: string;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function vault(args: string[], stdin?: string, ownEnv?: Record<string, string>): Promise<Run> {
  const child = spawn(process.execPath, [VAULT, ...args], {
    env: ownEnv ?? env,
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => {
    stdout += c.toString();
  });
  child.stderr.on("data", (c: Buffer) => {
    stderr += c.toString();
  });
  child.stdin.end(stdin ?? "");
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, stdout, stderr })));
}

/** The official MCP SDK client on `vault mcp` over stdio, and what the process wrote to stderr so far. */
async function stdioAgent(name: string): Promise<{ agent: Client; stderr: () => string }> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [VAULT, "mcp"],
    env,
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (c: Buffer) => {
    stderr += c.toString();
  });
  const agent = new Client({ name, version: "1.0.0" });
  await agent.connect(transport);
  return { agent, stderr: () => stderr };
}

function payloadOf(result: Awaited<ReturnType<Client["callTool"]>>): Record<string, unknown> {
  return JSON.parse((result.content as { text: string }[])[0]!.text) as Record<string, unknown>;
}

const leaks = (text: string) =>
  [CANARY, Buffer.from(CANARY).toString("base64"), CANARY.slice(4, 20)].filter((form) => text.includes(form));

beforeAll(async () => {
  origin = await startOrigin((req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ echoed: req.headers.authorization ?? null }));
  });
  dataDir = join(mkdtempSync(join(tmpdir(), "latch-vault-cli-")), "home", ".latch");
  const { BASE_URL: _vite, DATABASE_URL: _db, ...inherited } = process.env;
  env = {
    ...(inherited as Record<string, string>),
    DATA_DIR: dataDir,
    NODE_ENV: "test",
    LOG_LEVEL: "debug",
    EGRESS_CONNECT_TO: `api.latch.test:443:127.0.0.1:${origin.port}`,
    EGRESS_ALLOW_CIDRS: "127.0.0.1/32",
    EGRESS_EXTRA_CA: PKI_CA,
  };
});

afterAll(async () => {
  await origin.close();
});

describe("the vault CLI and vault mcp", () => {
  const outputs: string[] = [];

  it("refuses a value on the command line, and stores one from stdin", async () => {
    const refused = await vault(["set", "GITHUB_TOKEN", "--host", "api.latch.test", "--value", CANARY]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("never takes the value on the command line");
    expect(leaks(refused.stderr + refused.stdout)).toEqual([]);

    const stored = await vault(["set", "GITHUB_TOKEN", "--host", "api.latch.test"], `${CANARY}\n`);
    outputs.push(stored.stdout, stored.stderr);
    expect(stored.stderr).toContain("Opening the local vault");
    expect(stored.code, stored.stderr).toBe(0);
    expect(stored.stdout).toBe("Stored GITHUB_TOKEN for api.latch.test (inject bearer, ends in 3210).\n");
    expect(statSync(dataDir).mode & 0o777).toBe(0o700);

    const listed = await vault(["list"]);
    outputs.push(listed.stdout, listed.stderr);
    expect(listed.stdout).toMatch(/GITHUB_TOKEN\s+api\.latch\.test\s+bearer\s+3210/);
  }, 60_000);

  it("runs the approval cycle over stdio with the MCP SDK client, approved from another process", async () => {
    const { agent, stderr } = await stdioAgent("stdio-agent");

    const pending = payloadOf(
      await agent.callTool({
        name: "http_request",
        arguments: { method: "GET", path: "/v1/me", item_name: "GITHUB_TOKEN" },
      }),
    );
    expect(pending).toMatchObject({ status: "pending", item_name: "GITHUB_TOKEN" });
    const grantId = pending.grant_id as string;

    const grants = await vault(["grants"]);
    expect(grants.code, grants.stderr).toBe(0);
    expect(grants.stdout).toMatch(
      new RegExp(
        `${grantId}\\s+pending\\s+prompt\\s+GITHUB_TOKEN\\s+stdio-agent\\s+GET https://[a-z.]+/v1/me\\s+no body`,
      ),
    );
    // One request in full: the call and the whole body it would send, and how to approve it.
    const posted = payloadOf(
      await agent.callTool({
        name: "http_request",
        arguments: {
          method: "POST",
          path: "/v1/issues",
          item_name: "GITHUB_TOKEN",
          body: { title: "Release notes", labels: ["docs"] },
        },
      }),
    );
    expect(posted).toMatchObject({ status: "pending" });
    const shown = await vault(["grants", posted.grant_id as string]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(`${posted.grant_id as string}: pending, prompt`);
    expect(shown.stdout).toContain('The agent "stdio-agent" asked to send this request with GITHUB_TOKEN');
    expect(shown.stdout).toMatch(/ {4}POST https:\/\/[a-z.]+\/v1\/issues\n/);
    expect(shown.stdout).toMatch(
      /The body \(JSON, \d+ bytes\), as the agent wrote it:\n {4}\| \{\n {4}\| {3}"title": "Release notes",/,
    );
    expect(shown.stdout).toMatch(/Body SHA-256 [0-9a-f]{64}\n/);
    expect(shown.stdout).toContain(
      `Approve exactly this request: vault approve ${posted.grant_id as string}`,
    );
    const unknown = await vault(["grants", "grt_nothing"]);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toContain("no approval grt_nothing");
    outputs.push(shown.stdout, unknown.stderr);

    const approved = await vault(["approve", grantId]);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toMatch(
      new RegExp(
        `Approved ${grantId}: stdio-agent may use GITHUB_TOKEN for one call: GET https://[a-z.]+/v1/me \\(no body\\)\\.`,
      ),
    );

    const answer = payloadOf(
      await agent.callTool({
        name: "http_request",
        arguments: { method: "GET", path: "/v1/me", item_name: "GITHUB_TOKEN" },
      }),
    );
    expect(answer).toMatchObject({ origin_status: 200, body: '{"echoed":"Bearer [redacted]"}' });
    expect(origin.requests.at(-1)!.headers.authorization).toBe(`Bearer ${CANARY}`);

    const mine = payloadOf(await agent.callTool({ name: "list_grants", arguments: {} }));
    expect(mine.grants).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ grant_id: grantId, status: "consumed" }),
        expect.objectContaining({ grant_id: posted.grant_id, status: "pending" }),
      ]),
    );
    expect(mine.grants).toHaveLength(2);
    await expect(
      agent.callTool({ name: "list_items", arguments: { agent_id: "someone-else" } }),
    ).rejects.toMatchObject({ code: -32602 });

    const audit = await vault(["audit"]);
    expect(audit.stdout).toMatch(/agent:stdio-agent\s+http_request\s+GITHUB_TOKEN\s+api\.latch\.test/);
    outputs.push(grants.stdout, approved.stdout, audit.stdout, JSON.stringify([pending, answer, mine]));
    await agent.close();
    outputs.push(stderr());
    expect(stderr()).toContain("egress proxy listening");
  }, 90_000);

  it("stops on SIGTERM as at the end of its input: the vault, its proxy and the lock closed", async () => {
    const child = spawn(process.execPath, [VAULT, "mcp"], { env, stdio: ["pipe", "pipe", "pipe"] });
    let stderr = "";
    const opened = new Promise<void>((resolve) =>
      child.stderr.on("data", (c: Buffer) => {
        stderr += c.toString();
        if (stderr.includes("local vault open")) resolve();
      }),
    );
    const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
      child.once("close", (code, signal) => resolve({ code, signal })),
    );
    await opened;
    // A value stored through its loopback API starts the egress proxy (it seals to the proxy's key).
    const url = /"url":"(http:\/\/127\.0\.0\.1:\d+)"[^\n]*local vault open/.exec(stderr)?.[1];
    const { operator } = JSON.parse(readFileSync(join(dataDir, "local", "tokens.json"), "utf8")) as {
      operator: string;
    };
    const stored = await fetch(`${url}/api/secrets`, {
      method: "POST",
      headers: { authorization: `Bearer ${operator}`, "content-type": "application/json" },
      body: JSON.stringify({
        name: "SIGTERM_TOKEN",
        value: "not-a-secret-value",
        allowed_hosts: ["api.latch.test"],
      }),
    });
    expect(stored.status).toBe(201);
    await expect.poll(() => stderr.includes("egress proxy listening"), { timeout: 20_000 }).toBe(true);
    const proxyPid = Number(/"pid":(\d+)[^\n]*egress proxy listening/.exec(stderr)?.[1]);
    expect(proxyPid).toBeGreaterThan(0);
    expect(existsSync(join(dataDir, "local", "db.lock"))).toBe(true);
    child.kill("SIGTERM");
    expect(await exited).toEqual({ code: 0, signal: null });
    expect(existsSync(join(dataDir, "local", "db.lock"))).toBe(false);
    const isAlive = () => {
      try {
        process.kill(proxyPid, 0);
        return true;
      } catch {
        return false;
      }
    };
    await expect.poll(isAlive, { timeout: 10_000 }).toBe(false);
    outputs.push(stderr);
  }, 60_000);

  it("vault mcp waits for another vault command that holds the vault, instead of failing to start", async () => {
    // A `vault set` at work holds the lock for a few seconds: here a process that lives 3 s does.
    const holder = spawn("sleep", ["3"], { stdio: "ignore" });
    writeFileSync(join(dataDir, "local", "db.lock"), `${holder.pid}\n`, { mode: 0o600 });
    const { agent, stderr } = await stdioAgent("patient-agent");
    expect((await agent.listTools()).tools.length).toBeGreaterThan(0);
    expect(holder.exitCode ?? holder.signalCode).not.toBeNull();
    expect(stderr()).not.toContain("holds");
    await agent.close();
    outputs.push(stderr());
  }, 60_000);

  it("left the canary nowhere: outputs, logs and the database files", async () => {
    expect(leaks(outputs.join("\n"))).toEqual([]);
    const files: string[] = [];
    const walk = (dir: string) => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else files.push(path);
      }
    };
    walk(dataDir);
    expect(files.some((f) => f.includes("pgdata"))).toBe(true);
    for (const file of files) {
      const bytes = readFileSync(file);
      expect(bytes.includes(Buffer.from(CANARY)), file).toBe(false);
    }
  });
});

// Spec 4.4: `vault set NAME` without --host, as POST /api/secrets without allowed_hosts: stored,
// listed with no host, and the output says the credential is sent nowhere until hosts are added.
describe("vault set without --host", () => {
  const HOSTLESS = "ghp_hostlesscanary_0123456789ab";

  it("stores the credential with no host and says how to add one", async () => {
    const stored = await vault(["set", "LATER_TOKEN"], `${HOSTLESS}\n`);
    expect(stored.code, stored.stderr).toBe(0);
    expect(stored.stdout).toBe(
      "Stored LATER_TOKEN with no allowed host (inject bearer, ends in 89ab): agents cannot use it until you run vault set LATER_TOKEN --host HOST.\n",
    );
    const listed = await vault(["list"]);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(/LATER_TOKEN\s+\(none\)\s+bearer\s+89ab/);
    expect(stored.stdout + stored.stderr + listed.stdout + listed.stderr).not.toContain(HOSTLESS);
  }, 90_000);
});

// Spec 4.4: the local refresh path. `vault set` stores a provider app credential
// (client_credentials, client id as --username) and a refresh token (--inject refresh) that
// `vault serve` and `vault mcp` exchange (control-plane/test/provider-tokens.int.test.ts).
describe("vault set for the local refresh path", () => {
  const APP_SECRET = "spotify_app_secret_canary_4e7a";
  const REFRESH = "spotify_refresh_canary_9c2d";
  const hosts = ["--host", "api.spotify.com", "--host", "accounts.spotify.com"];

  // A name other than <ITEM>_REFRESH with inject refresh is refused (items.int.test.ts).
  it("stores client_credentials with its client id and <ITEM>_REFRESH with inject refresh", async () => {
    const app = await vault(
      ["set", "SPOTIFY", ...hosts, "--inject", "client_credentials", "--username", "spotify-client"],
      `${APP_SECRET}\n`,
    );
    expect(app.code, app.stderr).toBe(0);
    const refresh = await vault(["set", "SPOTIFY_REFRESH", ...hosts, "--inject", "refresh"], `${REFRESH}\n`);
    expect(refresh.code, refresh.stderr).toBe(0);
    const listed = await vault(["list"]);
    expect(listed.stdout).toMatch(/SPOTIFY\s+api\.spotify\.com,accounts\.spotify\.com\s+client_credentials/);
    expect(listed.stdout).toMatch(/SPOTIFY_REFRESH\s+api\.spotify\.com,accounts\.spotify\.com\s+refresh/);
    const all = [app, refresh, listed].map((r) => r.stdout + r.stderr).join("\n");
    expect(all).not.toContain(APP_SECRET);
    expect(all).not.toContain(REFRESH);
  }, 150_000);
});

describe("vault serve's start-up refusals: one sentence and exit code 1", () => {
  /** A user's environment: no test knob (each prints its warning), warnings and worse logged. */
  const userEnv = (dir: string): Record<string, string> => {
    const { EGRESS_CONNECT_TO: _c, EGRESS_ALLOW_CIDRS: _a, EGRESS_EXTRA_CA: _e, ...rest } = env;
    return { ...rest, DATA_DIR: dir, LOG_LEVEL: "warn" };
  };

  it("names the busy port and the --port flag", async () => {
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(0, "127.0.0.1", resolve));
    const port = (squatter.address() as { port: number }).port;
    try {
      const ownDir = join(mkdtempSync(join(tmpdir(), "latch-vault-port-")), ".latch");
      const run = await vault(["serve", "--port", String(port)], undefined, userEnv(ownDir));
      expect(run.code).toBe(1);
      expect(run.stderr).not.toContain("{");
      expect(run.stderr.trim().split("\n")).toEqual([
        `Opening the local vault in ${ownDir} ...`,
        `vault: port ${port} on 127.0.0.1 is already in use by another program; stop that program, or pick another port with vault serve --port N.`,
      ]);
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
    }
  }, 90_000);

  it("says another vault is running on the same data directory", async () => {
    const ownDir = join(mkdtempSync(join(tmpdir(), "latch-vault-twice-")), ".latch");
    const first = spawn(process.execPath, [VAULT, "serve", "--port", "0"], {
      env: userEnv(ownDir),
      stdio: ["ignore", "pipe", "pipe"],
    });
    try {
      let output = "";
      await new Promise<void>((resolve, reject) => {
        first.stdout.on("data", (c: Buffer) => {
          output += c.toString();
          if (output.includes("Latch local vault listening on")) resolve();
        });
        first.once("exit", (code) => reject(new Error(`the first vault exited with ${code}`)));
      });
      const second = await vault(["serve", "--port", "0"], undefined, userEnv(ownDir));
      expect(second.code).toBe(1);
      expect(second.stderr).toBe(
        `vault: another vault (pid ${first.pid}) is already running on ${ownDir}; use that one, stop it, or set DATA_DIR to another directory.\n`,
      );
    } finally {
      const exited = new Promise((resolve) => first.once("exit", resolve));
      first.kill("SIGTERM");
      await exited;
    }
  }, 90_000);

  it("reset-passkeys: a usage line without --email, and an address the service does not know", async () => {
    const usage = await vault(["reset-passkeys"]);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("usage: vault reset-passkeys --email ADDRESS [--even-the-last-factor]");
    // The hosted service's own database (here a new embedded one in its own DATA_DIR).
    const serviceDir = mkdtempSync(join(tmpdir(), "latch-reset-passkeys-"));
    const unknown = await vault(["reset-passkeys", "--email", "Nobody@Example.test"], undefined, {
      ...env,
      DATA_DIR: serviceDir,
    });
    expect(unknown.code, unknown.stderr).toBe(1);
    expect(unknown.stderr).toContain("vault: no account has the address nobody@example.test");
  }, 90_000);
});
