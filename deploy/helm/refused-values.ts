// The values the chart refuses to render, each over a valid base (examples/values-managed-postgres.yaml),
// with what `helm template` says: values.schema.json for a key it does not know, the templates'
// `fail` sentence for the rest. check-chart.ts (CI) and chart-template.test.ts run each one.

export interface RefusedValues {
  name: string;
  /** `helm template` arguments over the base values file. */
  args: string[];
  /** What the refusal says (helm's schema error or the template's sentence). */
  says: RegExp;
}

export const REFUSED_VALUES: RefusedValues[] = [
  { name: "a misspelt key", args: ["--set", "egress.replica=3"], says: /additional properties 'replica'/ },
  {
    name: "an unknown top-level key",
    args: ["--set", "egres.replicas=3"],
    says: /additional properties 'egres'/,
  },
  {
    name: "database.cidrs: null (a 5432 rule with no peers)",
    args: ["--set", "database.cidrs=null"],
    says: /set database\.cidrs/,
  },
  {
    name: "the database rule over 10.0.0.0/8",
    args: ["--set", "database.cidrs={10.0.0.0/8}"],
    says: /database\.cidrs: 10\.0\.0\.0\/8 is a network, not an address/,
  },
  {
    name: "the database rule over 0.0.0.0/0",
    args: ["--set", "database.cidrs={0.0.0.0/0}"],
    says: /database\.cidrs: 0\.0\.0\.0\/0 is a network/,
  },
  {
    name: "the control plane's mail to everywhere",
    args: ["--set", "smtp.cidrs={0.0.0.0/0}"],
    says: /smtp\.cidrs: 0\.0\.0\.0\/0 is a network/,
  },
  {
    name: "the SMTP relay over an IPv6 network",
    args: ["--set", "smtp.cidrs={fd00::/48}"],
    says: /smtp\.cidrs: fd00::\/48 is a network/,
  },
  {
    name: "the control plane's mail on ports that are not SMTP's",
    args: ["--set-json", "smtp.ports=[1,443,80]"],
    says: /smtp\.ports: 1 is not an SMTP port/,
  },
  {
    name: "the proxies' internet without its private ranges",
    args: ["--set-json", "networkPolicy.egressInternet.except=[]"],
    says: /networkPolicy\.egressInternet\.except must keep 0\.0\.0\.0\/8/,
  },
  {
    name: "the proxies' internet reaching cloud metadata",
    args: [
      "--set-json",
      'networkPolicy.egressInternet.except=["0.0.0.0/8","10.0.0.0/8","100.64.0.0/10","127.0.0.0/8"]',
    ],
    says: /egressInternet\.except must keep 169\.254\.0\.0\/16/,
  },
  {
    name: "the proxies' internet as another network",
    args: ["--set", "networkPolicy.egressInternet.cidr=10.0.0.0/8"],
    says: /networkPolicy\.egressInternet\.cidr is 10\.0\.0\.0\/8/,
  },
  {
    name: "IPv6 internet without its special ranges",
    args: ["--set-json", "networkPolicy.egressInternet.ipv6.except=[]"],
    says: /egressInternet\.ipv6\.except must keep 2001::\/23/,
  },
  {
    name: "no NetworkPolicies, unacknowledged",
    args: ["--set", "networkPolicy.enabled=false"],
    says: /set networkPolicy\.acknowledgeNoIsolation=true/,
  },
  {
    name: "DNS at any pod of kube-system",
    args: ["--set", "networkPolicy.clusterDns.podLabels=null"],
    says: /missing property 'podLabels'/,
  },
  {
    name: "the proxies on the control plane's database Secret",
    args: ["--set", "database.egressExistingSecret=latch-database"],
    says: /database\.egressExistingSecret and database\.existingSecret both name the Secret "latch-database"/,
  },
  {
    name: "the proxies on the control plane's key Secret",
    args: ["--set", "keys.egressSecret=latch-control-plane-keys"],
    says: /keys\.egressSecret and keys\.controlPlaneSecret both name the Secret "latch-control-plane-keys"/,
  },
  {
    name: "the proxies on the control plane's mTLS Secret",
    args: ["--set", "mtls.egressSecret=latch-control-plane-mtls"],
    says: /mtls\.egressSecret and mtls\.controlPlaneSecret both name the Secret "latch-control-plane-mtls"/,
  },
  {
    name: "the control plane mounting the proxies' key Secret as its mTLS Secret",
    args: ["--set", "mtls.controlPlaneSecret=latch-egress-keys"],
    says: /keys\.egressSecret and mtls\.controlPlaneSecret both name the Secret "latch-egress-keys"/,
  },
  {
    name: "the proxies mounting the control plane's key Secret as their mTLS Secret",
    args: ["--set", "mtls.egressSecret=latch-control-plane-keys"],
    says: /mtls\.egressSecret and keys\.controlPlaneSecret both name the Secret "latch-control-plane-keys"/,
  },
  {
    name: "the proxies' database credentials in the control plane's SMTP Secret",
    args: ["--set", "database.egressExistingSecret=latch-smtp"],
    says: /database\.egressExistingSecret and smtp\.existingSecret both name the Secret "latch-smtp"/,
  },
  { name: "no client identity", args: ["--set", "mtls.controlPlaneIdentity="], says: /controlPlaneIdentity/ },
  {
    name: "a development-mode proxy through extraEnv",
    args: [
      "--set-json",
      'egress.extraEnv=[{"name":"NODE_ENV","value":"development"},{"name":"EGRESS_ALLOW_CIDRS","value":"169.254.0.0/16"}]',
    ],
    says: /egress\.extraEnv\[0\] sets NODE_ENV, which the chart refuses/,
  },
  {
    name: "a development knob on the proxies",
    args: ["--set-json", 'egress.extraEnv=[{"name":"EGRESS_CONNECT_TO","value":"10.0.0.1:443"}]'],
    says: /egress\.extraEnv\[0\] sets EGRESS_CONNECT_TO, which the chart refuses/,
  },
  {
    name: "the control plane in development mode through extraEnv",
    args: ["--set-json", 'controlPlane.extraEnv=[{"name":"NODE_ENV","value":"development"}]'],
    says: /controlPlane\.extraEnv\[0\] sets NODE_ENV, which the chart refuses/,
  },
  {
    name: "certificate checks off on the control plane",
    args: ["--set-json", 'controlPlane.extraEnv=[{"name":"NODE_TLS_REJECT_UNAUTHORIZED","value":"0"}]'],
    says: /controlPlane\.extraEnv\[0\] sets NODE_TLS_REJECT_UNAUTHORIZED, which the chart refuses/,
  },
  {
    name: "another trust store on the proxies",
    args: [
      "--set-json",
      'egress.extraEnv=[{"name":"LOG_FORMAT","value":"json"},{"name":"NODE_OPTIONS","value":"--use-openssl-ca"}]',
    ],
    says: /egress\.extraEnv\[1\] sets NODE_OPTIONS, which the chart refuses/,
  },
  {
    name: "the sealing keyring in the control plane's env through extraEnv",
    args: [
      "--set-json",
      'controlPlane.extraEnv=[{"name":"SEALING","valueFrom":{"secretKeyRef":{"name":"latch-egress-keys","key":"sealing-keys.json"}}}]',
    ],
    says: /controlPlane\.extraEnv\[0\] takes SEALING from the Secret "latch-egress-keys", which keys\.egressSecret names/,
  },
  {
    name: "the control plane's database owner in the proxies' env through extraEnv",
    args: [
      "--set-json",
      'egress.extraEnv=[{"name":"LOG_FORMAT","value":"json"},{"name":"OWNER_URL","valueFrom":{"secretKeyRef":{"name":"latch-database","key":"url"}}}]',
    ],
    says: /egress\.extraEnv\[1\] takes OWNER_URL from the Secret "latch-database", which database\.existingSecret names/,
  },
  {
    name: "the chart's inter-tier CA key in a tier's env through extraEnv",
    args: [
      "--set",
      "mtls.certManager.enabled=true",
      "--set-json",
      'controlPlane.extraEnv=[{"name":"CA_KEY","valueFrom":{"secretKeyRef":{"name":"latch-ca","key":"tls.key"}}}]',
    ],
    says: /controlPlane\.extraEnv\[0\] takes CA_KEY from the Secret "latch-ca", the inter-tier CA's/,
  },
  {
    name: "a second definition of a variable the chart sets",
    args: ["--set-json", 'egress.extraEnv=[{"name":"EGRESS_CLIENT_IDENTITY","value":"anyone"}]'],
    says: /egress\.extraEnv\[0\] sets EGRESS_CLIENT_IDENTITY, which the chart sets itself/,
  },
  {
    name: "a privileged container",
    args: ["--set", "securityContext.privileged=true"],
    says: /securityContext\.privileged must be false or unset/,
  },
  {
    name: "a root pod",
    args: ["--set", "podSecurityContext.runAsUser=0"],
    says: /podSecurityContext\.runAsUser must not be 0/,
  },
  {
    name: "a pod that may run as root",
    args: ["--set", "podSecurityContext.runAsNonRoot=false"],
    says: /podSecurityContext\.runAsNonRoot must be true/,
  },
  {
    name: "privilege escalation",
    args: ["--set", "securityContext.allowPrivilegeEscalation=true"],
    says: /securityContext\.allowPrivilegeEscalation must be false/,
  },
  {
    name: "a writable root filesystem",
    args: ["--set", "securityContext.readOnlyRootFilesystem=false"],
    says: /securityContext\.readOnlyRootFilesystem must be true/,
  },
  {
    name: "an added capability",
    args: ["--set-json", 'securityContext.capabilities={"drop":["ALL"],"add":["NET_ADMIN"]}'],
    says: /securityContext\.capabilities\.add must be empty/,
  },
  {
    name: "capabilities kept",
    args: ["--set-json", 'securityContext.capabilities={"drop":[]}'],
    says: /securityContext\.capabilities\.drop must include ALL/,
  },
  {
    name: "no seccomp profile",
    args: ["--set", "podSecurityContext.seccompProfile.type=Unconfined"],
    says: /podSecurityContext\.seccompProfile\.type must be RuntimeDefault or Localhost/,
  },
  {
    name: "SELinux options (a super-privileged type)",
    args: ["--set", "podSecurityContext.seLinuxOptions.type=spc_t"],
    says: /additional properties 'seLinuxOptions'/,
  },
];
