// The chart itself refuses unsafe values, whoever installs it: `helm template` (what `helm install`
// renders) fails, with a sentence naming the value, for each setting of refused-values.ts (extraEnv
// undoing production mode, isolation undone, a privileged or root container, one tier on the
// other's Secrets), and the shipped values files still render and keep the chart's rules. Uses the
// Helm that deploy/ci-check.sh caches; skipped without it, except on CI, where it fails.
import { execFile } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { checkNetworkPolicies, checkTiers, type Manifest } from "./chart-rules.ts";
import { REFUSED_VALUES } from "./refused-values.ts";

const run = promisify(execFile);
const CHART = new URL("./latch/", import.meta.url).pathname;
const BASE = ["-f", join(CHART, "examples", "values-managed-postgres.yaml")];
const HELM_VERSION = /^HELM_VERSION=(\S+)$/m.exec(
  readFileSync(new URL("../ci-check.sh", import.meta.url), "utf8"),
)?.[1];
const CACHE =
  process.env.LATCH_CI_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "latch-ci");
const HELM = join(CACHE, `helm-${HELM_VERSION}`);
const skipHelm = !existsSync(HELM) && !process.env.CI;

/** `helm template` over these values: the manifests, or what helm said when it refused. */
async function render(args: string[]): Promise<{ docs?: Manifest[]; said?: string }> {
  try {
    const { stdout } = await run(
      HELM,
      ["template", "latch", CHART, "--namespace", "latch", "--kube-version", "1.31.0", ...args],
      { maxBuffer: 16 * 1024 * 1024 },
    );
    const docs = parseAllDocuments(stdout)
      .map((d) => d.toJS() as Manifest | null)
      .filter((d): d is Manifest => d !== null);
    return { docs };
  } catch (error) {
    return { said: String((error as { stderr?: string }).stderr ?? error) };
  }
}

describe.skipIf(skipHelm)("the Helm chart refuses unsafe values", () => {
  const shipped: [string, string[]][] = [
    [
      "values.yaml (with the two addresses)",
      ["--set", "database.cidrs={10.20.0.5/32}", "--set", "smtp.cidrs={10.20.0.25/32}"],
    ],
    ...readdirSync(join(CHART, "examples"))
      .filter((f) => f.endsWith(".yaml"))
      .map((f): [string, string[]] => [f, ["-f", join(CHART, "examples", f)]]),
  ];

  it.each(shipped)("renders %s, keeping the chart's rules", async (name, args) => {
    const { docs, said } = await render(args);
    expect(said).toBeUndefined();
    checkNetworkPolicies(docs!, name);
    checkTiers(docs!, name);
  });

  it("renders extraEnv that sets none of the refused variables, after the chart's own", async () => {
    const { docs, said } = await render([
      ...BASE,
      "--set-json",
      'egress.extraEnv=[{"name":"UV_THREADPOOL_SIZE","value":"8"}]',
    ]);
    expect(said).toBeUndefined();
    const egress = docs!.find((d) => d.kind === "Deployment" && d.metadata.name === "latch-egress")!;
    const env = egress.spec.template.spec.containers[0].env as { name: string; value?: string }[];
    expect(env.at(-1)).toEqual({ name: "UV_THREADPOOL_SIZE", value: "8" });
    expect(env.filter((e) => e.name === "NODE_ENV")).toEqual([{ name: "NODE_ENV", value: "production" }]);
  });

  it("renders no NetworkPolicy only when told the tiers go unisolated", async () => {
    const { docs, said } = await render([
      ...BASE,
      "--set",
      "networkPolicy.enabled=false",
      "--set",
      "networkPolicy.acknowledgeNoIsolation=true",
    ]);
    expect(said).toBeUndefined();
    expect(docs!.filter((d) => d.kind === "NetworkPolicy")).toEqual([]);
  });

  it.each(REFUSED_VALUES.map((r) => [r.name, r] as const))("refuses %s", async (_name, refused) => {
    const { docs, said } = await render([...BASE, ...refused.args]);
    expect(docs).toBeUndefined();
    expect(said).toMatch(refused.says);
  });
});
