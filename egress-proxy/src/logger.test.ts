// The proxy's logger writes its lines in batches; none is lost: flushed on demand and at exit.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runInCallContext } from "./grpc/call-context.ts";
import { createProxyLogger, LOG_BATCH_MS } from "./logger.ts";

const linesOf = (path: string) =>
  readFileSync(path, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>);

describe("the proxy's logger", () => {
  it("writes every line, each with the call's request id, once flushed", () => {
    const file = join(mkdtempSync(join(tmpdir(), "latch-log-")), "proxy.log");
    const { logger, flush } = createProxyLogger({ level: "info", file });
    runInCallContext("req_batch_1", () => logger.info({ host: "api.example.com" }, "call answered"));
    logger.info({ café: "✓" }, "outside a call");
    flush();
    const lines = linesOf(file);
    expect(lines.map((l) => l.msg)).toEqual(["call answered", "outside a call"]);
    expect(lines[0]).toMatchObject({
      name: "egress-proxy",
      request_id: "req_batch_1",
      host: "api.example.com",
    });
    expect(lines[1]).toMatchObject({ café: "✓" });
  });

  it("writes a lone line within the batch time, with no flush", async () => {
    const file = join(mkdtempSync(join(tmpdir(), "latch-log-")), "proxy.log");
    const { logger } = createProxyLogger({ level: "info", file });
    logger.info("one line");
    await new Promise((resolve) => setTimeout(resolve, LOG_BATCH_MS * 3));
    expect(linesOf(file).map((l) => l.msg)).toEqual(["one line"]);
  });

  it("writes what waits when the process exits", () => {
    const file = join(mkdtempSync(join(tmpdir(), "latch-log-")), "proxy.log");
    const script = `import { createProxyLogger } from ${JSON.stringify(new URL("./logger.ts", import.meta.url).pathname)};
const { logger } = createProxyLogger({ level: "info", file: ${JSON.stringify(file)} });
for (let i = 0; i < 3; i++) logger.info({ i }, "before exit");
process.exit(0);`;
    const run = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
    expect(run.status, run.stderr).toBe(0);
    expect(linesOf(file).map((l) => l.i)).toEqual([0, 1, 2]);
  });
});
