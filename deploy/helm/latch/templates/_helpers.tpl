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

{{- define "latch.egressDatabaseSecret" -}}
{{- .Values.database.egressExistingSecret | default .Values.database.existingSecret -}}
{{- end -}}
