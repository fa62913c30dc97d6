// The processes' last-resort handlers (`logProcessFaults`), run in a child process with the
// control plane's own logger settings: a promise nobody waits for is logged without the values a
// raw database error quotes, and the process goes on serving; an uncaught exception stops it.
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "..", "..");

function runChild(body: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const dir = mkdtempSync(join(tmpdir(), "latch-faults-"));
  const script = join(dir, "child.ts");
  writeFileSync(
    script,
    `import pino from ${JSON.stringify(join(ROOT, "node_modules/pino/pino.js"))};
import { logProcessFaults } from ${JSON.stringify(join(ROOT, "shared/src/process.ts"))};
import { serializeLoggedError } from ${JSON.stringify(join(ROOT, "control-plane/src/http/logging.ts"))};
const logger = pino({ serializers: { err: serializeLoggedError } }, pino.destination(1));
logProcessFaults(logger);
${body}
`,
  );
  return new Promise((done) => {
    execFile(process.execPath, [script], { timeout: 20_000 }, (error, stdout, stderr) => {
      done({ code: error ? ((error as { code?: number }).code ?? null) : 0, stdout, stderr });
    });
  });
}

it("logs a promise nobody waits for without the values a database error quotes, and goes on", async () => {
  const { code, stdout, stderr } = await runChild(`
const raw = Object.assign(new Error("duplicate key value violates unique constraint"), {
  severity: "ERROR", code: "23505", detail: "Key (token)=(sk_live_NEVER_LOGGED) already exists.",
});
void Promise.reject(raw);
setTimeout(() => { process.stdout.write("still serving\\n"); }, 200);
`);
  expect(code).toBe(0);
  expect(stdout).toContain("still serving");
  const line = JSON.parse(stdout.split("\n").find((l) => l.includes("nothing waiting")) ?? "{}");
  expect(line.level).toBe(50);
  expect(line.err).toMatchObject({ type: "DatabaseError", code: "23505" });
  expect(stdout + stderr).not.toContain("sk_live_NEVER_LOGGED");
});

it("stops with exit 1 on an uncaught exception, after logging it", async () => {
  const { code, stdout, stderr } = await runChild(`
setTimeout(() => { throw new TypeError("broken invariant"); }, 10);
setTimeout(() => { process.stdout.write("still serving\\n"); }, 500);
`);
  expect(code).toBe(1);
  expect(stdout).not.toContain("still serving");
  const line = JSON.parse(stdout.split("\n").find((l) => l.includes("not caught")) ?? "{}");
  expect(line.level).toBe(60);
  expect(line.err.message).toBe("broken invariant");
  expect(stderr).toBe("");
});
