// `npm run fuzz:api` (CI runs it): schemathesis against a running control plane. Starts the
// service as `npm start` does (embedded database in a fresh DATA_DIR, its own egress proxy, mail to
// DATA_DIR/outbox), signs an operator in through the real sign-in (email code, authenticator),
// issues a model and a trusted client, then fuzzes /openapi.json with each caller's credential:
// no 5xx, no status, media type or body outside the document. Time-bounded: MAX_TIME_S per pass.
//
//   SCHEMATHESIS=/path/to/st npm run fuzz:api      (default: `st` on PATH)
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as OTPAuth from "otpauth";

const ROOT = new URL("../../", import.meta.url).pathname;
const ST = process.env.SCHEMATHESIS ?? "st";
/** Seconds of fuzzing per caller; four passes. */
const MAX_TIME_S = Number(process.env.FUZZ_MAX_TIME_S ?? 60);
const CHECKS =
  "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance";

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const dataDir = mkdtempSync(join(tmpdir(), "latch-fuzz-"));
const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const service = spawn(process.execPath, [join(ROOT, "control-plane/src/main.ts")], {
  env: {
    ...process.env,
    NODE_ENV: "development",
    DATA_DIR: dataDir,
    PORT: String(port),
    HOST: "127.0.0.1",
    BASE_URL: base,
    EGRESS_PORT: "0",
    LOG_LEVEL: "warn",
    DATABASE_URL: "",
    SMTP_URL: "",
  },
  stdio: ["ignore", "inherit", "inherit"],
  // Its own process group: the egress proxy it spawns goes down with it, whatever happens here.
  detached: true,
});
const group = -service.pid!;
const exited = new Promise<void>((resolve) => service.once("exit", () => resolve()));
/** SIGTERM to the service and its proxy; SIGKILL to what is left after 20 s. */
async function stop(): Promise<void> {
  try {
    process.kill(group, "SIGTERM");
  } catch {
    return;
  }
  const timer = setTimeout(() => {
    try {
      process.kill(group, "SIGKILL");
    } catch {}
  }, 20_000);
  await exited;
  clearTimeout(timer);
  // The proxy child drains on its own SIGTERM; give the group a moment, then make sure.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  try {
    process.kill(group, "SIGKILL");
  } catch {}
}
process.on("exit", () => {
  try {
    process.kill(group, "SIGKILL");
  } catch {}
});

/** The cookie jar of one browser (plain cookie names: BASE_URL is http). */
const cookies = new Map<string, string>();
async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: {
      ...(cookies.size ? { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join("; ") } : {}),
      ...(method !== "GET" && cookies.has("latch_csrf")
        ? { "x-csrf-token": cookies.get("latch_csrf")! }
        : {}),
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    redirect: "manual",
  });
  for (const line of response.headers.getSetCookie()) {
    const [pair] = line.split(";");
    const at = pair!.indexOf("=");
    cookies.set(pair!.slice(0, at), pair!.slice(at + 1));
  }
  const text = await response.text();
  if (response.status >= 400) throw new Error(`${method} ${path} answered ${response.status}: ${text}`);
  return text ? (JSON.parse(text) as Record<string, unknown>) : {};
}

async function waitForHealth(): Promise<void> {
  for (let i = 0; i < 240; i++) {
    if (service.exitCode !== null) throw new Error(`the control plane exited with ${service.exitCode}`);
    try {
      if ((await fetch(`${base}/health`)).ok) return;
    } catch {}
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error("the control plane did not answer /health within 60 s");
}

/** The code of the newest mail in DATA_DIR/outbox (the dev outbox, mailer.ts). */
function lastMailedCode(): string {
  const outbox = join(dataDir, "outbox");
  const newest = readdirSync(outbox)
    .map((name) => ({ name, at: statSync(join(outbox, name)).mtimeMs }))
    .sort((a, b) => b.at - a.at)[0];
  const code =
    newest && /sign-(?:in|up) code is (\d{8})/.exec(readFileSync(join(outbox, newest.name), "utf8"))?.[1];
  if (!code) throw new Error("no sign-in code in the outbox");
  return code;
}

function fuzz(label: string, tags: string[], headers: string[], excluded: string[] = []): boolean {
  console.log(`\n=== schemathesis: ${label} (${tags.join(", ")}), ${MAX_TIME_S} s`);
  const run = spawnSync(
    ST,
    [
      "run",
      `${base}/openapi.json`,
      "--checks",
      CHECKS,
      "--max-time",
      String(MAX_TIME_S),
      // One worker: hypothesis's caches are not safe across threads (a worker's "Runtime Error"
      // in schemathesis 4.32 was theirs, not ours), and the machine is shared.
      "--workers",
      "1",
      "--max-redirects",
      "0",
      "--request-timeout",
      "20",
      "--phases",
      "examples,coverage,fuzzing",
      "--suppress-health-check",
      "all",
      "--seed",
      process.env.FUZZ_SEED ?? "1",
      ...tags.flatMap((tag) => ["--include-tag", tag]),
      ...excluded.flatMap((id) => ["--exclude-operation-id", id]),
      ...headers.flatMap((header) => ["-H", header]),
    ],
    // Its cache and reports go to the run's own directory, not the repository.
    { stdio: "inherit", cwd: dataDir, env: { ...process.env, NO_COLOR: "1" } },
  );
  if (run.error) throw run.error;
  return run.status === 0;
}

let ok = false;
try {
  await waitForHealth();
  const email = `fuzz-${Date.now()}@example.com`;
  await call("POST", "/api/auth/otp/send", { email });
  await call("POST", "/api/auth/otp/verify", { email, otp: lastMailedCode() });
  const started = await call("POST", "/api/auth/totp/start", {});
  const totp = OTPAuth.URI.parse(String(started.otpauth_url)) as OTPAuth.TOTP;
  await call("POST", "/api/auth/totp/confirm", { code: totp.generate() });
  await call("POST", "/api/items", {
    name: "FUZZ_KEY",
    value: "fuzz-value-not-a-secret",
    environment: "staging",
    allowed_hosts: ["api.example.com"],
  });
  const model = String(
    (await call("POST", "/api/clients/model", { name: "fuzz agent", environment: "staging" })).token,
  );
  const trusted = String(
    (await call("POST", "/api/clients/trusted", { name: "fuzz runtime", environment: "staging" })).token,
  );
  const session = [...cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  const csrf = cookies.get("latch_csrf") ?? "";

  const results = [
    // Sign-out and "end every other session" would end the session the pass runs on.
    fuzz(
      "operator",
      ["operator"],
      [`Cookie: ${session}`, `X-CSRF-Token: ${csrf}`],
      ["post_api_auth_logout", "post_api_sessions_revoke_others"],
    ),
    // GET /mcp is a stream that never ends by design.
    fuzz("model client", ["model"], [`Authorization: Bearer ${model}`], ["get_mcp"]),
    fuzz("trusted client", ["trusted"], [`Authorization: Bearer ${trusted}`]),
    fuzz("no credential", ["public", "oauth"], []),
  ];
  ok = results.every(Boolean);
} finally {
  await stop();
  rmSync(dataDir, { recursive: true, force: true });
}
console.log(ok ? "\nschemathesis: every pass held" : "\nschemathesis: a pass failed (see above)");
process.exit(ok ? 0 : 1);
