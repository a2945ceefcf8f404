{{/* Shared by both charts: charts/shared-templates, copied here by `make generate`; edit it there. */}}
{{/* The release's full name: the release name when it already names the chart. */}}
{{- define "fedbr.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "fedbr.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "fedbr.labels" -}}
{{ include "fedbr.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "fedbr.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "fedbr.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{ .Values.serviceAccount.name | default (include "fedbr.fullname" .) }}
{{- else -}}
{{ .Values.serviceAccount.name | default "default" }}
{{- end -}}
{{- end -}}

{{/* ClusterRoles from a file of config/rbac (copied by make generate), with the chart's labels. */}}
{{- define "fedbr.clusterRoles" -}}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" ($.ctx.Files.Get $.file) -1 }}
{{- $role := fromYaml $doc }}
{{- if $role }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $role.metadata.name }}
  labels:
    {{- include "fedbr.labels" $.ctx | nindent 4 }}
rules:
  {{- toYaml $role.rules | nindent 2 }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Annotations of a service account: annotations, plus IRSA's for roleArn when set. */}}
{{- define "fedbr.serviceAccountAnnotations" -}}
{{- $a := deepCopy (.annotations | default dict) -}}
{{- with .roleArn }}{{ $_ := set $a "eks.amazonaws.com/role-arn" . }}{{ end -}}
{{- with $a }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
