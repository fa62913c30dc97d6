// CI check of the Helm chart, offline: `helm lint --strict` and `helm template` with the chart's
// defaults (and the two addresses they ask for) and each example values file, every rendered
// manifest validated against the Kubernetes API schemas (kubernetes-models, plus the cert-manager
// and Prometheus Operator models), then the rules this chart promises: headless egress Service,
// internet egress for the proxies only, keys from Secrets only, containers with probes and CPU
// requests, an HPA and a PDB per tier, and chart-rules.ts (the NetworkPolicies, each tier's own
// Secrets, identities, non-root unprivileged read-only pods in production mode, checksums, zones,
// alerts). Then each setting of refused-values.ts must be refused by `helm lint`/`helm template`
// themselves (values.schema.json or a template's `fail`), saying what that list says.
//   node deploy/helm/check-chart.ts HELM_BINARY
// Exits 1 on the first failing values file, naming the manifest and the rule.
import { execFileSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { ChartRuleError, checkNetworkPolicies, checkTiers, type Manifest } from "./chart-rules.ts";
import { REFUSED_VALUES } from "./refused-values.ts";

const CHART = new URL("./latch/", import.meta.url).pathname;
/** The cluster version rendered for (a Helm built with `go install` defaults to 1.20). */
const KUBE_VERSION = "1.31.0";
const helmArgument = process.argv[2];
if (!helmArgument) {
  process.stderr.write("usage: node deploy/helm/check-chart.ts HELM_BINARY\n");
  process.exit(2);
}
const helm: string = helmArgument;

/** Where the model class of an apiVersion lives. */
function modelModule(apiVersion: string): string {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  if (group === "cert-manager.io") return `@kubernetes-models/cert-manager/${apiVersion}`;
  if (group === "monitoring.coreos.com") return `@kubernetes-models/prometheus-operator/${apiVersion}`;
  return group ? `kubernetes-models/${group}/${version}` : `kubernetes-models/${version}`;
}

async function validateSchema(doc: Manifest): Promise<void> {
  const module = (await import(modelModule(doc.apiVersion))) as Record<
    string,
    new (
      data: unknown,
    ) => { validate(): void }
  >;
  const Model = module[doc.kind];
  if (!Model) throw new Error(`no schema for ${doc.apiVersion} ${doc.kind}`);
  new Model(doc).validate();
}

function fail(where: string, rule: string): never {
  throw new Error(`${where}: ${rule}`);
}

/** The chart's own promises, checked on one rendering. */
function checkRules(docs: Manifest[], valuesName: string): void {
  const byKind = (kind: string) => docs.filter((d) => d.kind === kind);
  const deployments = byKind("Deployment");
  if (deployments.length !== 2) fail(valuesName, "expected two Deployments (control plane, egress)");
  for (const d of deployments) {
    const where = `${valuesName} Deployment ${d.metadata.name}`;
    const pod = d.spec.template.spec;
    if (pod.automountServiceAccountToken !== false) fail(where, "no service account token is mounted");
    for (const c of pod.containers) {
      if (!c.resources?.requests?.cpu) fail(where, "CPU requests (the HPA scales on them)");
      if (!c.readinessProbe || !c.livenessProbe) fail(where, "readiness and liveness probes");
      for (const env of c.env ?? []) {
        // Secrets come from Secrets: a URL with a password or a key never sits in the manifest.
        if (
          /DATABASE_URL|SMTP_URL|_KEY$/.test(env.name) &&
          env.value !== undefined &&
          !/FILE/.test(env.name)
        ) {
          if (!String(env.value).startsWith("/")) fail(where, `${env.name} must come from a Secret`);
        }
      }
    }
  }
  const secrets = byKind("Secret");
  if (secrets.length > 0) fail(valuesName, "the chart renders no Secret: key files are created apart");

  const services = byKind("Service");
  const egressService = services.find((s) => s.metadata.name.endsWith("-egress"));
  if (egressService?.spec.clusterIP !== "None") fail(valuesName, "the egress Service is headless");

  const components = ["control-plane", "egress"];
  for (const component of components) {
    const pdb = byKind("PodDisruptionBudget").find((p) => p.metadata.name.endsWith(`-${component}`));
    if (!pdb) fail(valuesName, `a PodDisruptionBudget for ${component}`);
    const deployment = deployments.find((d) => d.metadata.name.endsWith(`-${component}`))!;
    const hpa = byKind("HorizontalPodAutoscaler").find(
      (h) => h.spec.scaleTargetRef.name === deployment.metadata.name,
    );
    if (!hpa && deployment.spec.replicas === undefined) fail(valuesName, `${component}: replicas or an HPA`);
  }

  checkNetworkPolicies(docs, valuesName);
  checkTiers(docs, valuesName);
}

/** The defaults ask for the database's and the SMTP relay's addresses (the NetworkPolicies need them). */
const DEFAULT_ADDRESSES = ["--set", "database.cidrs={10.20.0.5/32}", "--set", "smtp.cidrs={10.20.0.25/32}"];

/** Renders and checks one values file; throws on the first broken promise. */
async function checkRendering(valuesName: string, valuesArgs: string[]): Promise<number> {
  const kube = ["--kube-version", KUBE_VERSION];
  execFileSync(helm, ["lint", "--strict", CHART, ...kube, ...valuesArgs], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const rendered = execFileSync(
    helm,
    ["template", "latch", CHART, "--namespace", "latch", ...kube, ...valuesArgs],
    {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  const docs = parseAllDocuments(rendered)
    .map((d) => d.toJS() as Manifest | null)
    .filter((d): d is Manifest => d !== null);
  for (const doc of docs) {
    try {
      await validateSchema(doc);
    } catch (error) {
      fail(`${valuesName} ${doc.kind} ${doc.metadata?.name}`, (error as Error).message);
    }
  }
  checkRules(docs, valuesName);
  return docs.length;
}

const examples = readdirSync(join(CHART, "examples"))
  .filter((f) => f.endsWith(".yaml"))
  .map((f) => join(CHART, "examples", f));
let manifests = 0;
let renderings = 0;
try {
  for (const valuesFile of [undefined, ...examples]) {
    const valuesName = valuesFile
      ? valuesFile.slice(CHART.length)
      : "values.yaml (defaults and the two addresses)";
    const count = await checkRendering(valuesName, valuesFile ? ["-f", valuesFile] : DEFAULT_ADDRESSES);
    manifests += count;
    renderings += 1;
    process.stdout.write(`ok ${valuesName}: ${count} manifests valid\n`);
  }
  const base = ["-f", join(CHART, "examples", "values-managed-postgres.yaml")];
  for (const broken of REFUSED_VALUES) {
    let refusal: string | undefined;
    let output = "";
    try {
      await checkRendering(`broken: ${broken.name}`, [...base, ...broken.args]);
    } catch (error) {
      // helm lint says why on stdout, helm template on stderr.
      output = ["stdout", "stderr"]
        .map((k) => (error as Record<string, Buffer | string | undefined>)[k]?.toString() ?? "")
        .join("\n");
      const said = output.split("\n").find((line) => /^\[ERROR\]|^Error: execution error/.test(line));
      refusal = error instanceof ChartRuleError ? error.message : (said ?? (error as Error).message).trim();
    }
    if (!refusal) throw new Error(`the chart accepted ${broken.name}`);
    // Refused by helm itself (the schema or a template's sentence), not only by the rules here.
    if (!broken.says.test(output)) {
      throw new Error(`the chart refused ${broken.name}, but not saying ${broken.says}: ${refusal}`);
    }
    process.stdout.write(`ok refused ${broken.name}: ${refusal}\n`);
  }
} catch (error) {
  process.stderr.write(`helm chart check failed: ${(error as Error).message}\n`);
  process.exit(1);
}
process.stdout.write(
  `helm chart: ${renderings} renderings, ${manifests} manifests checked, ${REFUSED_VALUES.length} broken settings refused\n`,
);
