{{/* Names, labels and images shared by every template. */}}
{{- define "latch.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "latch.controlPlane.name" -}}{{ include "latch.fullname" . }}-control-plane{{- end -}}
{{- define "latch.egress.name" -}}{{ include "latch.fullname" . }}-egress{{- end -}}

{{- define "latch.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "latch.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "latch.image" -}}
{{- $tag := .root.Values.image.tag | default .root.Chart.AppVersion -}}
{{- printf "%s%s:%s" .root.Values.image.registry .repository $tag -}}
{{- end -}}

{{/* The egress Service's in-cluster name: what the control plane dials and the proxy's certificate names. */}}
{{- define "latch.egress.host" -}}
{{- printf "%s.%s.svc.cluster.local" (include "latch.egress.name" .) .Release.Namespace -}}
{{- end -}}

{{/*
Each tier mounts and references only Secrets of its own (DECISIONS "Faults and isolation"): the
proxies' hold the sealing keyring and the latch_egress credentials, the control plane's its signing
keys, KEK and database credentials. Any Secret of one tier named by the other is refused, whatever
kind it holds (the control plane on the proxies' key Secret would hold the key that opens every
stored secret).
*/}}
{{- define "latch.tierSecrets" -}}
{{- $controlPlane := dict "database.existingSecret" .Values.database.existingSecret "smtp.existingSecret" .Values.smtp.existingSecret "keys.controlPlaneSecret" .Values.keys.controlPlaneSecret "mtls.controlPlaneSecret" .Values.mtls.controlPlaneSecret -}}
{{- $egress := dict "database.egressExistingSecret" .Values.database.egressExistingSecret "keys.egressSecret" .Values.keys.egressSecret "mtls.egressSecret" .Values.mtls.egressSecret -}}
{{- dict "controlPlane" $controlPlane "egress" $egress | toJson -}}
{{- end -}}

{{- define "latch.tierSecretsApart" -}}
{{- $secrets := include "latch.tierSecrets" . | fromJson -}}
{{- $controlPlane := $secrets.controlPlane -}}
{{- $egress := $secrets.egress -}}
{{- range $egressKey, $egressName := $egress -}}
{{- range $controlPlaneKey, $controlPlaneName := $controlPlane -}}
{{- if eq (toString $egressName) (toString $controlPlaneName) -}}
{{- fail (printf "%s and %s both name the Secret %q: each tier mounts and references only Secrets of its own (the proxies' hold the sealing keyring and the latch_egress credentials, the control plane's its signing keys, KEK and database credentials)" $egressKey $controlPlaneKey (toString $egressName)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The proxies' Secrets (database credentials, keys, mTLS), each only once latch.tierSecretsApart holds. */}}
{{- define "latch.egressDatabaseSecret" -}}
{{- include "latch.tierSecretsApart" . -}}
{{- .Values.database.egressExistingSecret -}}
{{- end -}}

{{- define "latch.egressKeysSecret" -}}
{{- include "latch.tierSecretsApart" . -}}
{{- .Values.keys.egressSecret -}}
{{- end -}}

{{- define "latch.egressMtlsSecret" -}}
{{- include "latch.tierSecretsApart" . -}}
{{- .Values.mtls.egressSecret -}}
{{- end -}}

{{/*
The variables extraEnv may never set, on either tier: NODE_ENV (production switches on every
refusal below), the proxy's development knobs (egress-proxy/src/config.ts DEV_KNOBS) and the Node
settings that change which certificates are trusted or turn their checks off (its
findTlsOverrides; the control plane's config.ts refuses NODE_TLS_REJECT_UNAUTHORIZED too), with
SSL_CERT_FILE and SSL_CERT_DIR, the store those settings would read.
*/}}
{{- define "latch.refusedExtraEnv" -}}
{{- list "NODE_ENV" "EGRESS_CONNECT_TO" "EGRESS_ALLOW_CIDRS" "EGRESS_EXTRA_CA" "NODE_TLS_REJECT_UNAUTHORIZED" "NODE_OPTIONS" "NODE_EXTRA_CA_CERTS" "NODE_USE_SYSTEM_CA" "OPENSSL_CONF" "SSL_CERT_FILE" "SSL_CERT_DIR" | toJson -}}
{{- end -}}

{{/*
A tier's env: the chart's own list, then extraEnv. Kubernetes takes the last definition of a name,
so extraEnv may neither set a refused variable nor one the chart sets itself (change the chart's
value instead), and it takes no value from a Secret of the other tier (latch.tierSecretsApart) or
from the inter-tier CA's Secret the chart makes (its private key mints any identity). Called with
(dict "root" . "tier" "egress" "values" "egress.extraEnv" "chartEnv" (the chart's list, rendered)
"extraEnv" (the list)).
*/}}
{{- define "latch.env" -}}
{{- $refused := include "latch.refusedExtraEnv" .root | fromJsonArray -}}
{{- $tierSecrets := include "latch.tierSecrets" .root | fromJson -}}
{{- $otherSecrets := get $tierSecrets (ternary "controlPlane" "egress" (eq .tier "egress")) -}}
{{- $caSecret := "" -}}
{{- if and .root.Values.mtls.certManager.enabled (not .root.Values.mtls.certManager.issuerRef.name) -}}
{{- $caSecret = printf "%s-ca" (include "latch.fullname" .root) -}}
{{- end -}}
{{- $chartEnv := .chartEnv | fromYamlArray -}}
{{- $chartNames := list -}}
{{- range $chartEnv -}}
{{- $chartNames = append $chartNames .name -}}
{{- end -}}
{{- $values := .values -}}
{{- range $i, $entry := .extraEnv -}}
{{- $name := "" -}}
{{- if kindIs "map" $entry -}}
{{- $name = toString (get $entry "name") -}}
{{- end -}}
{{- if not $name -}}
{{- fail (printf "%s[%d] has no name: each entry is { name: VARIABLE, value: ... } or { name: VARIABLE, valueFrom: ... }" $values $i) -}}
{{- else if has $name $refused -}}
{{- fail (printf "%s[%d] sets %s, which the chart refuses: NODE_ENV stays production, and neither tier takes a development knob or a setting that changes which certificates are trusted" $values $i $name) -}}
{{- else if has $name $chartNames -}}
{{- fail (printf "%s[%d] sets %s, which the chart sets itself: change the chart's value for it instead (Kubernetes would silently take the second definition)" $values $i $name) -}}
{{- end -}}
{{- $secretRef := dig "valueFrom" "secretKeyRef" "name" "" $entry | toString -}}
{{- if $secretRef -}}
{{- range $otherKey, $otherName := $otherSecrets -}}
{{- if eq $secretRef (toString $otherName) -}}
{{- fail (printf "%s[%d] takes %s from the Secret %q, which %s names: each tier mounts and references only Secrets of its own (the proxies' hold the sealing keyring and the latch_egress credentials, the control plane's its signing keys, KEK and database credentials)" $values $i $name $secretRef $otherKey) -}}
{{- end -}}
{{- end -}}
{{- if eq $secretRef $caSecret -}}
{{- fail (printf "%s[%d] takes %s from the Secret %q, the inter-tier CA's: its private key would mint a certificate for any identity, so neither tier references it" $values $i $name $secretRef) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- .chartEnv -}}
{{- with .extraEnv }}
{{ toYaml . }}
{{- end -}}
{{- end -}}

{{/*
The pods' security context, rendered only when its safety fields hold: non-root (never UID 0), a
seccomp (and any AppArmor) profile of the runtime's or the node's, never Unconfined. values.schema.json refuses the
fields that could loosen it otherwise (SELinux options, sysctls, Windows options).
*/}}
{{- define "latch.podSecurityContext" -}}
{{- $pod := .Values.podSecurityContext -}}
{{- if ne (toString (get $pod "runAsNonRoot")) "true" -}}
{{- fail "podSecurityContext.runAsNonRoot must be true: neither tier runs as root" -}}
{{- end -}}
{{- if and (hasKey $pod "runAsUser") (eq (toString (get $pod "runAsUser")) "0") -}}
{{- fail "podSecurityContext.runAsUser must not be 0 (root): the images run as 65532" -}}
{{- end -}}
{{- $seccomp := get $pod "seccompProfile" | default dict -}}
{{- if not (has (get $seccomp "type") (list "RuntimeDefault" "Localhost")) -}}
{{- fail "podSecurityContext.seccompProfile.type must be RuntimeDefault or Localhost: the pods never run Unconfined" -}}
{{- end -}}
{{- with get $pod "appArmorProfile" -}}
{{- if not (has (get . "type") (list "RuntimeDefault" "Localhost")) -}}
{{- fail "podSecurityContext.appArmorProfile.type must be RuntimeDefault or Localhost: the pods never run Unconfined" -}}
{{- end -}}
{{- end -}}
{{- toYaml $pod -}}
{{- end -}}

{{/*
The containers' security context, rendered only when its safety fields hold: no privilege and no
way to gain it, a read-only root filesystem, every capability dropped and none added.
*/}}
{{- define "latch.securityContext" -}}
{{- $container := .Values.securityContext -}}
{{- if ne (toString (get $container "allowPrivilegeEscalation")) "false" -}}
{{- fail "securityContext.allowPrivilegeEscalation must be false: neither tier gains privileges" -}}
{{- end -}}
{{- if ne (toString (get $container "readOnlyRootFilesystem")) "true" -}}
{{- fail "securityContext.readOnlyRootFilesystem must be true: both tiers write only to their emptyDir volumes" -}}
{{- end -}}
{{- if and (hasKey $container "privileged") (ne (toString (get $container "privileged")) "false") -}}
{{- fail "securityContext.privileged must be false or unset: neither tier runs a privileged container" -}}
{{- end -}}
{{- $capabilities := get $container "capabilities" | default dict -}}
{{- if not (has "ALL" (get $capabilities "drop" | default list)) -}}
{{- fail "securityContext.capabilities.drop must include ALL: neither tier needs a Linux capability" -}}
{{- end -}}
{{- if get $capabilities "add" -}}
{{- fail "securityContext.capabilities.add must be empty: neither tier needs a Linux capability" -}}
{{- end -}}
{{- if and (hasKey $container "runAsNonRoot") (ne (toString (get $container "runAsNonRoot")) "true") -}}
{{- fail "securityContext.runAsNonRoot must be true or unset: neither tier runs as root" -}}
{{- end -}}
{{- if and (hasKey $container "runAsUser") (eq (toString (get $container "runAsUser")) "0") -}}
{{- fail "securityContext.runAsUser must not be 0 (root): the images run as 65532" -}}
{{- end -}}
{{- with get $container "seccompProfile" -}}
{{- if not (has (get . "type") (list "RuntimeDefault" "Localhost")) -}}
{{- fail "securityContext.seccompProfile.type must be RuntimeDefault or Localhost: the containers never run Unconfined" -}}
{{- end -}}
{{- end -}}
{{- with get $container "appArmorProfile" -}}
{{- if not (has (get . "type") (list "RuntimeDefault" "Localhost")) -}}
{{- fail "securityContext.appArmorProfile.type must be RuntimeDefault or Localhost: the containers never run Unconfined" -}}
{{- end -}}
{{- end -}}
{{- toYaml $container -}}
{{- end -}}

{{/*
The ranges the proxies' internet rules must except (chart-rules.ts checks the same lists): private,
shared, loopback, link-local (cloud metadata), documentation, benchmarking, multicast, reserved; in
2000::/3, the IETF protocol assignments, documentation, 6to4 and 3fff::/20.
*/}}
{{- define "latch.specialRangesV4" -}}
{{- list "0.0.0.0/8" "10.0.0.0/8" "100.64.0.0/10" "127.0.0.0/8" "169.254.0.0/16" "172.16.0.0/12" "192.0.0.0/24" "192.0.2.0/24" "192.88.99.0/24" "192.168.0.0/16" "198.18.0.0/15" "198.51.100.0/24" "203.0.113.0/24" "224.0.0.0/4" "240.0.0.0/4" | toJson -}}
{{- end -}}
{{- define "latch.specialRangesV6" -}}
{{- list "2001::/23" "2001:db8::/32" "2002::/16" "3fff::/20" | toJson -}}
{{- end -}}

{{/* DNS at the cluster DNS pods only (their namespace and their labels together), never at any pod of kube-system. */}}
{{- define "latch.clusterDnsRule" -}}
- to:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: {{ .Values.networkPolicy.clusterDns.namespace }}
      podSelector:
        matchLabels:
          {{- toYaml .Values.networkPolicy.clusterDns.podLabels | nindent 10 }}
  ports:
    - { port: 53, protocol: UDP }
    - { port: 53, protocol: TCP }
{{- end -}}

{{/* A checksum of the values a tier's pods are built from: a change rolls them even when no env value moved. */}}
{{- define "latch.configChecksum" -}}
{{- dict "tier" .tier "database" .root.Values.database "keys" .root.Values.keys "mtls" .root.Values.mtls "image" .root.Values.image | toJson | sha256sum -}}
{{- end -}}
