{{/*
The image of both workloads: repository:tag, the tag defaulting to the chart's
appVersion (what deploy/kustomization.yaml's `images:` sets).
*/}}
{{- define "kubegc.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}
