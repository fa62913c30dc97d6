// The control plane's own database role holds no more than it needs (the guide's least privilege):
// in production it refuses to start as a superuser, in one sentence that never names the URL; a
// role that only owns its database runs every migration and starts. On PostgreSQL only.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const MAIN = new URL("../src/main.ts", import.meta.url).pathname;
const databaseUrl = process.env.DATABASE_URL ?? "";

/** Starts main.ts in production; resolves with how it ended (or that it came up) and what it said. */
function startInProduction(url: string) {
  const child = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH,
      NODE_ENV: "production",
      BASE_URL: "http://localhost:8787",
      SMTP_URL: "smtp://127.0.0.1:2525",
      DATABASE_URL: url,
      DATA_DIR: mkdtempSync(join(tmpdir(), "latch-db-role-")),
      PORT: "0",
      EGRESS_PORT: "0",
      LOG_LEVEL: "warn",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  return new Promise<{ outcome: "ready" | number | null; stdout: string; stderr: string }>((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), 90_000);
    child.stdout.on("data", () => {
      if (!stdout.includes("Latch is running")) return;
      clearTimeout(timer);
      child.kill("SIGTERM");
      resolve({ outcome: "ready", stdout, stderr });
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ outcome: code, stdout, stderr });
    });
  });
}

describe.runIf(databaseUrl)("the control plane's database role", () => {
  const role = `latch_control_t${randomBytes(4).toString("hex")}`;
  const password = randomBytes(12).toString("hex");
  let admin: pg.Client;

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: databaseUrl });
    await admin.connect();
    await admin.query(`CREATE ROLE ${role} LOGIN NOSUPERUSER PASSWORD '${password}'`);
    await admin.query(`CREATE DATABASE ${role} OWNER ${role}`);
  });

  afterAll(async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${role} WITH (FORCE)`).catch(() => {});
    await admin.query(`DROP ROLE IF EXISTS ${role}`).catch(() => {});
    await admin?.end();
  });

  it("refuses, in production, to start as a superuser, in one sentence without the URL", async () => {
    const refused = await startInProduction(databaseUrl);
    expect(refused.outcome).toBe(1);
    expect(refused.stderr.trim()).toBe(
      'Latch cannot start: DATABASE_URL connects as a superuser, which can run programs on the database server and turn the audit ledger\'s guards off; give the control plane a role that owns the latch database and nothing more (README "Deployment").',
    );
    expect(refused.stderr).not.toContain(new URL(databaseUrl).host);
  }, 120_000);

  it("starts in production as a role that only owns its database, migrations and all", async () => {
    const url = new URL(databaseUrl);
    url.username = role;
    url.password = password;
    url.pathname = `/${role}`;
    const started = await startInProduction(url.toString());
    expect(started.outcome, started.stderr).toBe("ready");
    expect(started.stderr).not.toContain("superuser");
  }, 120_000);
});
