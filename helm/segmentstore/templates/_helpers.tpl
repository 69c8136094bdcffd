{{/*
Names and labels, in the conventions of the common charts: a name, a full name that carries
the release, and the app.kubernetes.io/* labels on every resource.
*/}}

{{- define "segmentstore.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "segmentstore.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The headless Service: one DNS name per pod, <pod>.<this>.<namespace>.svc */}}
{{- define "segmentstore.headlessName" -}}
{{- printf "%s-headless" (include "segmentstore.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "segmentstore.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* What selects this release's pods; never changes across upgrades. */}}
{{- define "segmentstore.selectorLabels" -}}
app.kubernetes.io/name: {{ include "segmentstore.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "segmentstore.labels" -}}
helm.sh/chart: {{ include "segmentstore.chart" . }}
{{ include "segmentstore.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: segmentstore
app.kubernetes.io/part-of: segmentstore
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "segmentstore.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "segmentstore.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "segmentstore.image" -}}
{{- $repository := printf "%s/%s" .Values.image.registry .Values.image.repository | trimPrefix "/" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Where the settings file is mounted, and its name in the ConfigMap. */}}
{{- define "segmentstore.configDir" -}}/etc/segmentstore{{- end -}}
{{- define "segmentstore.configFile" -}}segmentstore.yaml{{- end -}}

{{/* The Secret that holds the auth tokens: an existing one, or the chart's own. */}}
{{- define "segmentstore.authSecretName" -}}
{{- default (printf "%s-auth" (include "segmentstore.fullname" .)) .Values.auth.existingSecret -}}
{{- end -}}
{{- define "segmentstore.authEnabled" -}}
{{- if or .Values.auth.existingSecret .Values.auth.tokens }}true{{ end -}}
{{- end -}}

{{/* The Secret that holds the S3 keys: an existing one, or the chart's own. */}}
{{- define "segmentstore.tier2SecretName" -}}
{{- default (printf "%s-tier2" (include "segmentstore.fullname" .)) .Values.tier2Credentials.existingSecret -}}
{{- end -}}
{{- define "segmentstore.tier2CredentialsEnabled" -}}
{{- if or .Values.tier2Credentials.existingSecret .Values.tier2Credentials.accessKey }}true{{ end -}}
{{- end -}}

{{/* The Secret that holds the JetStream password and token: an existing one, or the chart's. */}}
{{- define "segmentstore.jetstreamSecretName" -}}
{{- default (printf "%s-jetstream" (include "segmentstore.fullname" .)) .Values.jetstreamCredentials.existingSecret -}}
{{- end -}}

{{/*
Checks the schema cannot express. The container count is fixed for the life of the data: on an
upgrade, the installed ConfigMap says what it was, and a different value fails the render here
rather than the pods at start-up.
*/}}
{{- define "segmentstore.validateValues" -}}
{{- if gt (int .Values.replicas) 1 -}}
{{- fail "replicas > 1 needs cluster mode (a shared Tier 1 on JetStream), which this version of segmentstore does not have: set replicas: 1" -}}
{{- end -}}
{{- if and .Values.tier2Credentials.accessKey (not .Values.tier2Credentials.secretKey) -}}
{{- fail "tier2Credentials: give both accessKey and secretKey, or an existingSecret" -}}
{{- end -}}
{{- range $key := list "access_key" "secret_key" "session_token" -}}
{{- if hasKey $.Values.config.tier2.options $key -}}
{{- fail (printf "config.tier2.options.%s would put an S3 key in a ConfigMap: give it in tier2Credentials (or tier2Credentials.existingSecret) instead" $key) -}}
{{- end -}}
{{- end -}}
{{- $installed := lookup "v1" "ConfigMap" .Release.Namespace (include "segmentstore.fullname" .) -}}
{{- include "segmentstore.refuseChangedContainers" (list $installed .Values) -}}
{{- end -}}

{{/*
Fails when the installed ConfigMap (a lookup's answer, empty on a first install or offline)
records another container count than the values ask for. Called with (list installed values).
*/}}
{{- define "segmentstore.refuseChangedContainers" -}}
{{- $installed := index . 0 -}}
{{- $values := index . 1 -}}
{{- if and $installed $installed.data -}}
{{- $file := index $installed.data "segmentstore.yaml" | default "" -}}
{{- $previous := (fromYaml $file).store | default dict -}}
{{- if and $previous.containers (ne (int $previous.containers) (int $values.config.store.containers)) -}}
{{- fail (printf "config.store.containers is fixed at first install: it is %d, and cannot become %d (the data records it)" (int $previous.containers) (int $values.config.store.containers)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
