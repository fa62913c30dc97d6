// Whom a `vault` command hands a bearer: only the `vault serve` that wrote runtime.json, proved
// by a MAC of a fresh challenge under the key in that owner-only file (local/server-proof.ts).
// A vault serve that died leaves its loopback port to anyone, and its pid may be reused by a
// process of ours, so pid, lock and port alone are not enough. Real `vault` processes throughout.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VAULT, runVault as vault, vaultEnvironment } from "./vault-process.ts";

describe("a program on the port runtime.json names that is not that vault serve", () => {
  const seen: { path: string; authorization: string | undefined; body: string }[] = [];
  let impostor: Server;
  let dataDir: string;

  beforeAll(async () => {
    // Answers /health as vault serve does (200 {ok, product}) and everything else with 200 {}:
    // all it lacks is the key.
    impostor = createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => {
        body += c.toString();
      });
      req.on("end", () => {
        seen.push({ path: req.url ?? "", authorization: req.headers.authorization, body });
        res.writeHead(200, { "content-type": "application/json", "mcp-session-id": "s1" });
        res.end(req.url === "/health" ? JSON.stringify({ ok: true, product: "Latch" }) : "{}");
      });
    });
    await new Promise<void>((resolve) => impostor.listen(0, "127.0.0.1", resolve));
    dataDir = join(mkdtempSync(join(tmpdir(), "latch-proof-")), ".latch");
    mkdirSync(join(dataDir, "local"), { recursive: true, mode: 0o700 });
    // A file left by a vault serve whose pid now names a live process of ours (this test), which
    // the lock still names: every check but the proof passes.
    writeFileSync(
      join(dataDir, "local", "runtime.json"),
      JSON.stringify({
        pid: process.pid,
        url: `http://127.0.0.1:${(impostor.address() as AddressInfo).port}`,
        proof_key: randomBytes(32).toString("base64url"),
      }),
      { mode: 0o600 },
    );
    writeFileSync(join(dataDir, "local", "db.lock"), `${process.pid}\n`, { mode: 0o600 });
  });
  afterAll(async () => {
    await new Promise((resolve) => impostor.close(resolve));
  });

  it.each([
    ["list", ["list"], ""],
    ["set", ["set", "GITHUB_TOKEN", "--host", "api.github.com"], "ghp_proofcanary_0123456789"],
    [
      "mcp",
      ["mcp"],
      `${JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "a" } } })}\n`,
    ],
  ])(
    "vault %s sends it no bearer and no value, and stops with one sentence",
    async (_name, args, stdin) => {
      seen.length = 0;
      const run = await vault(dataDir, args, stdin);
      expect(seen.map((request) => request.path)).toEqual(["/health"]);
      expect(seen.every((request) => request.authorization === undefined && request.body === "")).toBe(true);
      expect(run.code).toBe(1);
      expect(run.stderr).toContain("could not prove it is the vault serve that wrote");
      expect(run.stderr).toContain("nothing was sent to it");
    },
    60_000,
  );
});

describe("the real vault serve proves itself to every command that goes through it", () => {
  let dataDir: string;
  let serve: ReturnType<typeof spawn>;

  beforeAll(async () => {
    dataDir = join(mkdtempSync(join(tmpdir(), "latch-proof-serve-")), ".latch");
    serve = spawn(process.execPath, [VAULT, "serve", "--port", "0"], {
      env: vaultEnvironment(dataDir),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    await new Promise<void>((resolve, reject) => {
      serve.stdout?.on("data", (c: Buffer) => {
        output += c.toString();
        if (output.includes("Latch local vault listening on")) resolve();
      });
      serve.once("exit", (code) => reject(new Error(`vault serve exited with ${code}`)));
    });
  }, 90_000);
  afterAll(async () => {
    const exited = new Promise((resolve) => serve.once("exit", resolve));
    serve.kill("SIGTERM");
    await exited;
  });

  it("set, list, grants, audit, audit export, policy get, rm and mcp", async () => {
    const through = async (args: string[], stdin = "") => {
      const run = await vault(dataDir, args, stdin);
      // A command that opened the vault itself would have said so (and could not: serve holds it).
      expect(run.stderr).not.toContain("Opening the local vault");
      expect({ args, code: run.code, stderr: run.stderr }).toEqual({ args, code: 0, stderr: "" });
      return run.stdout;
    };
    expect(
      await through(["set", "PROOF_TOKEN", "--host", "api.github.com"], "ghp_proofcanary_0123456789"),
    ).toContain("Stored PROOF_TOKEN");
    expect(await through(["list"])).toContain("PROOF_TOKEN");
    expect(await through(["grants"])).toContain("No approvals yet.");
    expect(await through(["audit"])).toContain("item_created");
    expect(await through(["audit", "export"])).toContain('"seq"');
    expect(JSON.parse(await through(["policy", "get"]))).toHaveProperty("rules");
    const initialize = {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "proof-agent" } },
    };
    const listTools = { jsonrpc: "2.0", id: 2, method: "tools/list" };
    const relayed = (await through(["mcp"], `${JSON.stringify(initialize)}\n${JSON.stringify(listTools)}\n`))
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { id: number; result?: { tools?: unknown[] } });
    expect(relayed.map((frame) => frame.id)).toEqual([1, 2]);
    expect(relayed[1]?.result?.tools?.length).toBeGreaterThan(0);
    expect(await through(["rm", "PROOF_TOKEN"])).toContain("Deleted PROOF_TOKEN");
  }, 120_000);
});
