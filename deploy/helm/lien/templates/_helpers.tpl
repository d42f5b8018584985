{{/* Helm's standard labels, added to every object's own labels (not to the pod template's:
     a new chart version must not restart Lien by itself). */}}
{{- define "lien.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
