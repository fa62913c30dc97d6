// The local variant's policies as a user runs them (DECISIONS "Policies"): real `vault` processes.
// `vault policy get | set FILE | preview FILE` with no server running (the CLI opens the vault) and
// while `vault mcp` holds it (through its loopback API), and the rules applied to the agent's
// http_request over stdio, the same matcher as the hosted service.
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningOrigin, startOrigin } from "../../egress-proxy/test/origin.ts";

const VAULT = new URL("../src/cli/vault.ts", import.meta.url).pathname;
const PKI_CA = new URL("../../egress-proxy/test/pki/trusted-ca.pem", import.meta.url).pathname;
const CANARY = "ghp_policycanary_1a2b3c4d5e6f7081";

let origin: RunningOrigin;
let env: Record<string, string>;
let work: string;

function vault(
  args: string[],
  stdin?: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [VAULT, ...args], { env, stdio: ["pipe", "pipe", "pipe"] });
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

function policyFile(name: string, content: unknown): string {
  const path = join(work, name);
  writeFileSync(path, JSON.stringify(content));
  return path;
}

const payloadOf = (result: Awaited<ReturnType<Client["callTool"]>>) =>
  JSON.parse((result.content as { text: string }[])[0]!.text) as Record<string, unknown>;

beforeAll(async () => {
  origin = await startOrigin((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end("{}");
  });
  work = mkdtempSync(join(tmpdir(), "latch-vault-policy-"));
  const { BASE_URL: _b, DATABASE_URL: _d, ...inherited } = process.env;
  env = {
    ...(inherited as Record<string, string>),
    DATA_DIR: join(work, ".latch"),
    NODE_ENV: "test",
    EGRESS_CONNECT_TO: `api.latch.test:443:127.0.0.1:${origin.port}`,
    EGRESS_ALLOW_CIDRS: "127.0.0.1/32",
    EGRESS_EXTRA_CA: PKI_CA,
  };
});
afterAll(async () => {
  await origin.close();
});

describe("vault policy", () => {
  it("gets, sets and refuses with the vault closed", async () => {
    const stored = await vault(["set", "API_KEY", "--host", "api.latch.test"], `${CANARY}\n`);
    expect(stored.code, stored.stderr).toBe(0);

    const empty = await vault(["policy", "get"]);
    expect(empty.code, empty.stderr).toBe(0);
    expect(JSON.parse(empty.stdout)).toEqual({ version: 0, rules: [] });

    const rules = [
      { id: "no-admin", name: "No admin", effect: "deny", match: { paths: ["/admin/**"] } },
      { id: "reads", effect: "allow", match: { methods: ["GET"], hosts: ["*.latch.test"] } },
    ];
    const saved = await vault(["policy", "set", policyFile("first.json", { version: 0, rules })]);
    expect(saved.code, saved.stderr).toBe(0);
    expect(saved.stdout).toBe("Saved policy version 1: 2 rules (1 allow, 0 ask, 1 deny).\n");
    const got = JSON.parse((await vault(["policy", "get"])).stdout);
    expect(got).toMatchObject({ version: 1, rules: [{ id: "no-admin", enabled: true }, { id: "reads" }] });

    // A file made from version 0 is stale now: refused, nothing saved.
    const stale = await vault(["policy", "set", policyFile("stale.json", { version: 0, rules: [] })]);
    expect(stale.code).toBe(1);
    expect(stale.stderr).toMatch(/changed since version 0 \(it is now version 1\)/);

    const bad = await vault([
      "policy",
      "set",
      policyFile("bad.json", [{ id: "x", effect: "deny", match: { paths: ["admin"] } }]),
    ]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("rule 1 (x): match.paths[0]: a path glob starts with /");
    expect((await vault(["policy", "set", join(work, "missing.json")])).stderr).toMatch(/cannot read/);
    expect((await vault(["policy", "set"])).code).toBe(2);
    expect(JSON.parse((await vault(["policy", "get"])).stdout).version).toBe(1);
  }, 90_000);

  it("is applied by vault mcp, and changed and previewed through it while it runs", async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [VAULT, "mcp"],
      env,
      stderr: "pipe",
    });
    const agent = new Client({ name: "policy-agent", version: "1.0.0" });
    await agent.connect(transport);
    const call = async (args: Record<string, unknown>) =>
      payloadOf(await agent.callTool({ name: "http_request", arguments: { item_name: "API_KEY", ...args } }));

    const before = origin.requests.length;
    const denied = await call({ method: "GET", path: "/ADMIN/users" });
    expect(denied).toMatchObject({
      status: "policy_denied",
      policy: { rule_id: "no-admin", rule_name: "No admin" },
    });
    expect(String((denied.next as { for_model: string }).for_model)).toContain("vault policy set FILE");
    expect(origin.requests.length).toBe(before);

    const allowed = await call({ method: "GET", path: "/v1/me" });
    expect(allowed).toMatchObject({ origin_status: 200, policy: { rule_id: "reads", effect: "allow" } });
    expect(allowed.grant_id).toBeUndefined();
    expect((await call({ method: "POST", path: "/v1/things", body: {} })).status).toBe("pending");

    // Through the running process's loopback API: the new list decides the very next call.
    const next = [
      { id: "agent-writes", effect: "allow", match: { agents: ["policy-agent"], methods: ["POST"] } },
      { id: "reads", effect: "allow", match: { methods: ["GET"] } },
    ];
    const preview = await vault(["policy", "preview", policyFile("next.json", next)]);
    expect(preview.code, preview.stderr).toBe(0);
    expect(preview.stdout).toMatch(/agent-writes\s+allow\s+1 call\n/);
    expect(preview.stdout).toMatch(
      /would have allowed 3, asked 0, denied 0, rate-limited 0; 0 matched no rule/,
    );
    expect(preview.stdout).toMatch(/2 decided otherwise than the saved policy/);

    const saved = await vault(["policy", "set", policyFile("next-set.json", { rules: next })]);
    expect(saved.code, saved.stderr).toBe(0);
    expect(saved.stdout).toContain("Saved policy version 2");
    expect(saved.stderr).toMatch(
      /note: rule agent-writes allows by agent name \("[^"]+"\): locally an agent is the name its MCP client gives itself/,
    );
    expect(await call({ method: "POST", path: "/v1/things", body: {} })).toMatchObject({
      origin_status: 200,
      policy: { rule_id: "agent-writes" },
    });
    expect((await call({ method: "GET", path: "/admin/users" })).origin_status).toBe(200);

    const audit = await vault(["audit"]);
    expect(audit.stdout).toMatch(
      /agent:policy-agent\s+policy_denied\s+API_KEY\s+api\.latch\.test\s+policy_denied/,
    );
    expect(audit.stdout).toMatch(/agent:policy-agent\s+policy_allowed\s+API_KEY/);
    expect(audit.stdout).toMatch(/operator\s+policies_changed/);
    expect(audit.stdout + preview.stdout + saved.stdout + saved.stderr).not.toContain(CANARY);
    await agent.close();
  }, 90_000);
});
