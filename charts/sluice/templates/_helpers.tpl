{{/* The chart's name, truncated to 63 characters (a DNS label). */}}
{{- define "sluice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name: "<release>-<chart>", or the release alone when it contains the chart name. */}}
{{- define "sluice.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* "chart-version", for the helm.sh/chart label. */}}
{{- define "sluice.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object of the release. */}}
{{- define "sluice.labels" -}}
helm.sh/chart: {{ include "sluice.chart" . }}
{{ include "sluice.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: sluice
{{- end }}

{{/* Labels selecting the operator pods: never change them (selectors are immutable). */}}
{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sluice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{/* The operator's ServiceAccount. */}}
{{- define "sluice.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sluice.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The operator image: repository@digest, else repository:tag (tag defaults to appVersion). */}}
{{- define "sluice.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Namespace of the leader-election Lease. */}}
{{- define "sluice.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.namespace }}
{{- end }}

{{/* Refuse values that would break the operator's invariants. */}}
{{- define "sluice.validate" -}}
{{- if and (not .Values.leaderElection.enabled) (gt (int .Values.replicaCount) 1) }}
{{- fail "leaderElection.enabled=false needs replicaCount=1: replicas without a Lease would all act on the same pipelines" }}
{{- end }}
{{- end }}

{{/*
What the operator does in a namespace it watches, derived from its code:
- streamingpipelines get/list/watch/patch: kopf lists and watches them and patches
  its finalizer and annotations; kube.pipeline() reads one afresh;
- streamingpipelines/status patch: the status, the operator's write-ahead log;
- streamingpipelines/finalizers update: the objects of a pipeline name it as their
  owner with blockOwnerDeletion, which the OwnerReferencesPermissionEnforcement
  admission plugin allows only to who may update the owner's finalizers;
- pods create/list/watch/delete: driver pods (the driver-pod index of handlers.py and
  kube.driver_pods, CreatePod, StopPod/RemovePod);
- services, serviceaccounts, rolebindings create: each pipeline's driver Service and
  identity (builders.supporting);
- clusterroles bind, on the driver ClusterRole only: the RoleBinding that gives a
  driver with executors its rights; the API server lets the operator bind a role
  whose rights it does not hold itself only with this verb, so the operator holds
  none of the verbs it hands out;
- secrets get: the labels of the Secrets a pipeline names (consent.py), asked for as
  metadata only (PartialObjectMetadata), before a driver pod is created; and the
  key names of the consented Secrets spark.pod.envFrom names (envfrom.py: read whole,
  as no form holds the names without the values; only the names are kept);
- configmaps get: the key names of the ConfigMaps spark.pod.envFrom names
  (envfrom.py), before a driver pod is created: none may make a reserved variable;
- events create: the operator's events (kube.event) and kopf's own.
*/}}
{{- define "sluice.namespacedRules" -}}
- apiGroups: [sluice.dev]
  resources: [streamingpipelines]
  verbs: [get, list, watch, patch]
- apiGroups: [sluice.dev]
  resources: [streamingpipelines/status]
  verbs: [patch]
- apiGroups: [sluice.dev]
  resources: [streamingpipelines/finalizers]
  verbs: [update]
- apiGroups: [""]
  resources: [pods]
  verbs: [create, list, watch, delete]
- apiGroups: [""]
  resources: [services, serviceaccounts]
  verbs: [create, get]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, create]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [rolebindings]
  verbs: [create, get]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [clusterroles]
  resourceNames: [{{ include "sluice.driverClusterRole" . }}]
  verbs: [bind]
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- end }}

{{/* The ClusterRole bound to a driver that runs executor pods, in its namespace. */}}
{{- define "sluice.driverClusterRole" -}}
{{- printf "%s-driver" (include "sluice.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
What Spark's Kubernetes backend does from the driver when it runs executor pods:
creates, watches, labels and deletes them. Nothing else: the operator turns off the
executors' ConfigMap and the driver's volume claims (builders.spark_kubernetes_conf),
and a driver in client mode creates no Service.
*/}}
{{- define "sluice.driverRules" -}}
- apiGroups: [""]
  resources: [pods]
  verbs: [create, get, list, watch, delete, deletecollection, patch]
{{- end }}

{{/* The namespaces the operator serves when not cluster-wide (JSON list). */}}
{{- define "sluice.watchedNamespaces" -}}
{{- default (list .Release.Namespace) .Values.watchNamespaces | toJson }}
{{- end }}

{{/*
What the operator needs cluster-wide in either mode:
- nodes get/list/watch: failover follows the Ready condition of a driver's node (the
  node index of handlers.py; kube.nodes reads one the index does not hold yet);
- customresourcedefinitions list/watch: kopf notices its resource appearing or going;
- namespaces list/watch: kopf notices watched namespaces being created or deleted;
- namespaces get, on kube-system only, unless operator.clusterName names the cluster:
  its UID is the cluster id drivers key their checkpoint by (clusterid.py).
*/}}
{{- define "sluice.clusterRules" -}}
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list, watch]
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [namespaces]
  verbs: [list, watch]
{{- if not .Values.operator.clusterName }}
- apiGroups: [""]
  resources: [namespaces]
  resourceNames: [kube-system]
  verbs: [get]
{{- end }}
{{- end }}

{{/*
The restricted Pod Security Standard's container rules, as one CEL predicate over a
container "c" (driverpolicy.yaml), with an ephemeral-storage limit on top.
*/}}
{{- define "sluice.restrictedContainer" -}}
has(c.securityContext) && has(c.securityContext.allowPrivilegeEscalation) && !c.securityContext.allowPrivilegeEscalation && has(c.securityContext.capabilities) && has(c.securityContext.capabilities.drop) && c.securityContext.capabilities.drop.exists(d, d == "ALL") && (!has(c.securityContext.capabilities.add) || c.securityContext.capabilities.add.all(a, a == "NET_BIND_SERVICE")) && (!has(c.securityContext.runAsUser) || c.securityContext.runAsUser != 0) && (!has(c.securityContext.runAsNonRoot) || c.securityContext.runAsNonRoot) && (!has(c.securityContext.procMount) || c.securityContext.procMount == "Default") && (!has(c.securityContext.seccompProfile) || c.securityContext.seccompProfile.type in ["RuntimeDefault", "Localhost"]) && (!has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0)) && has(c.resources) && has(c.resources.limits) && "ephemeral-storage" in c.resources.limits
{{- end }}
