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
The cluster secret (cluster mode): a Secret mounted as a file that cluster.secret_file names.
An existing Secret, or the chart's own, whose random value is made once and kept: the cluster
records what it signed with it, so a node given another secret is refused.
*/}}
{{- define "segmentstore.clusterSecretName" -}}
{{- default (printf "%s-cluster" (include "segmentstore.fullname" .)) .Values.clusterSecret.existingSecret -}}
{{- end -}}
{{- define "segmentstore.clusterSecretDir" -}}/etc/segmentstore-cluster{{- end -}}
{{- define "segmentstore.clusterSecretFile" -}}
{{- printf "%s/secret" (include "segmentstore.clusterSecretDir" .) -}}
{{- end -}}

{{/*
The chart's own cluster secret, base64-encoded: what the installed Secret (a lookup's answer,
empty on a first install and offline) holds under the key, else a new random value. Called
with (list installed values).
*/}}
{{- define "segmentstore.clusterSecretValue" -}}
{{- $installed := index . 0 -}}
{{- $key := (index . 1).clusterSecret.existingSecretKey -}}
{{- if and $installed $installed.data (index $installed.data $key) -}}
{{- index $installed.data $key -}}
{{- else -}}
{{- randAlphaNum 64 | b64enc -}}
{{- end -}}
{{- end -}}

{{/*
Settings that hold a secret, and where the chart takes each from instead of the ConfigMap. The
schema lets these keys through only so that this check can say where they belong.
*/}}
{{- define "segmentstore.refuseSecretsInConfig" -}}
{{- $where := dict
  "auth.tokens" "give them in auth.tokens or auth.existingSecret instead"
  "tier1.jetstream.password" "give it in jetstreamCredentials.password or jetstreamCredentials.existingSecret instead"
  "tier1.jetstream.token" "give it in jetstreamCredentials.token or jetstreamCredentials.existingSecret instead"
  "cluster.secret" "name a Secret that holds it in clusterSecret.existingSecret, or leave that empty and the chart makes one"
-}}
{{- range $name := keys $where | sortAlpha -}}
{{- $value := $.Values.config -}}
{{- range $part := splitList "." $name -}}
{{- $value = and (kindIs "map" $value) (get $value $part) -}}
{{- end -}}
{{- if $value -}}
{{- fail (printf "config.%s would put a secret in a ConfigMap: %s" $name (get $where $name)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Checks the schema cannot express. The container count is fixed for the life of the data: on an
upgrade, the installed ConfigMap says what it was, and a different value fails the render here
rather than the pods at start-up.
*/}}
{{- define "segmentstore.validateValues" -}}
{{- include "segmentstore.validateCluster" . -}}
{{- include "segmentstore.refuseSecretsInConfig" . -}}
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

{{/* Cluster mode: the nodes share Tier 1 (JetStream) and Tier 2, and split the containers. */}}
{{- define "segmentstore.clusterEnabled" -}}
{{- if .Values.config.cluster.enabled }}true{{ end -}}
{{- end -}}

{{/* A majority of the nodes: what the PodDisruptionBudget keeps up in cluster mode. */}}
{{- define "segmentstore.majority" -}}
{{- add1 (div (int .Values.replicas) 2) -}}
{{- end -}}

{{/*
Where other nodes and clients reach this pod: its own DNS name through the headless Service,
from the pod's name and namespace (the downward API variables POD_NAME and POD_NAMESPACE).
*/}}
{{- define "segmentstore.advertiseUrl" -}}
{{- $scheme := ternary "https" "http" (not (empty .Values.config.api.tls_cert_file)) -}}
{{- printf "%s://$(POD_NAME).%s.$(POD_NAMESPACE).svc.%s:%d" $scheme (include "segmentstore.headlessName" .) .Values.clusterDomain (int .Values.config.api.port) -}}
{{- end -}}

{{/*
What a cluster needs, refused with a message before anything is applied: several nodes need
cluster mode; cluster mode needs Tier 1 on JetStream and a Tier 2 every node reaches (S3, HDFS,
or a file:// path on a shared volume mounted through extraVolumes/extraVolumeMounts, never the
pod's own data volume); each pod's identity comes from its name, so node_id and advertise_url
stay empty; and a stopping node needs time to hand its containers over.
*/}}
{{- define "segmentstore.validateCluster" -}}
{{- $config := .Values.config -}}
{{- if and (gt (int .Values.replicas) 1) (not $config.cluster.enabled) -}}
{{- fail "replicas > 1 needs cluster mode: set config.cluster.enabled=true, with config.tier1.mode=jetstream and a Tier 2 every node shares (config.tier2.uri s3:// or hdfs://, or file:// on a shared volume)" -}}
{{- end -}}
{{- if $config.cluster.enabled -}}
{{- if ne $config.tier1.mode "jetstream" -}}
{{- fail (printf "config.cluster.enabled needs config.tier1.mode=jetstream (it is %s): the nodes share Tier 1 on a JetStream cluster" $config.tier1.mode) -}}
{{- end -}}
{{- include "segmentstore.refuseUnsharedTier2" . -}}
{{- if $config.cluster.node_id -}}
{{- fail "config.cluster.node_id must stay empty in a cluster: each pod's node id is its pod name" -}}
{{- end -}}
{{- if $config.cluster.advertise_url -}}
{{- fail "config.cluster.advertise_url must stay empty in a cluster: each pod advertises its own DNS name through the headless Service" -}}
{{- end -}}
{{- if $config.cluster.secret_file -}}
{{- fail "config.cluster.secret_file must stay empty in a cluster: the chart mounts the cluster secret from a Secret (clusterSecret) and points each pod at it" -}}
{{- end -}}
{{- if lt (int .Values.terminationGracePeriodSeconds) 30 -}}
{{- fail (printf "terminationGracePeriodSeconds is %d: a cluster node needs at least 30 to hand its containers over (up to 15 s) and drain (up to 10 s) before it is killed" (int .Values.terminationGracePeriodSeconds)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Tier 2 must be one store every node reaches. A file:// path counts only under the mount of an
extra volume of a shared kind (a PersistentVolumeClaim, NFS, CephFS, CSI, ...).
*/}}
{{- define "segmentstore.refuseUnsharedTier2" -}}
{{- $uri := .Values.config.tier2.uri | default "" -}}
{{- $why := "" -}}
{{- if or (hasPrefix "s3://" $uri) (hasPrefix "hdfs://" $uri) -}}
{{- else if hasPrefix "file://" $uri -}}
{{- $path := trimPrefix "file://" $uri -}}
{{- $shared := false -}}
{{- range $mount := .Values.extraVolumeMounts -}}
{{- if hasPrefix (printf "%s/" (trimSuffix "/" $mount.mountPath)) (printf "%s/" (trimSuffix "/" $path)) -}}
{{- range $volume := $.Values.extraVolumes -}}
{{- if eq $volume.name $mount.name -}}
{{- range $kind := list "persistentVolumeClaim" "nfs" "cephfs" "glusterfs" "azureFile" "csi" -}}
{{- if hasKey $volume $kind -}}{{- $shared = true -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if not $shared -}}
{{- $why = printf "%s is on no shared volume: mount one (a ReadWriteMany PersistentVolumeClaim, NFS, ...) through extraVolumes and extraVolumeMounts at a folder above it" $uri -}}
{{- end -}}
{{- else if $uri -}}
{{- $why = printf "%s is not a Tier 2 URI" $uri -}}
{{- else -}}
{{- $why = "it is empty, so each pod would keep its own Tier 2 on its own data volume" -}}
{{- end -}}
{{- if $why -}}
{{- fail (printf "cluster mode needs a Tier 2 every node shares (config.tier2.uri s3://..., hdfs://..., or file://... on a shared volume): %s" $why) -}}
{{- end -}}
{{- end -}}
