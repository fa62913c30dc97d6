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

{{/* The proxies' own database credentials: never the control plane's (DECISIONS "Faults and isolation"). */}}
{{- define "latch.egressDatabaseSecret" -}}
{{- if eq .Values.database.egressExistingSecret .Values.database.existingSecret -}}
{{- fail "database.egressExistingSecret must name a Secret of its own: the proxies connect as latch_egress, which may only touch egress_spent_tickets, never with the control plane's credentials" -}}
{{- end -}}
{{- .Values.database.egressExistingSecret -}}
{{- end -}}

{{/* The proxies' key files (the sealing keyring): never in the control plane's Secret, which would hand it the key that opens every stored secret. */}}
{{- define "latch.egressKeysSecret" -}}
{{- if eq .Values.keys.egressSecret .Values.keys.controlPlaneSecret -}}
{{- fail "keys.egressSecret must name a Secret of its own: it holds the sealing keyring, and the control plane never holds a key that opens a stored secret" -}}
{{- end -}}
{{- .Values.keys.egressSecret -}}
{{- end -}}

{{/* The proxies' mTLS identity: never the control plane's Secret, or either tier could act as the other. */}}
{{- define "latch.egressMtlsSecret" -}}
{{- if eq .Values.mtls.egressSecret .Values.mtls.controlPlaneSecret -}}
{{- fail "mtls.egressSecret must name a Secret of its own: each tier holds only its own certificate and key" -}}
{{- end -}}
{{- .Values.mtls.egressSecret -}}
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
