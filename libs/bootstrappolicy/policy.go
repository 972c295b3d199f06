// Package bootstrappolicy is the default RBAC policy the authorization service creates at start
// and reconciles afterwards: upstream 1.33's bootstrap roles and bindings (cluster-admin, admin,
// edit, view and their aggregation, the system: roles of discovery, nodes, proxies, monitoring
// and certificates) with every API group, label, annotation and namespace renamed through
// platform.io/libs/naming, plus the role of Platform's own controllers service.
package bootstrappolicy

import (
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
)

// BootstrappingValue is the value of naming.BootstrappingLabel on every default object.
const BootstrappingValue = "rbac-defaults"

// Upstream's well-known groups of users; they are not derived from the product name, so the
// policy spells them as upstream does.
const (
	// GroupMasters is always allowed everything (bound to cluster-admin).
	GroupMasters = "system:masters"
	// GroupAuthenticated holds every authenticated user.
	GroupAuthenticated = "system:authenticated"
	// GroupUnauthenticated holds anonymous requests.
	GroupUnauthenticated = "system:unauthenticated"
	// GroupNodes holds node agents (users system:node:<name>).
	GroupNodes = "system:nodes"
	// GroupMonitoring may read health and metrics endpoints.
	GroupMonitoring = "system:monitoring"
	// GroupServiceAccounts holds every service account.
	GroupServiceAccounts = "system:serviceaccounts"
)

// Names of the default roles that other packages refer to.
const (
	// ClusterAdmin may do everything.
	ClusterAdmin = "cluster-admin"
	// SystemNode holds the rules of node agents; the Node authorizer applies them (NodeRules).
	SystemNode = "system:node"
	// BootstrapSignerRole is the Role of upstream's bootstrap signer controller, in the public
	// and the system namespace.
	BootstrapSignerRole = "system:controller:bootstrap-signer"
	// TokenCleanerRole is the Role of upstream's bootstrap token cleaner, in the system namespace.
	TokenCleanerRole = "system:controller:token-cleaner"
	// ClusterInfoReader lets everyone read the cluster-info ConfigMap of the public namespace, as
	// kubeadm's kubeadm:bootstrap-signer-clusterinfo does for TLS bootstrapping.
	ClusterInfoReader = naming.Product + ":bootstrap-signer-clusterinfo"
	// ClusterInfoConfigMap is the ConfigMap in the public namespace that bootstrapping clients read.
	ClusterInfoConfigMap = "cluster-info"
)

// Aggregation labels: a ClusterRole carrying one of them adds its rules to admin, edit or view.
var (
	// AggregateToAdminLabel selects the rules aggregated into admin.
	AggregateToAdminLabel = rbacGroup + "/aggregate-to-admin"
	// AggregateToEditLabel selects the rules aggregated into edit (and, through edit, admin).
	AggregateToEditLabel = rbacGroup + "/aggregate-to-edit"
	// AggregateToViewLabel selects the rules aggregated into view (and, through view, edit and admin).
	AggregateToViewLabel = rbacGroup + "/aggregate-to-view"
)

// Verb sets as upstream's policy names them.
var (
	read      = []string{"get", "list", "watch"}
	write     = []string{"create", "update", "patch", "delete", "deletecollection"}
	readWrite = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
)

// API groups, through naming so that a rename of the product renames them all. The short
// historical names (apps, batch, ...) stay as upstream spells them.
var (
	legacyGroup         = ""
	appsGroup           = "apps"
	autoscalingGroup    = "autoscaling"
	batchGroup          = "batch"
	extensionsGroup     = "extensions"
	policyGroup         = "policy"
	authenticationGroup = naming.Group("authentication.k8s.io")
	authorizationGroup  = naming.Group("authorization.k8s.io")
	certificatesGroup   = naming.Group("certificates.k8s.io")
	coordinationGroup   = naming.Group("coordination.k8s.io")
	discoveryGroup      = naming.Group("discovery.k8s.io")
	eventsGroup         = naming.Group("events.k8s.io")
	networkingGroup     = naming.Group("networking.k8s.io")
	nodeGroup           = naming.Group("node.k8s.io")
	rbacGroup           = naming.Group("rbac.authorization.k8s.io")
	storageGroup        = naming.Group("storage.k8s.io")
)

// ruleBuilder builds one PolicyRule; the lists are sorted as upstream's builder sorts them, so
// the stored objects and reconciliation diffs are stable.
type ruleBuilder struct{ r rbacv1.PolicyRule }

func newRule(verbs ...string) *ruleBuilder {
	return &ruleBuilder{r: rbacv1.PolicyRule{Verbs: append([]string(nil), verbs...)}}
}

func (b *ruleBuilder) groups(g ...string) *ruleBuilder {
	b.r.APIGroups = append(b.r.APIGroups, g...)
	return b
}

func (b *ruleBuilder) resources(r ...string) *ruleBuilder {
	b.r.Resources = append(b.r.Resources, r...)
	return b
}

func (b *ruleBuilder) names(n ...string) *ruleBuilder {
	b.r.ResourceNames = append(b.r.ResourceNames, n...)
	return b
}

func (b *ruleBuilder) urls(u ...string) *ruleBuilder {
	b.r.NonResourceURLs = append(b.r.NonResourceURLs, u...)
	return b
}

func (b *ruleBuilder) rule() rbacv1.PolicyRule {
	r := b.r
	for _, s := range [][]string{r.Verbs, r.APIGroups, r.Resources, r.ResourceNames, r.NonResourceURLs} {
		sort.Strings(s)
	}
	return r
}

// eventsRule lets a component record events through either events API.
func eventsRule() rbacv1.PolicyRule {
	return newRule("create", "update", "patch").groups(legacyGroup, eventsGroup).resources("events").rule()
}

// defaultMeta is the metadata every default object carries: the bootstrapping label and the
// autoupdate annotation, plus any extra labels.
func defaultMeta(name, namespace string, extraLabels map[string]string) metav1.ObjectMeta {
	labels := map[string]string{naming.BootstrappingLabel: BootstrappingValue}
	for k, v := range extraLabels {
		labels[k] = v
	}
	return metav1.ObjectMeta{
		Name:        name,
		Namespace:   namespace,
		Labels:      labels,
		Annotations: map[string]string{naming.AutoupdateAnnotation: "true"},
	}
}

func clusterRole(name string, extraLabels map[string]string, rules ...rbacv1.PolicyRule) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacGroup + "/v1", Kind: "ClusterRole"},
		ObjectMeta: defaultMeta(name, "", extraLabels),
		Rules:      rules,
	}
}

func aggregatedClusterRole(name string, extraLabels map[string]string, selectLabel string) rbacv1.ClusterRole {
	r := clusterRole(name, extraLabels)
	r.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
		{MatchLabels: map[string]string{selectLabel: "true"}},
	}}
	return r
}

// NodeRules are the rules of system:node: what every node agent may do. The Node authorizer
// applies them to requests it does not decide from its graph (upstream 1.33 with its default
// feature gates: no dynamic resource allocation, no cluster trust bundles).
func NodeRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		// Delegated authentication and authorization checks of the node's own API; non-mutating.
		newRule("create").groups(authenticationGroup).resources("tokenreviews").rule(),
		newRule("create").groups(authorizationGroup).resources("subjectaccessreviews", "localsubjectaccessreviews").rule(),
		// Service environment variables of pods.
		newRule(read...).groups(legacyGroup).resources("services").rule(),
		// A node registers and updates its Node (admission limits it to its own).
		newRule("create", "get", "list", "watch").groups(legacyGroup).resources("nodes").rule(),
		newRule("update", "patch").groups(legacyGroup).resources("nodes/status").rule(),
		newRule("update", "patch").groups(legacyGroup).resources("nodes").rule(),
		newRule("create", "update", "patch").groups(legacyGroup).resources("events").rule(),
		// Pods: reading, mirror pods, status and evictions (admission limits them to bound pods).
		newRule(read...).groups(legacyGroup).resources("pods").rule(),
		newRule("create", "delete").groups(legacyGroup).resources("pods").rule(),
		newRule("update", "patch").groups(legacyGroup).resources("pods/status").rule(),
		newRule("create").groups(legacyGroup).resources("pods/eviction").rule(),
		// The Node authorizer narrows these to objects its pods reference.
		newRule("get", "list", "watch").groups(legacyGroup).resources("secrets", "configmaps").rule(),
		newRule("get").groups(legacyGroup).resources("persistentvolumeclaims", "persistentvolumes").rule(),
		newRule("get").groups(legacyGroup).resources("endpoints").rule(),
		// Certificate rotation of the node's own client certificate.
		newRule("create", "get", "list", "watch").groups(certificatesGroup).resources("certificatesigningrequests").rule(),
		newRule("get", "create", "update", "patch", "delete").groups(coordinationGroup).resources("leases").rule(),
		newRule("get").groups(storageGroup).resources("volumeattachments").rule(),
		newRule("create").groups(legacyGroup).resources("serviceaccounts/token").rule(),
		newRule("get", "update", "patch").groups(legacyGroup).resources("persistentvolumeclaims/status").rule(),
		newRule("get", "watch", "list").groups(storageGroup).resources("csidrivers").rule(),
		newRule("get", "create", "update", "patch", "delete").groups(storageGroup).resources("csinodes").rule(),
		newRule("get", "list", "watch").groups(nodeGroup).resources("runtimeclasses").rule(),
	}
}

// signers are the built-in signers, with the approver role upstream names after each.
var signers = []struct{ name, approverRole string }{
	{naming.SignerAPIServerClient, "kube-apiserver-client-approver"},
	{naming.SignerAPIServerClientKubelet, "kube-apiserver-client-kubelet-approver"},
	{naming.SignerKubeletServing, "kubelet-serving-approver"},
	{naming.SignerLegacyUnknown, "legacy-unknown-approver"},
}

func signerNames() []string {
	names := make([]string, 0, len(signers))
	for _, s := range signers {
		names = append(names, s.name)
	}
	return names
}

// certificatesRolePrefix starts the names of the certificate roles
// (system:certificates.k8s.io: upstream).
var certificatesRolePrefix = "system:" + certificatesGroup + ":"

// ClusterRoles are the default ClusterRoles. admin, edit and view are aggregated: their rules are
// left empty here and filled by the aggregation controller from the ClusterRoles their
// aggregationRule selects (system:aggregate-to-*), as upstream.
func ClusterRoles() []rbacv1.ClusterRole {
	roles := []rbacv1.ClusterRole{
		// The root role: everything.
		clusterRole(ClusterAdmin, nil,
			newRule("*").groups("*").resources("*").rule(),
			newRule("*").urls("*").rule(),
		),
		// Enough to know whether the server is ready and to discover API versions.
		clusterRole("system:discovery", nil,
			newRule("get").urls("/livez", "/readyz", "/healthz", "/version", "/version/",
				"/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*").rule(),
		),
		// Health and metrics, for monitoring systems.
		clusterRole("system:monitoring", nil,
			newRule("get").urls("/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz",
				"/livez/*", "/readyz/*", "/healthz/*").rule(),
		),
		// What a user may learn about themselves.
		clusterRole("system:basic-user", nil,
			newRule("create").groups(authorizationGroup).resources("selfsubjectaccessreviews", "selfsubjectrulesreviews").rule(),
			newRule("create").groups(authenticationGroup).resources("selfsubjectreviews").rule(),
		),
		// Insensitive cluster information, readable without credentials.
		clusterRole("system:public-info-viewer", nil,
			newRule("get").urls("/livez", "/readyz", "/healthz", "/version", "/version/").rule(),
		),

		// User-facing namespace roles, aggregated. view is part of edit, edit part of admin.
		aggregatedClusterRole("admin", nil, AggregateToAdminLabel),
		aggregatedClusterRole("edit", map[string]string{AggregateToAdminLabel: "true"}, AggregateToEditLabel),
		aggregatedClusterRole("view", map[string]string{AggregateToEditLabel: "true"}, AggregateToViewLabel),
		clusterRole("system:aggregate-to-admin", map[string]string{AggregateToAdminLabel: "true"},
			newRule("create").groups(authorizationGroup).resources("localsubjectaccessreviews").rule(),
			newRule(readWrite...).groups(rbacGroup).resources("roles", "rolebindings").rule(),
		),
		clusterRole("system:aggregate-to-edit", map[string]string{AggregateToEditLabel: "true"},
			// Reading these escalates (exec, secrets), so view does not have them.
			newRule(read...).groups(legacyGroup).resources("pods/attach", "pods/proxy", "pods/exec",
				"pods/portforward", "secrets", "services/proxy").rule(),
			newRule("impersonate").groups(legacyGroup).resources("serviceaccounts").rule(),
			newRule(write...).groups(legacyGroup).resources("pods", "pods/attach", "pods/proxy",
				"pods/exec", "pods/portforward").rule(),
			newRule("create").groups(legacyGroup).resources("pods/eviction").rule(),
			newRule(write...).groups(legacyGroup).resources("replicationcontrollers",
				"replicationcontrollers/scale", "serviceaccounts", "services", "services/proxy",
				"persistentvolumeclaims", "configmaps", "secrets", "events").rule(),
			newRule("create").groups(legacyGroup).resources("serviceaccounts/token").rule(),
			newRule(write...).groups(appsGroup).resources("statefulsets", "statefulsets/scale",
				"daemonsets", "deployments", "deployments/scale", "deployments/rollback",
				"replicasets", "replicasets/scale").rule(),
			newRule(write...).groups(autoscalingGroup).resources("horizontalpodautoscalers").rule(),
			newRule(write...).groups(batchGroup).resources("jobs", "cronjobs").rule(),
			newRule(write...).groups(extensionsGroup).resources("daemonsets", "deployments",
				"deployments/scale", "deployments/rollback", "ingresses", "replicasets",
				"replicasets/scale", "replicationcontrollers/scale", "networkpolicies").rule(),
			newRule(write...).groups(policyGroup).resources("poddisruptionbudgets").rule(),
			newRule(write...).groups(networkingGroup).resources("networkpolicies", "ingresses").rule(),
			newRule(readWrite...).groups(coordinationGroup).resources("leases").rule(),
		),
		clusterRole("system:aggregate-to-view", map[string]string{AggregateToViewLabel: "true"},
			newRule(read...).groups(legacyGroup).resources("pods", "replicationcontrollers",
				"replicationcontrollers/scale", "serviceaccounts", "services", "services/status",
				"endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "configmaps").rule(),
			newRule(read...).groups(legacyGroup).resources("limitranges", "resourcequotas", "bindings",
				"events", "pods/status", "resourcequotas/status", "namespaces/status",
				"replicationcontrollers/status", "pods/log").rule(),
			// Reading namespaces at namespace scope means reading this namespace.
			newRule(read...).groups(legacyGroup).resources("namespaces").rule(),
			newRule(read...).groups(discoveryGroup).resources("endpointslices").rule(),
			newRule(read...).groups(appsGroup).resources("controllerrevisions", "statefulsets",
				"statefulsets/status", "statefulsets/scale", "daemonsets", "daemonsets/status",
				"deployments", "deployments/status", "deployments/scale", "replicasets",
				"replicasets/status", "replicasets/scale").rule(),
			newRule(read...).groups(autoscalingGroup).resources("horizontalpodautoscalers",
				"horizontalpodautoscalers/status").rule(),
			newRule(read...).groups(batchGroup).resources("jobs", "cronjobs", "cronjobs/status",
				"jobs/status").rule(),
			newRule(read...).groups(extensionsGroup).resources("daemonsets", "daemonsets/status",
				"deployments", "deployments/scale", "deployments/status", "ingresses",
				"ingresses/status", "replicasets", "replicasets/scale", "replicasets/status",
				"replicationcontrollers/scale", "networkpolicies").rule(),
			newRule(read...).groups(policyGroup).resources("poddisruptionbudgets",
				"poddisruptionbudgets/status").rule(),
			newRule(read...).groups(networkingGroup).resources("ingresses", "ingresses/status",
				"networkpolicies").rule(),
		),

		// Nodes and their helpers.
		clusterRole(SystemNode, nil, NodeRules()...),
		clusterRole("system:node-proxier", nil,
			newRule("list", "watch").groups(legacyGroup).resources("services", "endpoints").rule(),
			newRule(read...).groups(legacyGroup).resources("nodes").rule(),
			eventsRule(),
			newRule("list", "watch").groups(discoveryGroup).resources("endpointslices").rule(),
		),
		clusterRole("system:kubelet-api-admin", nil,
			newRule(read...).groups(legacyGroup).resources("nodes").rule(),
			newRule("proxy").groups(legacyGroup).resources("nodes").rule(),
			newRule("*").groups(legacyGroup).resources("nodes/proxy", "nodes/metrics", "nodes/stats", "nodes/log").rule(),
		),
		clusterRole("system:node-bootstrapper", nil,
			newRule("create", "get", "list", "watch").groups(certificatesGroup).resources("certificatesigningrequests").rule(),
		),
		clusterRole("system:node-problem-detector", nil,
			newRule("get").groups(legacyGroup).resources("nodes").rule(),
			newRule("patch").groups(legacyGroup).resources("nodes/status").rule(),
			eventsRule(),
		),
		clusterRole("system:persistent-volume-provisioner", nil,
			newRule("get", "list", "watch", "create", "delete").groups(legacyGroup).resources("persistentvolumes").rule(),
			// update so a provisioner can annotate claims it provisions.
			newRule("get", "list", "watch", "update").groups(legacyGroup).resources("persistentvolumeclaims").rule(),
			newRule(read...).groups(storageGroup).resources("storageclasses").rule(),
			newRule("watch").groups(legacyGroup).resources("events").rule(),
			eventsRule(),
		),

		// Delegated authentication and authorization, for extension servers.
		clusterRole("system:auth-delegator", nil,
			newRule("create").groups(authenticationGroup).resources("tokenreviews").rule(),
			newRule("create").groups(authorizationGroup).resources("subjectaccessreviews").rule(),
		),
		// The service account issuer's discovery documents.
		clusterRole("system:service-account-issuer-discovery", nil,
			newRule("get").urls("/.well-known/openid-configuration", "/.well-known/openid-configuration/",
				"/openid/v1/jwks", "/openid/v1/jwks/").rule(),
		),

		// Certificate requests: the virtual subresources the approving controller checks with
		// a SubjectAccessReview for node client certificates.
		clusterRole(certificatesRolePrefix+"certificatesigningrequests:nodeclient", nil,
			newRule("create").groups(certificatesGroup).resources("certificatesigningrequests/nodeclient").rule(),
		),
		clusterRole(certificatesRolePrefix+"certificatesigningrequests:selfnodeclient", nil,
			newRule("create").groups(certificatesGroup).resources("certificatesigningrequests/selfnodeclient").rule(),
		),
	}
	// One approver role per built-in signer.
	for _, s := range signers {
		roles = append(roles, clusterRole(certificatesRolePrefix+s.approverRole, nil,
			newRule("approve").groups(certificatesGroup).resources("signers").names(s.name).rule(),
		))
	}
	roles = append(roles, controllersClusterRole())
	return roles
}

// controllersClusterRole is what the controllers service (namespace lifecycle, service accounts
// and their tokens, role aggregation, resource quota usage, bootstrap tokens and cluster-info,
// certificate approval and signing) needs, running as naming.ControllerManagerUser.
func controllersClusterRole() rbacv1.ClusterRole {
	return clusterRole(naming.ControllerManagerUser, nil,
		// Namespace lifecycle: finalize and remove terminating namespaces, set their conditions.
		newRule("get", "list", "watch", "update", "delete").groups(legacyGroup).resources("namespaces").rule(),
		newRule("update").groups(legacyGroup).resources("namespaces/finalize", "namespaces/status").rule(),
		// The namespace deleter empties a namespace of every kind, as upstream's does; the
		// garbage collector removes owner references and its finalizers from any object
		// (upstream's generic-garbage-collector role).
		newRule("get", "list", "watch", "patch", "update", "delete", "deletecollection").groups("*").resources("*").rule(),
		// Default service accounts and their token Secrets.
		newRule("get", "list", "watch", "create", "update").groups(legacyGroup).resources("serviceaccounts").rule(),
		newRule("get", "list", "watch", "create", "update", "delete").groups(legacyGroup).resources("secrets").rule(),
		// cluster-info and its signatures.
		newRule("get", "list", "watch", "create", "update").groups(legacyGroup).resources("configmaps").rule(),
		// Leader election.
		newRule("get", "create", "update").groups(coordinationGroup).resources("leases").rule(),
		// ClusterRole aggregation. escalate, as upstream's aggregation controller has it: the
		// aggregated rules are more than the controller itself holds.
		newRule("escalate", "get", "list", "watch", "update", "patch").groups(rbacGroup).resources("clusterroles").rule(),
		newRule("create").groups(authenticationGroup).resources("tokenreviews").rule(),
		newRule("create").groups(authorizationGroup).resources("subjectaccessreviews").rule(),
		// ResourceQuota usage (counting reads every kind: the deleter's rule above).
		newRule("update").groups(legacyGroup).resources("resourcequotas/status").rule(),
		// Certificate requests: approval, signing and clean-up.
		newRule("get", "list", "watch", "delete").groups(certificatesGroup).resources("certificatesigningrequests").rule(),
		newRule("update").groups(certificatesGroup).resources("certificatesigningrequests/approval",
			"certificatesigningrequests/status").rule(),
		newRule("approve", "sign").groups(certificatesGroup).resources("signers").names(signerNames()...).rule(),
		eventsRule(),
	)
}

func subjectGroups(names ...string) []rbacv1.Subject {
	s := make([]rbacv1.Subject, 0, len(names))
	for _, n := range names {
		s = append(s, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacGroup, Name: n})
	}
	return s
}

func subjectUsers(names ...string) []rbacv1.Subject {
	s := make([]rbacv1.Subject, 0, len(names))
	for _, n := range names {
		s = append(s, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacGroup, Name: n})
	}
	return s
}

func subjectServiceAccount(namespace, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}
}

func clusterRoleBinding(role string, subjects []rbacv1.Subject) rbacv1.ClusterRoleBinding {
	return rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacGroup + "/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: defaultMeta(role, "", nil),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacGroup, Kind: "ClusterRole", Name: role},
		Subjects:   subjects,
	}
}

// ClusterRoleBindings are the default ClusterRoleBindings, each named after its ClusterRole.
func ClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	return []rbacv1.ClusterRoleBinding{
		clusterRoleBinding(ClusterAdmin, subjectGroups(GroupMasters)),
		clusterRoleBinding("system:monitoring", subjectGroups(GroupMonitoring)),
		clusterRoleBinding("system:discovery", subjectGroups(GroupAuthenticated)),
		clusterRoleBinding("system:basic-user", subjectGroups(GroupAuthenticated)),
		clusterRoleBinding("system:public-info-viewer", subjectGroups(GroupAuthenticated, GroupUnauthenticated)),
		clusterRoleBinding("system:node-proxier", subjectUsers(naming.NodeProxierUser)),
		clusterRoleBinding("system:service-account-issuer-discovery", subjectGroups(GroupServiceAccounts)),
		clusterRoleBinding(naming.ControllerManagerUser, subjectUsers(naming.ControllerManagerUser)),
		// Upstream keeps this binding without subjects: nodes get system:node's rules from the
		// Node authorizer, restricted to what their pods use; binding the group would grant
		// them to every node unrestricted.
		clusterRoleBinding(SystemNode, nil),
	}
}
