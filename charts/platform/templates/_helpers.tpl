{{/* Names. */}}
{{- define "platform.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "platform.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object; "platform.componentLabels" adds the component. */}}
{{- define "platform.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "platform.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ include "platform.tag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: platform
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "storage"). */}}
{{- define "platform.selectorLabels" -}}
app.kubernetes.io/name: {{ include "platform.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "platform.componentLabels" -}}
{{ include "platform.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Images: <repository>/<service>:<tag>, as `make images` tags them. */}}
{{- define "platform.tag" -}}
{{- default .Chart.AppVersion .Values.image.tag -}}
{{- end -}}

{{- define "platform.image" -}}
{{- printf "%s/%s:%s" .root.Values.image.repository .service (include "platform.tag" .root) -}}
{{- end -}}

{{- define "platform.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "platform.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* In-cluster DNS names of a Service: (dict "root" $ "name" "<fullname>-storage"). */}}
{{- define "platform.dnsNames" -}}
{{- $ns := .root.Release.Namespace -}}
{{- list .name (printf "%s.%s" .name $ns) (printf "%s.%s.svc" .name $ns) (printf "%s.%s.svc.%s" .name $ns .root.Values.clusterDomain) | toJson -}}
{{- end -}}

{{- define "platform.gatewayServiceName" -}}{{ include "platform.fullname" . }}-gateway{{- end -}}
{{- define "platform.storageServiceName" -}}{{ include "platform.fullname" . }}-storage{{- end -}}
{{- define "platform.redisServiceName" -}}{{ include "platform.fullname" . }}-redis{{- end -}}

{{/* The address the gateway's sidecars and the certificates service dial for storage. */}}
{{- define "platform.storageAddress" -}}
{{- printf "%s.%s.svc:%d" (include "platform.storageServiceName" .) .Release.Namespace (int .Values.storage.port) -}}
{{- end -}}

{{/* The gateway as the controllers (inside the cluster) reach it. */}}
{{- define "platform.internalURL" -}}
{{- printf "https://%s.%s.svc:%d" (include "platform.gatewayServiceName" .) .Release.Namespace (int .Values.gateway.service.port) -}}
{{- end -}}

{{/* The gateway as clients outside reach it (the admin kubeconfig's server). */}}
{{- define "platform.externalURL" -}}
{{- default (include "platform.internalURL" .) .Values.gateway.externalURL -}}
{{- end -}}

{{/* DNS names and IP addresses of the gateway's serving certificate. */}}
{{- define "platform.gatewayHosts" -}}
{{- $hosts := include "platform.dnsNames" (dict "root" . "name" (include "platform.gatewayServiceName" .)) | fromJsonArray -}}
{{- $hosts = concat $hosts (list "localhost" "127.0.0.1") -}}
{{- with .Values.gateway.externalURL -}}
{{- $hosts = append $hosts (urlParse .).hostname -}}
{{- end -}}
{{- $hosts = concat $hosts .Values.gateway.extraHosts -}}
{{- uniq $hosts | toJson -}}
{{- end -}}

{{/* The controller manager's user name in the naming profile. */}}
{{- define "platform.controllerManagerUser" -}}
{{- if eq .Values.namingProfile "kubernetes" -}}system:kube-controller-manager{{- else -}}system:platform-controller-manager{{- end -}}
{{- end -}}

{{/* The Secret of the PKI in the generate and existingSecret modes. */}}
{{- define "platform.pkiSecretName" -}}
{{- if eq .Values.pki.mode "existingSecret" -}}{{ .Values.pki.existingSecret }}{{- else -}}{{ include "platform.fullname" . }}-pki{{- end -}}
{{- end -}}
{{- define "platform.adminSecretName" -}}{{ include "platform.fullname" . }}-admin-kubeconfig{{- end -}}

{{/* cert-manager: the CA's Secret. */}}
{{- define "platform.certManagerCASecret" -}}
{{- if .Values.pki.certManager.issuerRef -}}
{{- required "pki.certManager.caSecretName is required with pki.certManager.issuerRef" .Values.pki.certManager.caSecretName -}}
{{- else -}}
{{- default (printf "%s-ca" (include "platform.fullname" .)) .Values.pki.certManager.caSecretName -}}
{{- end -}}
{{- end -}}

{{/*
The PKI files a pod needs, as a projected volume's sources: (dict "root" $ "files" (list ...)).
File names are those of `platform certs --dir`; in the certManager mode each comes from the
Secret of its Certificate (tls.crt, tls.key).
*/}}
{{- define "platform.pkiSources" -}}
{{- $root := .root -}}
{{- $fn := include "platform.fullname" $root -}}
{{- range .files }}
{{- if eq $root.Values.pki.mode "certManager" }}
{{- $secret := "" -}}{{- $key := "" -}}
{{- if eq . "ca.crt" -}}{{- $secret = include "platform.certManagerCASecret" $root -}}{{- $key = "tls.crt" -}}
{{- else if eq . "ca.key" -}}{{- $secret = include "platform.certManagerCASecret" $root -}}{{- $key = "tls.key" -}}
{{- else if eq . "sa.key" -}}{{- $secret = printf "%s-service-account-key" $fn -}}{{- $key = "tls.key" -}}
{{- else }}
{{- $base := trimSuffix ".key" (trimSuffix ".crt" .) -}}
{{- $secret = printf "%s-%s-tls" $fn $base -}}
{{- $key = ternary "tls.crt" "tls.key" (hasSuffix ".crt" .) -}}
{{- end }}
- secret:
    name: {{ $secret }}
    items:
      - key: {{ $key }}
        path: {{ . }}
{{- else }}
- secret:
    name: {{ include "platform.pkiSecretName" $root }}
    items:
      - key: {{ . }}
        path: {{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Environment of every service container: the naming profile and OTLP. */}}
{{- define "platform.env" -}}
- name: PLATFORM_NAMING_PROFILE
  value: {{ .root.Values.namingProfile | quote }}
{{- with .root.Values.otlp.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- with .root.Values.otlp.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- with .env }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* A probe that runs the service's own binary (the images have no shell): gRPC health over
mutual TLS with the service's certificate. (dict "service" "storage" "port" 7001) */}}
{{- define "platform.grpcProbeCommand" -}}
exec:
  command:
    - /usr/local/bin/{{ .service }}
    - --health-probe=grpc://127.0.0.1:{{ .port }}
    - --ca-file=/pki/ca.crt
    - --cert-file=/pki/{{ .service }}.crt
    - --key-file=/pki/{{ .service }}.key
{{- end -}}

{{/* Startup, liveness and readiness probes of a gRPC service. */}}
{{- define "platform.grpcProbes" -}}
startupProbe:
  {{- include "platform.grpcProbeCommand" . | nindent 2 }}
  periodSeconds: 2
  timeoutSeconds: 5
  failureThreshold: 90
readinessProbe:
  {{- include "platform.grpcProbeCommand" . | nindent 2 }}
  periodSeconds: 5
  timeoutSeconds: 5
  failureThreshold: 2
livenessProbe:
  {{- if .tcpLiveness }}
  {{- /* Alive is listening: a dependency's outage (NOT_SERVING) must not restart the pod. */}}
  tcpSocket:
    port: {{ .tcpLiveness }}
  {{- else }}
  {{- include "platform.grpcProbeCommand" . | nindent 2 }}
  {{- end }}
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 6
{{- end -}}

{{/* Pod anti-affinity of one component (soft, hard or none), unless affinity is given. */}}
{{- define "platform.affinity" -}}
{{- if .affinity -}}
{{ toYaml .affinity }}
{{- else if eq .root.Values.podAntiAffinity "soft" -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: {{ .root.Values.antiAffinityTopologyKey }}
        labelSelector:
          matchLabels:
            {{- include "platform.selectorLabels" . | nindent 12 }}
{{- else if eq .root.Values.podAntiAffinity "hard" -}}
podAntiAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: {{ .root.Values.antiAffinityTopologyKey }}
      labelSelector:
        matchLabels:
          {{- include "platform.selectorLabels" . | nindent 10 }}
{{- end -}}
{{- end -}}

{{/* Scheduling fields of a pod: (dict "root" $ "component" c "values" .Values.<component>). */}}
{{- define "platform.scheduling" -}}
{{- $aff := include "platform.affinity" (dict "root" .root "component" .component "affinity" .values.affinity) -}}
{{- with $aff }}
affinity:
  {{- . | nindent 2 }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Fields every pod of the chart shares. */}}
{{- define "platform.podCommon" -}}
serviceAccountName: {{ include "platform.serviceAccountName" . }}
automountServiceAccountToken: false
enableServiceLinks: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* --metrics-bind-address of a gRPC service when metrics are on. */}}
{{- define "platform.metricsArg" -}}
{{- if .root.Values.metrics.enabled }}
- --metrics-bind-address=0.0.0.0:{{ index .root.Values.metrics.ports .service }}
{{- end }}
{{- end -}}

{{/* A PodDisruptionBudget: (dict "root" $ "component" c). */}}
{{- define "platform.pdb" -}}
{{- if .root.Values.podDisruptionBudget.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "platform.fullname" .root }}-{{ .component }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "platform.componentLabels" . | nindent 4 }}
spec:
  maxUnavailable: {{ .root.Values.podDisruptionBudget.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "platform.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end -}}
