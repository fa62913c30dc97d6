// Telemetry off costs nothing: with OTEL_EXPORTER_OTLP_ENDPOINT unset, neither tier loads the
// OpenTelemetry SDK (it is imported only by startTelemetry, and only when the endpoint is set).
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";

const PROXY = new URL("./egress-proxy.ts", import.meta.url).pathname;
const PROXY_TELEMETRY = new URL("./telemetry.ts", import.meta.url).pathname;
const PLANE = new URL("../../control-plane/src/control-plane.ts", import.meta.url).pathname;
const PLANE_TELEMETRY = new URL("../../control-plane/src/telemetry.ts", import.meta.url).pathname;

/** The module specifiers a fresh process resolves while running `script`. */
function resolvedBy(script: string): string[] {
  const program = `
    import { registerHooks } from "node:module";
    const seen = [];
    registerHooks({ resolve(specifier, context, next) { seen.push(specifier); return next(specifier, context); } });
    ${script}
    process.stdout.write(JSON.stringify(seen));
  `;
  const run = spawnSync(process.execPath, ["--input-type=module", "-e", program], { encoding: "utf8" });
  if (run.status !== 0) throw new Error(run.stderr);
  return JSON.parse(run.stdout) as string[];
}

describe("telemetry when OTEL_EXPORTER_OTLP_ENDPOINT is unset", () => {
  it("loads no OpenTelemetry module in either tier", () => {
    const seen = resolvedBy(`
      await import(${JSON.stringify(PROXY)});
      await import(${JSON.stringify(PLANE)});
      const proxy = await import(${JSON.stringify(PROXY_TELEMETRY)});
      const plane = await import(${JSON.stringify(PLANE_TELEMETRY)});
      const off = [await proxy.startTelemetry({ endpoint: undefined }), await plane.startTelemetry({ endpoint: undefined })];
      if (off.some((t) => t.enabled)) throw new Error("telemetry is on");
    `);
    expect(seen.length).toBeGreaterThan(50);
    // prom-client looks for @opentelemetry/api (for exemplars) whenever it is installed; the API
    // alone does nothing. No SDK, exporter or context manager is loaded.
    expect(seen.filter((s) => s.includes("@opentelemetry") && s !== "@opentelemetry/api")).toEqual([]);
  });

  it("loads the SDK when it is set", () => {
    const seen = resolvedBy(`
      const proxy = await import(${JSON.stringify(PROXY_TELEMETRY)});
      const on = await proxy.startTelemetry({ endpoint: "http://127.0.0.1:9" });
      await on.shutdown();
    `);
    expect(seen).toContain("@opentelemetry/sdk-trace");
  });
});
