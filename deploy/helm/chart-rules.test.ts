// Each NetworkPolicy and isolation problem of issue 20 is caught by the chart's rules: a rule with
// no peers, the proxies without IPv6 or its special ranges, DNS at any pod of a namespace or at an
// unconfigured resolver, the database over a whole network, the control plane reaching
// everywhere, the proxies on the control plane's database credentials, keys or mTLS Secret, no zone
// spread, no alerts; and (issue H26) the control plane at ports that are neither its database's nor
// SMTP's, either tier on any Secret of the other, a root, privileged or capable container, a pod out
// of production mode or with a variable set twice or a refused development knob.
import { describe, expect, it } from "vitest";
import {
  ChartRuleError,
  checkNetworkPolicies,
  checkTiers,
  type Manifest,
  PRIVATE_V4,
  SPECIAL_V6,
} from "./chart-rules.ts";

const dnsPods = {
  namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "kube-system" } },
  podSelector: { matchLabels: { "k8s-app": "kube-dns" } },
};
const dnsRule = (peer: object = dnsPods) => ({
  to: [peer],
  ports: [{ port: 53 }, { port: 53, protocol: "TCP" }],
});

/** The key and mTLS Secrets a tier mounts, each its own. */
const secretVolumes = (tier: string) => [
  { name: "keys", secret: { secretName: `latch-${tier}-keys` } },
  { name: "mtls", secret: { secretName: `latch-${tier}-mtls` } },
];

function deployment(name: string, env: object[], volumes: object[]): Manifest {
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name },
    spec: {
      template: {
        metadata: { annotations: { "checksum/config": "abc" } },
        spec: {
          serviceAccountName: name,
          securityContext: { runAsNonRoot: true, runAsUser: 65532 },
          topologySpreadConstraints: [{ topologyKey: "topology.kubernetes.io/zone" }],
          containers: [
            {
              env: [{ name: "NODE_ENV", value: "production" }, ...env],
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                capabilities: { drop: ["ALL"] },
              },
            },
          ],
          volumes,
        },
      },
    },
  };
}

function valid(): Manifest[] {
  return [
    deployment(
      "latch-control-plane",
      [{ name: "DATABASE_URL", valueFrom: { secretKeyRef: { name: "latch-database" } } }],
      secretVolumes("control-plane"),
    ),
    deployment(
      "latch-egress",
      [
        { name: "EGRESS_LISTEN", value: "0.0.0.0:50051" },
        { name: "EGRESS_CLIENT_IDENTITY", value: "latch-control-plane" },
        {
          name: "EGRESS_REPLAY_DATABASE_URL",
          valueFrom: { secretKeyRef: { name: "latch-egress-database" } },
        },
      ],
      secretVolumes("egress"),
    ),
    {
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: { name: "latch-control-plane" },
      automountServiceAccountToken: false,
    },
    {
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: { name: "latch-egress" },
      automountServiceAccountToken: false,
    },
    {
      apiVersion: "networking.k8s.io/v1",
      kind: "NetworkPolicy",
      metadata: { name: "latch-control-plane" },
      spec: {
        policyTypes: ["Ingress", "Egress"],
        egress: [
          { to: [{ podSelector: { matchLabels: { component: "egress" } } }], ports: [{ port: 50051 }] },
          { to: [{ ipBlock: { cidr: "10.20.0.5/32" } }], ports: [{ port: 5432 }] },
          { to: [{ ipBlock: { cidr: "10.20.0.25/32" } }], ports: [{ port: 587 }] },
          dnsRule(),
        ],
      },
    },
    {
      apiVersion: "networking.k8s.io/v1",
      kind: "NetworkPolicy",
      metadata: { name: "latch-egress" },
      spec: {
        policyTypes: ["Ingress", "Egress"],
        egress: [
          {
            to: [
              {
                ipBlock: { cidr: "0.0.0.0/0", except: [...PRIVATE_V4] },
              },
              { ipBlock: { cidr: "2000::/3", except: [...SPECIAL_V6] } },
            ],
            ports: [{ port: 443 }],
          },
          { to: [{ ipBlock: { cidr: "10.20.0.5/32" } }], ports: [{ port: 5432 }] },
          dnsRule(),
        ],
      },
    },
  ];
}

/** The valid set with one change; the refusal the rules give (or "accepted"). */
function verdict(change: (docs: Manifest[]) => void): string {
  const docs = structuredClone(valid());
  change(docs);
  try {
    checkNetworkPolicies(docs, "test");
    checkTiers(docs, "test");
    return "accepted";
  } catch (error) {
    if (!(error instanceof ChartRuleError)) throw error;
    return error.message;
  }
}
const policy = (docs: Manifest[], tier: string) =>
  docs.find((d) => d.kind === "NetworkPolicy" && d.metadata.name === `latch-${tier}`)!;
const env = (docs: Manifest[], tier: string) =>
  docs.find((d) => d.kind === "Deployment" && d.metadata.name === `latch-${tier}`)!.spec.template.spec
    .containers[0].env as { name: string; value?: string; valueFrom?: object }[];

const envVar = (docs: Manifest[], tier: string, name: string) =>
  env(docs, tier).find((e) => e.name === name)!;
const pod = (docs: Manifest[], tier: string) =>
  docs.find((d) => d.kind === "Deployment" && d.metadata.name === `latch-${tier}`)!.spec.template.spec;

describe("the chart's rules", () => {
  it("accept the chart's own shape", () => {
    expect(verdict(() => {})).toBe("accepted");
  });

  it("refuse a rule without `to:` (every destination) and an empty one", () => {
    expect(verdict((d) => delete policy(d, "egress").spec.egress[1].to)).toMatch(/names its peers/);
    expect(verdict((d) => (policy(d, "control-plane").spec.egress[1].to = []))).toMatch(/names its peers/);
  });

  it("refuse proxies without IPv6, or without its special ranges excepted", () => {
    expect(verdict((d) => policy(d, "egress").spec.egress[0].to.pop())).toMatch(/IPv4 and IPv6/);
    expect(verdict((d) => (policy(d, "egress").spec.egress[0].to[1].ipBlock.except = ["2002::/16"]))).toMatch(
      /excepts 2001::\/23/,
    );
    expect(
      verdict((d) => {
        const block = policy(d, "egress").spec.egress[0].to[0].ipBlock;
        block.except = block.except.filter((range: string) => range !== "169.254.0.0/16");
      }),
    ).toMatch(/excepts 169.254.0.0\/16/);
  });

  it("refuse DNS at any pod of a namespace, at a range, or where the proxies were not told to ask", () => {
    expect(
      verdict(
        (d) =>
          (policy(d, "egress").spec.egress[2] = dnsRule({ namespaceSelector: dnsPods.namespaceSelector })),
      ),
    ).toMatch(/cluster DNS pods/);
    expect(
      verdict(
        (d) => (policy(d, "control-plane").spec.egress[3] = dnsRule({ ipBlock: { cidr: "10.0.0.0/8" } })),
      ),
    ).toMatch(/single resolver/);
    expect(
      verdict((d) => (policy(d, "egress").spec.egress[2] = dnsRule({ ipBlock: { cidr: "10.20.0.2/32" } }))),
    ).toMatch(/not one of egress.dnsServers/);
    // With resolvers configured, only those: the cluster DNS pods are refused, the resolver accepted.
    expect(verdict((d) => env(d, "egress").push({ name: "EGRESS_DNS_SERVERS", value: "10.20.0.2" }))).toMatch(
      /only at those resolvers/,
    );
    expect(
      verdict((d) => {
        env(d, "egress").push({ name: "EGRESS_DNS_SERVERS", value: "10.20.0.2:53" });
        policy(d, "egress").spec.egress[2] = dnsRule({ ipBlock: { cidr: "10.20.0.2/32" } });
      }),
    ).toBe("accepted");
  });

  it("refuse the database over a whole network, and the control plane reaching everywhere", () => {
    expect(verdict((d) => (policy(d, "egress").spec.egress[1].to[0].ipBlock.cidr = "10.0.0.0/8"))).toMatch(
      /address, not a network/,
    );
    expect(
      verdict((d) => (policy(d, "control-plane").spec.egress[2].to[0].ipBlock.cidr = "0.0.0.0/0")),
    ).toMatch(/address, not a network/);
    expect(
      verdict((d) =>
        policy(d, "control-plane").spec.egress.push({
          to: [{ namespaceSelector: {} }],
          ports: [{ port: 443 }],
        }),
      ),
    ).toMatch(/egress Service's port/);
  });

  it("refuse the proxies on the control plane's database credentials, or with no client identity", () => {
    expect(
      verdict(
        (d) =>
          (envVar(d, "egress", "EGRESS_REPLAY_DATABASE_URL").valueFrom = {
            secretKeyRef: { name: "latch-database" },
          }),
      ),
    ).toMatch(/Secret of their own/);
    expect(
      verdict((d) =>
        env(d, "egress").splice(env(d, "egress").indexOf(envVar(d, "egress", "EGRESS_CLIENT_IDENTITY")), 1),
      ),
    ).toMatch(/client's identity/);
  });

  it("refuse the proxies mounting the control plane's key or mTLS Secret", () => {
    const volumes = (d: Manifest[], tier: string) =>
      d.find((x) => x.kind === "Deployment" && x.metadata.name === `latch-${tier}`)!.spec.template.spec
        .volumes as { name: string; secret: { secretName: string } }[];
    expect(verdict((d) => (volumes(d, "egress")[0]!.secret.secretName = "latch-control-plane-keys"))).toMatch(
      /keys come from a Secret of their own/,
    );
    expect(verdict((d) => (volumes(d, "egress")[1]!.secret.secretName = "latch-control-plane-mtls"))).toMatch(
      /mTLS certificate comes from a Secret of its own/,
    );
    expect(verdict((d) => volumes(d, "egress").splice(0, 1))).toMatch(/keys come from a Secret/);
  });

  it("refuse pods without a checksum, a zone spread, or with a token-mounting ServiceAccount", () => {
    const template = (d: Manifest[]) => d.find((x) => x.kind === "Deployment")!.spec.template;
    expect(verdict((d) => (template(d).metadata.annotations = {}))).toMatch(/checksum/);
    expect(verdict((d) => (template(d).spec.topologySpreadConstraints = []))).toMatch(/zones/);
    expect(
      verdict((d) => (d.find((x) => x.kind === "ServiceAccount")!.automountServiceAccountToken = true)),
    ).toMatch(/mounts no token/);
  });

  it("refuse the control plane reaching an address on a port that is neither its database's nor SMTP's", () => {
    expect(
      verdict((d) => (policy(d, "control-plane").spec.egress[2].ports = [{ port: 1 }, { port: 443 }])),
    ).toMatch(/port 1 to 10.20.0.25\/32: the control plane reaches addresses only at its database's port/);
    expect(
      verdict((d) => (policy(d, "control-plane").spec.egress[2].ports = [{ port: 465 }, { port: 2525 }])),
    ).toBe("accepted");
  });

  it("refuse either tier on a Secret of the other, whatever it holds", () => {
    // The control plane's mTLS volume on the proxies' key Secret (the sealing keyring).
    expect(
      verdict((d) => (pod(d, "control-plane").volumes[1].secret.secretName = "latch-egress-keys")),
    ).toMatch(/both tiers mount or reference the Secret latch-egress-keys/);
    // The proxies' database credentials from the control plane's key Secret.
    expect(
      verdict(
        (d) =>
          (envVar(d, "egress", "EGRESS_REPLAY_DATABASE_URL").valueFrom = {
            secretKeyRef: { name: "latch-control-plane-keys" },
          }),
      ),
    ).toMatch(/both tiers mount or reference the Secret latch-control-plane-keys/);
  });

  it("refuse a root, privileged or capable container", () => {
    expect(verdict((d) => (pod(d, "egress").securityContext.runAsUser = 0))).toMatch(/UID 0/);
    expect(verdict((d) => (pod(d, "egress").securityContext.runAsNonRoot = false))).toMatch(/non-root/);
    const container = (d: Manifest[]) => pod(d, "control-plane").containers[0].securityContext;
    expect(verdict((d) => (container(d).privileged = true))).toMatch(/no privileged container/);
    expect(verdict((d) => (container(d).allowPrivilegeEscalation = true))).toMatch(/no privilege escalation/);
    expect(verdict((d) => delete container(d).readOnlyRootFilesystem)).toMatch(/read-only root/);
    expect(verdict((d) => (container(d).capabilities = { drop: [] }))).toMatch(/drop every capability/);
    expect(verdict((d) => (container(d).capabilities.add = ["NET_ADMIN"]))).toMatch(/add no capability/);
    expect(verdict((d) => (container(d).runAsUser = 0))).toMatch(/never run as root/);
  });

  it("refuse a pod out of production mode, a variable set twice, or a refused development knob", () => {
    expect(verdict((d) => (envVar(d, "egress", "NODE_ENV").value = "development"))).toMatch(
      /NODE_ENV is production/,
    );
    expect(verdict((d) => env(d, "egress").push({ name: "NODE_ENV", value: "development" }))).toMatch(
      /NODE_ENV is set twice/,
    );
    expect(
      verdict((d) => env(d, "egress").push({ name: "EGRESS_ALLOW_CIDRS", value: "169.254.0.0/16" })),
    ).toMatch(/EGRESS_ALLOW_CIDRS is refused in production/);
    expect(
      verdict((d) => env(d, "control-plane").push({ name: "NODE_TLS_REJECT_UNAUTHORIZED", value: "0" })),
    ).toMatch(/NODE_TLS_REJECT_UNAUTHORIZED is refused in production/);
  });

  it("refuse alerts that miss one of the named ones", () => {
    expect(
      verdict((d) =>
        d.push({
          apiVersion: "monitoring.coreos.com/v1",
          kind: "PrometheusRule",
          metadata: { name: "latch" },
          spec: { groups: [{ rules: [{ alert: "LatchEgressNoReplicaServing" }] }] },
        }),
      ),
    ).toMatch(/LatchCallOutcomeUnknown/);
  });
});
