{{/* The release's name prefix of every object: the release name, with
"-no8s" unless it already says no8s. */}}
{{- define "no8s.fullname" -}}
{{- if contains "no8s" .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-no8s" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object; "component" names the service. */}}
{{- define "no8s.labels" -}}
app.kubernetes.io/name: no8s
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/component: {{ .component }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{/* The selector of a component's pods (never changes across upgrades). */}}
{{- define "no8s.selector" -}}
app.kubernetes.io/name: no8s
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "no8s.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* The pod's security context (restricted Pod Security Standard). */}}
{{- define "no8s.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .uid }}
runAsGroup: {{ .uid }}
fsGroup: {{ .uid }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* A container's security context (restricted Pod Security Standard). */}}
{{- define "no8s.containerSecurityContext" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The Secret of one identity: "service-store" → <fullname>-id-service-store. */}}
{{- define "no8s.identitySecret" -}}
{{- printf "%s-id-%s" (include "no8s.fullname" .root) .id -}}
{{- end -}}

{{/* The credentials of identity .id, failing with how to make them. */}}
{{- define "no8s.requireIdentity" -}}
{{- $creds := .root.Values.identity.credentials | default dict -}}
{{- if not (hasKey $creds .id) -}}
{{- fail (printf "identity.credentials has no %q: write the deployment's credentials with `no8s identity ensure ... --helm-values identity.yaml` and pass -f identity.yaml (docs/deploy.md, \"Kubernetes with Helm\")" .id) -}}
{{- end -}}
{{- end -}}

{{- define "no8s.databaseSecret" -}}
{{- printf "%s-database" (include "no8s.fullname" .) -}}
{{- end -}}

{{- define "no8s.natsURL" -}}
{{- if .Values.nats.enabled -}}
{{- printf "nats://%s-nats:4222" (include "no8s.fullname" .) -}}
{{- else -}}
{{- required "externalNats.url is required with nats.enabled=false" .Values.externalNats.url -}}
{{- end -}}
{{- end -}}

{{/* The gateways' service listener, where registry-sync, the scheduler and
the tenant reconciler write as themselves. */}}
{{- define "no8s.serviceURL" -}}
{{- printf "https://%s-gateway:8443" (include "no8s.fullname" .) -}}
{{- end -}}

{{/* Env of every no8s process: its identity and NATS. */}}
{{- define "no8s.commonEnv" -}}
- name: NO8S_IDENTITY_DIR
  value: /var/lib/no8s/identity
- name: NO8S_NATS_URL
  value: {{ include "no8s.natsURL" . | quote }}
{{- end -}}

{{/* The identity volume of a pod (its own Secret only) and /tmp. */}}
{{- define "no8s.volumes" -}}
- name: identity
  secret:
    secretName: {{ include "no8s.identitySecret" . }}
    defaultMode: 0440
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end -}}

{{- define "no8s.volumeMounts" -}}
- name: identity
  mountPath: /var/lib/no8s/identity
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/* Probes on a component's health port (HTTP GET /healthz, /readyz). */}}
{{- define "no8s.probes" -}}
startupProbe:
  httpGet: {path: /healthz, port: {{ .port }}, scheme: {{ .scheme | default "HTTP" }}}
  periodSeconds: 2
  failureThreshold: 150
livenessProbe:
  httpGet: {path: /healthz, port: {{ .port }}, scheme: {{ .scheme | default "HTTP" }}}
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 3
readinessProbe:
  httpGet: {path: /readyz, port: {{ .port }}, scheme: {{ .scheme | default "HTTP" }}}
  periodSeconds: 5
  timeoutSeconds: 5
  failureThreshold: 2
{{- end -}}

{{/* Pod placement and labels shared by every pod. */}}
{{- define "no8s.podCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The bundled PostgreSQL's password: postgresql.password, else the one
already in the cluster's Secret, else a new random one; chosen once per
rendering (kept in .Values.postgresql, which the schema's check has passed
already), so that the database URL and PostgreSQL's Secret agree. */}}
{{- define "no8s.postgresPassword" -}}
{{- if not (hasKey .Values.postgresql "resolvedPassword") -}}
{{- $p := .Values.postgresql.password -}}
{{- if not $p -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (printf "%s-postgresql" (include "no8s.fullname" .)) -}}
{{- if and $existing $existing.data (hasKey $existing.data "password") -}}
{{- $p = index $existing.data "password" | b64dec -}}
{{- else -}}
{{- $p = randAlphaNum 24 -}}
{{- end -}}
{{- end -}}
{{- $_ := set .Values.postgresql "resolvedPassword" $p -}}
{{- end -}}
{{- .Values.postgresql.resolvedPassword -}}
{{- end -}}

{{/* The database URL of the stores and the migration. */}}
{{- define "no8s.databaseURL" -}}
{{- if .Values.postgresql.enabled -}}
{{- printf "postgres://postgres:%s@%s-postgresql:5432/no8s?sslmode=disable" (include "no8s.postgresPassword" .) (include "no8s.fullname" .) -}}
{{- else -}}
{{- required "externalDatabase.url is required with postgresql.enabled=false" .Values.externalDatabase.url -}}
{{- end -}}
{{- end -}}
