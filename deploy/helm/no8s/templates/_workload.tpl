{{/*
no8s.workload renders one no8s process: its ServiceAccount, its Deployment,
its Service when it has ports others call, and its PodDisruptionBudget when
it has more than one replica. Arguments (a dict):
  root       the chart's context
  component  the name (store, gateway, reconciler-noop): objects are
             <fullname>-<component>
  id         its identity (<kind>-<name>, a key of identity.credentials)
  replicas, resources
  command    the container's command (a list)
  env        extra environment (YAML text of a list of EnvVar)
  ports      the container ports others call: list of {name, port}
  health     the probe port's name (a port of ports, or "health" with
             healthPort)
  healthPort the probe port when it is not in ports
  scheme     HTTP or HTTPS for the probes
  volumes, mounts  extra volumes and their mounts (YAML text)
*/}}
{{- define "no8s.workload" -}}
{{- $root := .root -}}
{{- $name := printf "%s-%s" (include "no8s.fullname" $root) .component -}}
{{- include "no8s.requireIdentity" (dict "root" $root "id" .id) -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $name }}
  labels:
    {{- include "no8s.labels" (dict "root" $root "component" .component) | nindent 4 }}
automountServiceAccountToken: false
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  labels:
    {{- include "no8s.labels" (dict "root" $root "component" .component) | nindent 4 }}
spec:
  replicas: {{ .replicas }}
  revisionHistoryLimit: 3
  selector:
    matchLabels:
      {{- include "no8s.selector" (dict "root" $root "component" .component) | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "no8s.labels" (dict "root" $root "component" .component) | nindent 8 }}
        {{- with $root.Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        # A new credential or configuration rolls the pods (processes also
        # read their credentials again when the files change).
        checksum/identity: {{ index $root.Values.identity.credentials .id | toJson | sha256sum | trunc 16 | quote }}
        checksum/config: {{ include (print $root.Template.BasePath "/config.yaml") $root | sha256sum | trunc 16 | quote }}
        {{- with $root.Values.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ $name }}
      automountServiceAccountToken: false
      enableServiceLinks: false
      terminationGracePeriodSeconds: 30
      securityContext:
        {{- include "no8s.podSecurityContext" (dict "uid" $root.Values.runAsUser) | nindent 8 }}
      {{- with (include "no8s.podCommon" $root) }}{{ . | nindent 6 }}{{ end }}
      containers:
        - name: {{ .component }}
          image: {{ include "no8s.image" $root | quote }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          command: {{ toJson .command }}
          env:
            {{- include "no8s.commonEnv" $root | nindent 12 }}
            {{- with .env }}
            {{- . | nindent 12 }}
            {{- end }}
          ports:
            {{- range .ports }}
            - name: {{ .name }}
              containerPort: {{ .port }}
              protocol: TCP
            {{- end }}
            {{- if .healthPort }}
            - name: health
              containerPort: {{ .healthPort }}
              protocol: TCP
            {{- end }}
          {{- include "no8s.probes" (dict "port" .health "scheme" .scheme) | nindent 10 }}
          resources:
            {{- toYaml .resources | nindent 12 }}
          securityContext:
            {{- include "no8s.containerSecurityContext" . | nindent 12 }}
          volumeMounts:
            {{- include "no8s.volumeMounts" . | nindent 12 }}
            {{- with .mounts }}
            {{- . | nindent 12 }}
            {{- end }}
      volumes:
        {{- include "no8s.volumes" (dict "root" $root "id" .id) | nindent 8 }}
        {{- with .volumes }}
        {{- . | nindent 8 }}
        {{- end }}
{{- if .ports }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}
  labels:
    {{- include "no8s.labels" (dict "root" $root "component" .component) | nindent 4 }}
  {{- with .serviceAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ .serviceType | default "ClusterIP" }}
  selector:
    {{- include "no8s.selector" (dict "root" $root "component" .component) | nindent 4 }}
  ports:
    {{- range .ports }}
    - name: {{ .name }}
      port: {{ .servicePort | default .port }}
      targetPort: {{ .name }}
      protocol: TCP
    {{- end }}
{{- end }}
{{- if gt (int .replicas) 1 }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $name }}
  labels:
    {{- include "no8s.labels" (dict "root" $root "component" .component) | nindent 4 }}
spec:
  maxUnavailable: {{ $root.Values.podDisruptionBudget.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "no8s.selector" (dict "root" $root "component" .component) | nindent 6 }}
{{- end }}
{{- end -}}
