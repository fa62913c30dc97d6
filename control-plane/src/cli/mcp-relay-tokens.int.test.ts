// `vault mcp` relaying to a `vault serve` that was restarted after tokens.json was deleted: the new
// server holds a new model token, so the relay's is refused (401). The relay reads tokens.json
// again and sends the frame once more, instead of answering "HTTP 401" to every frame until the
// agent is restarted. Real `vault` processes.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterEach, expect, it } from "vitest";
import { VAULT, vaultEnvironment } from "../../test/vault-process.ts";
import { readLocalRuntime } from "../local/local-server.ts";
import { loadOrCreateLocalTokens, localTokensPath } from "../local/local-tokens.ts";

const running: ChildProcess[] = [];

afterEach(async () => {
  for (const child of running.splice(0)) await stop(child);
});

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.stdin?.end();
  child.kill("SIGTERM");
  await exited;
}

/** A loopback port free now: the restarted vault serve must listen where the relay was pointed. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function startServe(dataDir: string, port: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, [VAULT, "serve", "--port", String(port)], {
    env: vaultEnvironment(dataDir),
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.push(child);
  let output = "";
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on("data", (c: Buffer) => {
      output += c.toString();
      if (/console: +\S+/.test(output)) resolve();
    });
    child.once("exit", (code) => reject(new Error(`vault serve exited with ${code}`)));
  });
  return child;
}

/** `vault mcp`, with a function sending one frame and resolving with the next line it writes. */
function startMcp(dataDir: string) {
  const child = spawn(process.execPath, [VAULT, "mcp"], { env: vaultEnvironment(dataDir), stdio: "pipe" });
  running.push(child);
  const answers: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  createInterface({ input: child.stdout! }).on("line", (line) => {
    const next = waiting.shift();
    if (next) next(line);
    else answers.push(line);
  });
  const send = (frame: object): Promise<Record<string, unknown>> => {
    child.stdin!.write(`${JSON.stringify(frame)}\n`);
    const queued = answers.shift();
    if (queued !== undefined) return Promise.resolve(JSON.parse(queued));
    return new Promise((resolve) => waiting.push((line) => resolve(JSON.parse(line))));
  };
  return { child, send };
}

it("vault mcp keeps relaying after vault serve restarted with a new tokens.json", async () => {
  const dataDir = join(mkdtempSync(join(tmpdir(), "latch-mcp-relay-tokens-")), ".latch");
  const port = await freePort();
  const first = await startServe(dataDir, port);
  const before = loadOrCreateLocalTokens(dataDir).model;
  const mcp = startMcp(dataDir);
  const initialize = { protocolVersion: "2025-06-18", clientInfo: { name: "relay-test" } };
  expect(await mcp.send({ jsonrpc: "2.0", id: 1, method: "initialize", params: initialize })).toMatchObject({
    id: 1,
    result: { protocolVersion: expect.any(String) },
  });
  expect(await mcp.send({ jsonrpc: "2.0", id: 2, method: "ping" })).toMatchObject({ id: 2, result: {} });

  await stop(first);
  rmSync(localTokensPath(dataDir));
  await startServe(dataDir, port);
  expect(readLocalRuntime(dataDir)?.url).toBe(`http://127.0.0.1:${port}`);
  expect(loadOrCreateLocalTokens(dataDir).model).not.toBe(before);

  expect(await mcp.send({ jsonrpc: "2.0", id: 3, method: "ping" })).toMatchObject({ id: 3, result: {} });
  expect(await mcp.send({ jsonrpc: "2.0", id: 4, method: "tools/list" })).toMatchObject({
    id: 4,
    result: { tools: expect.any(Array) },
  });
}, 180_000);
