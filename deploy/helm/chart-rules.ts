// The promises the Helm chart makes, checked on one rendering (deploy/helm/check-chart.ts runs
// them on every values file; chart-rules.test.ts feeds them each broken manifest they must catch).
// Pure: manifests in, the first broken promise out, as `where: rule`.

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; annotations?: Record<string, string> };
  // biome-ignore lint/suspicious/noExplicitAny: a manifest is whatever the chart rendered.
  spec?: any;
  [key: string]: unknown;
}

export class ChartRuleError extends Error {}

function fail(where: string, rule: string): never {
  throw new ChartRuleError(`${where}: ${rule}`);
}

/**
 * The IPv4 ranges a proxy must never reach, and the IPv6 special ranges inside 2000::/3: the lists
 * the templates refuse to render without (_helpers.tpl latch.specialRangesV4, latch.specialRangesV6).
 */
export const PRIVATE_V4 = [
  "0.0.0.0/8",
  "10.0.0.0/8",
  "100.64.0.0/10",
  "127.0.0.0/8",
  "169.254.0.0/16",
  "172.16.0.0/12",
  "192.0.0.0/24",
  "192.0.2.0/24",
  "192.88.99.0/24",
  "192.168.0.0/16",
  "198.18.0.0/15",
  "198.51.100.0/24",
  "203.0.113.0/24",
  "224.0.0.0/4",
  "240.0.0.0/4",
];
export const SPECIAL_V6 = ["2001::/23", "2001:db8::/32", "2002::/16", "3fff::/20"];
/** The widest block a database or SMTP rule may name (a database has an address, not a network). */
const MIN_PREFIX_V4 = 24;
const MIN_PREFIX_V6 = 64;
/** The ports the control plane may reach its SMTP relay on (the chart's smtp.ports). */
const SMTP_PORTS = [25, 465, 587, 2525];
/**
 * The variables no tier's env may set but the chart (NODE_ENV=production) and none at all: the
 * development knobs and Node TLS settings the tiers refuse in production (_helpers.tpl
 * latch.refusedExtraEnv).
 */
const REFUSED_ENV = [
  "EGRESS_CONNECT_TO",
  "EGRESS_ALLOW_CIDRS",
  "EGRESS_EXTRA_CA",
  "NODE_TLS_REJECT_UNAUTHORIZED",
  "NODE_OPTIONS",
  "NODE_EXTRA_CA_CERTS",
  "NODE_USE_SYSTEM_CA",
  "OPENSSL_CONF",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
];

interface Peer {
  ipBlock?: { cidr: string; except?: string[] };
  namespaceSelector?: { matchLabels?: Record<string, string> };
  podSelector?: { matchLabels?: Record<string, string> };
}
interface EgressRule {
  to?: Peer[];
  ports?: { port: number; protocol?: string }[];
}

const prefixOf = (cidr: string) => Number(cidr.split("/")[1]);
const isV6 = (cidr: string) => cidr.includes(":");
const isNarrow = (cidr: string) => prefixOf(cidr) >= (isV6(cidr) ? MIN_PREFIX_V6 : MIN_PREFIX_V4);
const hasLabels = (selector: { matchLabels?: Record<string, string> } | undefined) =>
  Boolean(selector?.matchLabels && Object.keys(selector.matchLabels).length > 0);

function envOf(deployment: Manifest | undefined, name: string) {
  const container = deployment?.spec?.template?.spec?.containers?.[0];
  return (container?.env ?? []).find((e: { name: string }) => e.name === name) as
    | { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string } } }
    | undefined;
}

/** Every Secret a pod mounts or references (volumes, env), by name. */
function secretsOf(deployment: Manifest | undefined): Set<string> {
  const pod = deployment?.spec?.template?.spec;
  const names = new Set<string>();
  for (const volume of pod?.volumes ?? []) {
    if (volume.secret?.secretName) names.add(volume.secret.secretName);
  }
  for (const container of pod?.containers ?? []) {
    for (const env of container.env ?? []) {
      const name = env.valueFrom?.secretKeyRef?.name;
      if (name) names.add(name);
    }
    for (const from of container.envFrom ?? []) {
      if (from.secretRef?.name) names.add(from.secretRef.name);
    }
  }
  return names;
}

/** The Secret a pod's volume of this name mounts. */
function secretVolumeOf(deployment: Manifest | undefined, name: string): string | undefined {
  const volumes: { name: string; secret?: { secretName?: string } }[] =
    deployment?.spec?.template?.spec?.volumes ?? [];
  return volumes.find((v) => v.name === name)?.secret?.secretName;
}

/** The NetworkPolicies' promises (DECISIONS "Faults and isolation in deployments"). */
export function checkNetworkPolicies(docs: Manifest[], valuesName: string): void {
  const policies = docs.filter((d) => d.kind === "NetworkPolicy");
  if (policies.length === 0) return;
  const egressDeployment = docs.find((d) => d.kind === "Deployment" && d.metadata.name.endsWith("-egress"));
  const dnsServers = (envOf(egressDeployment, "EGRESS_DNS_SERVERS")?.value ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) =>
      s.startsWith("[") ? s.slice(1, s.indexOf("]")) : s.split(":").length === 2 ? s.split(":")[0]! : s,
    );
  const egressPort = Number(
    /:(\d+)$/.exec(envOf(egressDeployment, "EGRESS_LISTEN")?.value ?? "")?.[1] ?? Number.NaN,
  );
  // The database's port: the proxies' rules to addresses on one port (DNS rules name two, UDP and
  // TCP; the internet rule is to 0.0.0.0/0 and 2000::/3).
  const databasePorts = new Set(
    policies
      .filter((p) => p.metadata.name.endsWith("-egress"))
      .flatMap((p) => (p.spec.egress ?? []) as EgressRule[])
      .filter(
        (rule) =>
          rule.ports?.length === 1 &&
          (rule.to ?? []).every(
            (peer) => peer.ipBlock?.cidr && !["0.0.0.0/0", "2000::/3"].includes(peer.ipBlock.cidr),
          ),
      )
      .map((rule) => rule.ports![0]!.port),
  );
  for (const policy of policies) {
    const isEgressTier = policy.metadata.name.endsWith("-egress");
    const where = `${valuesName} NetworkPolicy ${policy.metadata.name}`;
    const rules: EgressRule[] = policy.spec.egress ?? [];
    if (!policy.spec.policyTypes?.includes("Egress"))
      fail(where, "egress is restricted (policyTypes: Egress)");
    let hasV4Internet = false;
    let hasV6Internet = false;
    for (const rule of rules) {
      // A rule without `to:` (or with an empty list) allows every destination.
      if (!rule.to || rule.to.length === 0) fail(where, "every egress rule names its peers (`to:`)");
      const ports = (rule.ports ?? []).map((p) => p.port);
      if (ports.length === 0) fail(where, "every egress rule names its ports");
      const isDns = ports.includes(53);
      for (const peer of rule.to) {
        const cidr = peer.ipBlock?.cidr;
        if (isDns) {
          // DNS at the configured resolvers (/32, /128) or at the cluster DNS pods, never at any pod
          // of a namespace or at a range.
          if (cidr) {
            if (prefixOf(cidr) !== (isV6(cidr) ? 128 : 32))
              fail(where, "DNS goes to single resolver addresses");
            if (isEgressTier && !dnsServers.includes(cidr.split("/")[0]!)) {
              fail(where, `DNS to ${cidr}, which is not one of egress.dnsServers`);
            }
          } else if (!hasLabels(peer.namespaceSelector) || !hasLabels(peer.podSelector)) {
            fail(where, "DNS goes to the cluster DNS pods (namespace and pod labels together)");
          } else if (isEgressTier && dnsServers.length > 0) {
            fail(where, "with egress.dnsServers set, the proxies reach DNS only at those resolvers");
          }
          continue;
        }
        if (isEgressTier && ports.length === 1 && ports[0] === 443 && cidr) {
          const except = peer.ipBlock?.except ?? [];
          if (cidr === "0.0.0.0/0") {
            hasV4Internet = true;
            for (const range of PRIVATE_V4) {
              if (!except.includes(range)) fail(where, `the internet rule excepts ${range}`);
            }
          } else if (cidr === "2000::/3") {
            hasV6Internet = true;
            for (const range of SPECIAL_V6) {
              if (!except.includes(range)) fail(where, `the IPv6 internet rule excepts ${range}`);
            }
          } else {
            fail(
              where,
              `HTTPS to ${cidr}: the proxies' internet is 0.0.0.0/0 and 2000::/3 less special ranges`,
            );
          }
          continue;
        }
        if (cidr && !isNarrow(cidr)) {
          fail(
            where,
            `port ${ports.join(",")} to ${cidr}: a database or relay is named by its address, not a network`,
          );
        }
        if (!isEgressTier && !cidr && ports.some((p) => p !== egressPort)) {
          fail(where, "the control plane reaches pods only at the egress Service's port");
        }
        if (!isEgressTier && cidr) {
          const other = ports.find((p) => !databasePorts.has(p) && !SMTP_PORTS.includes(p));
          if (other !== undefined) {
            fail(
              where,
              `port ${other} to ${cidr}: the control plane reaches addresses only at its database's port and the SMTP ports (${SMTP_PORTS.join(", ")})`,
            );
          }
        }
      }
    }
    if (isEgressTier && !(hasV4Internet && hasV6Internet)) {
      fail(where, "the proxies reach public addresses over IPv4 and IPv6");
    }
  }
}

/** The tiers' isolation and the pods' shape. */
export function checkTiers(docs: Manifest[], valuesName: string): void {
  const deployments = docs.filter((d) => d.kind === "Deployment");
  const controlPlane = deployments.find((d) => d.metadata.name.endsWith("-control-plane"));
  const egress = deployments.find((d) => d.metadata.name.endsWith("-egress"));
  if (!controlPlane || !egress) fail(valuesName, "expected two Deployments (control plane, egress)");
  const cpSecret = envOf(controlPlane, "DATABASE_URL")?.valueFrom?.secretKeyRef?.name;
  const egressSecret = envOf(egress, "EGRESS_REPLAY_DATABASE_URL")?.valueFrom?.secretKeyRef?.name;
  if (!egressSecret || egressSecret === cpSecret) {
    fail(valuesName, "the proxies' database credentials come from a Secret of their own");
  }
  // Each tier mounts only its own keys and certificate (DECISIONS "Faults and isolation"): the
  // proxies' key Secret holds the sealing keyring, which the control plane must never hold.
  const egressKeys = secretVolumeOf(egress, "keys");
  if (!egressKeys || egressKeys === secretVolumeOf(controlPlane, "keys")) {
    fail(valuesName, "the proxies' keys come from a Secret of their own");
  }
  const egressMtls = secretVolumeOf(egress, "mtls");
  if (!egressMtls || egressMtls === secretVolumeOf(controlPlane, "mtls")) {
    fail(valuesName, "the proxies' mTLS certificate comes from a Secret of its own");
  }
  // Nor any Secret of the other tier, whatever it holds (the control plane on the proxies' key
  // Secret would hold the sealing keyring; the proxies on the control plane's, its signing keys).
  const controlPlaneSecrets = secretsOf(controlPlane);
  for (const name of secretsOf(egress)) {
    if (controlPlaneSecrets.has(name)) {
      fail(
        valuesName,
        `both tiers mount or reference the Secret ${name}: each tier uses only Secrets of its own`,
      );
    }
  }
  if (!envOf(egress, "EGRESS_CLIENT_IDENTITY")?.value)
    fail(valuesName, "the proxies check the client's identity");
  for (const d of deployments) {
    const where = `${valuesName} Deployment ${d.metadata.name}`;
    const template = d.spec.template;
    checkPodSafety(template.spec, where);
    if (!template.metadata?.annotations?.["checksum/config"])
      fail(where, "a checksum annotation rolls the pods");
    const spread = (template.spec.topologySpreadConstraints ?? []).map(
      (c: { topologyKey: string }) => c.topologyKey,
    );
    if (!spread.includes("topology.kubernetes.io/zone")) fail(where, "spread over zones");
    const account = template.spec.serviceAccountName;
    if (account) {
      const sa = docs.find((x) => x.kind === "ServiceAccount" && x.metadata.name === account);
      if (!sa) fail(where, `its ServiceAccount ${account} is rendered`);
      if (sa.automountServiceAccountToken !== false) fail(where, "its ServiceAccount mounts no token");
    }
  }
  const identity = envOf(egress, "EGRESS_CLIENT_IDENTITY")?.value ?? "";
  const certificate = docs.find(
    (d) => d.kind === "Certificate" && d.metadata.name.endsWith("-control-plane-mtls"),
  );
  if (certificate) {
    const sans: string[] = [...(certificate.spec.dnsNames ?? []), ...(certificate.spec.uris ?? [])];
    if (!sans.includes(identity))
      fail(valuesName, "the control plane's certificate names EGRESS_CLIENT_IDENTITY");
  }
  const rule = docs.find((d) => d.kind === "PrometheusRule");
  if (rule) {
    const alerts = rule.spec.groups.flatMap((g: { rules: { alert: string }[] }) =>
      g.rules.map((r) => r.alert),
    );
    for (const name of ["LatchEgressNoReplicaServing", "LatchCallOutcomeUnknown", "LatchTicketRefusals"]) {
      if (!alerts.includes(name)) fail(valuesName, `the PrometheusRule has the alert ${name}`);
    }
  }
}

/**
 * A pod's safety: non-root (never UID 0), a read-only root filesystem, no privilege nor a way to
 * gain it, no capability, and an env that runs in
 * production with each name once (Kubernetes takes the last of two) and none of the development
 * knobs or Node TLS settings the tiers refuse in production.
 */
// biome-ignore lint/suspicious/noExplicitAny: a pod spec is whatever the chart rendered.
function checkPodSafety(pod: any, where: string): void {
  if (pod.securityContext?.runAsNonRoot !== true) fail(where, "pods run as non-root");
  if (pod.securityContext?.runAsUser === 0) fail(where, "pods never run as UID 0");
  for (const c of pod.containers ?? []) {
    const context = c.securityContext ?? {};
    if (context.readOnlyRootFilesystem !== true) fail(where, "read-only root filesystem");
    if (context.allowPrivilegeEscalation !== false) fail(where, "no privilege escalation");
    if (context.privileged === true) fail(where, "no privileged container");
    if (context.runAsUser === 0 || context.runAsNonRoot === false)
      fail(where, "containers never run as root");
    if (!(context.capabilities?.drop ?? []).includes("ALL")) fail(where, "containers drop every capability");
    if ((context.capabilities?.add ?? []).length > 0) fail(where, "containers add no capability");
    const names: string[] = (c.env ?? []).map((e: { name: string }) => e.name);
    const twice = names.find((name, i) => names.indexOf(name) !== i);
    if (twice) fail(where, `${twice} is set twice (Kubernetes takes the last)`);
    const nodeEnv = (c.env ?? []).find((e: { name: string }) => e.name === "NODE_ENV");
    if (nodeEnv?.value !== "production") fail(where, "NODE_ENV is production");
    const refused = names.find((name) => REFUSED_ENV.includes(name));
    if (refused) fail(where, `${refused} is refused in production`);
  }
}
