// Each NetworkPolicy and isolation problem of issue 20 is caught by the chart's rules: a rule with
// no peers, the proxies without IPv6 or its special ranges, DNS at any pod of a namespace or at an
// unconfigured resolver, the database over a whole network, the control plane reaching
// everywhere, the proxies on the control plane's database credentials, keys or mTLS Secret, no zone
// spread, no alerts.
import { describe, expect, it } from "vitest";
import { ChartRuleError, checkNetworkPolicies, checkTiers, type Manifest } from "./chart-rules.ts";

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
          topologySpreadConstraints: [{ topologyKey: "topology.kubernetes.io/zone" }],
          containers: [{ env }],
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
                ipBlock: {
                  cidr: "0.0.0.0/0",
                  except: [
                    "10.0.0.0/8",
                    "172.16.0.0/12",
                    "192.168.0.0/16",
                    "169.254.0.0/16",
                    "100.64.0.0/10",
                    "127.0.0.0/8",
                  ],
                },
              },
              { ipBlock: { cidr: "2000::/3", except: ["2001::/23", "2001:db8::/32", "2002::/16"] } },
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
    expect(verdict((d) => policy(d, "egress").spec.egress[0].to[0].ipBlock.except.shift())).toMatch(
      /excepts 10.0.0.0\/8/,
    );
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
      verdict((d) => (env(d, "egress")[2]!.valueFrom = { secretKeyRef: { name: "latch-database" } })),
    ).toMatch(/Secret of their own/);
    expect(verdict((d) => env(d, "egress").splice(1, 1))).toMatch(/client's identity/);
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
