package bootstrappolicy

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"platform.io/libs/naming"
)

// allows reports whether rules grant one resource permission (name "" for collections).
func allows(rules []rbacv1.PolicyRule, verb, group, resource, name string) bool {
	atom := rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{group}, Resources: []string{resource}}
	if name != "" {
		atom.ResourceNames = []string{name}
	}
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			continue
		}
		// A named rule does not grant requests without a name (list, create).
		if name == "" && len(r.ResourceNames) > 0 {
			continue
		}
		if ruleCovers(r, atom) {
			return true
		}
	}
	return false
}

// allowsURL reports whether rules grant a non-resource request.
func allowsURL(rules []rbacv1.PolicyRule, verb, path string) bool {
	atom := rbacv1.PolicyRule{Verbs: []string{verb}, NonResourceURLs: []string{path}}
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 && ruleCovers(r, atom) {
			return true
		}
	}
	return false
}

func clusterRolesByName(t *testing.T) map[string]rbacv1.ClusterRole {
	t.Helper()
	m := map[string]rbacv1.ClusterRole{}
	for _, r := range ClusterRoles() {
		if _, dup := m[r.Name]; dup {
			t.Fatalf("ClusterRole %q defined twice", r.Name)
		}
		m[r.Name] = r
	}
	return m
}

// aggregate fills aggregated roles as the aggregation controller does: the union of the rules of
// every ClusterRole a selector matches, repeated until nothing changes (edit is in admin, view in
// edit).
func aggregate(t *testing.T, roles map[string]rbacv1.ClusterRole) {
	t.Helper()
	for changed := true; changed; {
		changed = false
		for name, r := range roles {
			if r.AggregationRule == nil {
				continue
			}
			var rules []rbacv1.PolicyRule
			for _, sel := range r.AggregationRule.ClusterRoleSelectors {
				s, err := metav1.LabelSelectorAsSelector(&sel)
				if err != nil {
					t.Fatalf("%s: selector: %v", name, err)
				}
				for other, o := range roles {
					if other != name && s.Matches(labels.Set(o.Labels)) {
						rules = append(rules, o.Rules...)
					}
				}
			}
			if len(Uncovered(r.Rules, rules)) > 0 {
				r.Rules, _ = reconcileRules(r.Rules, rules)
				roles[name] = r
				changed = true
			}
		}
	}
}

// Upstream: every bootstrap object carries kubernetes.io/bootstrapping=rbac-defaults and
// rbac.authorization.kubernetes.io/autoupdate=true (renamed through naming).
func TestEveryObjectCarriesBootstrapMetadata(t *testing.T) {
	check := func(kind string, m metav1.ObjectMeta) {
		t.Helper()
		if m.Labels[naming.BootstrappingLabel] != BootstrappingValue {
			t.Errorf("%s %s/%s: label %s = %q", kind, m.Namespace, m.Name, naming.BootstrappingLabel, m.Labels[naming.BootstrappingLabel])
		}
		if m.Annotations[naming.AutoupdateAnnotation] != "true" {
			t.Errorf("%s %s/%s: annotation %s = %q", kind, m.Namespace, m.Name, naming.AutoupdateAnnotation, m.Annotations[naming.AutoupdateAnnotation])
		}
	}
	for _, r := range ClusterRoles() {
		check("ClusterRole", r.ObjectMeta)
	}
	for _, b := range ClusterRoleBindings() {
		check("ClusterRoleBinding", b.ObjectMeta)
	}
	for ns, roles := range NamespaceRoles() {
		for _, r := range roles {
			check("Role", r.ObjectMeta)
			if r.Namespace != ns {
				t.Errorf("Role %s listed under %s has namespace %q", r.Name, ns, r.Namespace)
			}
		}
	}
	for ns, bindings := range NamespaceRoleBindings() {
		for _, b := range bindings {
			check("RoleBinding", b.ObjectMeta)
			if b.Namespace != ns {
				t.Errorf("RoleBinding %s listed under %s has namespace %q", b.Name, ns, b.Namespace)
			}
		}
	}
	if naming.AutoupdateAnnotation != "rbac.authorization."+naming.GroupSuffix+"/autoupdate" {
		t.Errorf("autoupdate annotation %q", naming.AutoupdateAnnotation)
	}
}

// Naming rule: nothing in the policy spells upstream's product-derived names; every named API
// group is Platform's.
func TestPolicySpellsNoUpstreamNames(t *testing.T) {
	var all []any
	for _, r := range ClusterRoles() {
		all = append(all, r)
	}
	for _, b := range ClusterRoleBindings() {
		all = append(all, b)
	}
	for _, rs := range NamespaceRoles() {
		for _, r := range rs {
			all = append(all, r)
		}
	}
	for _, bs := range NamespaceRoleBindings() {
		for _, b := range bs {
			all = append(all, b)
		}
	}
	for _, o := range all {
		js, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"kubernetes.io", "k8s.io", "kube-system", "kube-public", "kube-node-lease", "kube-controller-manager"} {
			if strings.Contains(string(js), bad) {
				t.Errorf("%s spells %q", js, bad)
			}
		}
	}
	short := map[string]bool{"": true, "*": true, "apps": true, "autoscaling": true, "batch": true, "extensions": true, "policy": true}
	for _, r := range ClusterRoles() {
		for _, rule := range r.Rules {
			for _, g := range rule.APIGroups {
				if !short[g] && !strings.HasSuffix(g, "."+naming.GroupSuffix) {
					t.Errorf("ClusterRole %s: group %q is not Platform's", r.Name, g)
				}
			}
		}
	}
}

// Upstream's rule validation (ValidatePolicyRule): verbs required; a rule is either a resource
// rule (apiGroups and resources) or a non-resource rule (URLs starting with "/" or "*", no groups,
// resources or names). kubectl auth reconcile and our own validation reject anything else.
func TestRulesAreWellFormed(t *testing.T) {
	check := func(owner string, rules []rbacv1.PolicyRule) {
		for i, r := range rules {
			if len(r.Verbs) == 0 {
				t.Errorf("%s rule %d: no verbs", owner, i)
			}
			if len(r.NonResourceURLs) > 0 {
				if len(r.APIGroups) > 0 || len(r.Resources) > 0 || len(r.ResourceNames) > 0 {
					t.Errorf("%s rule %d mixes URLs with resources", owner, i)
				}
				for _, u := range r.NonResourceURLs {
					if !strings.HasPrefix(u, "/") && u != "*" {
						t.Errorf("%s rule %d: URL %q", owner, i, u)
					}
				}
				continue
			}
			if len(r.APIGroups) == 0 || len(r.Resources) == 0 {
				t.Errorf("%s rule %d: resource rule without groups or resources", owner, i)
			}
		}
	}
	for _, r := range ClusterRoles() {
		check("ClusterRole "+r.Name, r.Rules)
		if r.AggregationRule == nil && len(r.Rules) == 0 {
			t.Errorf("ClusterRole %s has no rules and no aggregation", r.Name)
		}
	}
	for _, rs := range NamespaceRoles() {
		for _, r := range rs {
			check("Role "+r.Name, r.Rules)
		}
	}
}

// Upstream: every binding refers to a role the policy creates (a RoleBinding to a Role of its own
// namespace), so no default binding dangles.
func TestBindingsReferToDefaultRoles(t *testing.T) {
	roles := clusterRolesByName(t)
	for _, b := range ClusterRoleBindings() {
		if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.APIGroup != naming.Group("rbac.authorization.k8s.io") {
			t.Errorf("ClusterRoleBinding %s: roleRef %+v", b.Name, b.RoleRef)
		}
		if _, ok := roles[b.RoleRef.Name]; !ok {
			t.Errorf("ClusterRoleBinding %s refers to missing ClusterRole %q", b.Name, b.RoleRef.Name)
		}
	}
	nsRoles := NamespaceRoles()
	for ns, bs := range NamespaceRoleBindings() {
		for _, b := range bs {
			found := false
			for _, r := range nsRoles[ns] {
				found = found || (b.RoleRef.Kind == "Role" && r.Name == b.RoleRef.Name)
			}
			if !found {
				t.Errorf("RoleBinding %s/%s refers to missing Role %q", ns, b.Name, b.RoleRef.Name)
			}
		}
	}
}

// Upstream's default bindings (policy.go ClusterRoleBindings) and the controllers' own.
func TestClusterRoleBindingSubjects(t *testing.T) {
	byName := map[string]rbacv1.ClusterRoleBinding{}
	for _, b := range ClusterRoleBindings() {
		byName[b.Name] = b
	}
	type subj struct{ kind, name string }
	cases := []struct {
		binding string
		want    []subj
	}{
		{"cluster-admin", []subj{{"Group", "system:masters"}}},
		{"system:discovery", []subj{{"Group", "system:authenticated"}}},
		{"system:basic-user", []subj{{"Group", "system:authenticated"}}},
		{"system:public-info-viewer", []subj{{"Group", "system:authenticated"}, {"Group", "system:unauthenticated"}}},
		{"system:monitoring", []subj{{"Group", "system:monitoring"}}},
		{"system:node-proxier", []subj{{"User", naming.NodeProxierUser}}},
		{"system:service-account-issuer-discovery", []subj{{"Group", "system:serviceaccounts"}}},
		{naming.ControllerManagerUser, []subj{{"User", naming.ControllerManagerUser}}},
		// Deprecated since the Node authorizer: kept without subjects.
		{"system:node", nil},
	}
	for _, c := range cases {
		b, ok := byName[c.binding]
		if !ok {
			t.Errorf("no ClusterRoleBinding %q", c.binding)
			continue
		}
		var got []subj
		for _, s := range b.Subjects {
			got = append(got, subj{s.Kind, s.Name})
			if s.APIGroup != naming.Group("rbac.authorization.k8s.io") {
				t.Errorf("%s: subject %s has apiGroup %q", c.binding, s.Name, s.APIGroup)
			}
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s subjects = %v, want %v", c.binding, got, c.want)
		}
	}
	// Upstream 1.14+: discovery and basic-user are no longer granted to anonymous requests.
	for _, name := range []string{"system:discovery", "system:basic-user"} {
		for _, s := range byName[name].Subjects {
			if s.Name == GroupUnauthenticated {
				t.Errorf("%s granted to unauthenticated", name)
			}
		}
	}
}

// Upstream binds the node client roles to nobody by default (kubeadm binds nodeclient to
// system:bootstrappers and selfnodeclient to system:nodes): the default policy approves no node
// client request on its own.
func TestNodeClientRolesUnbound(t *testing.T) {
	cert := naming.Group("certificates.k8s.io")
	for _, b := range ClusterRoleBindings() {
		switch b.RoleRef.Name {
		case "system:" + cert + ":certificatesigningrequests:nodeclient", "system:" + cert + ":certificatesigningrequests:selfnodeclient":
			t.Errorf("default ClusterRoleBinding %s binds %s", b.Name, b.RoleRef.Name)
		}
	}
	for name, r := range clusterRolesByName(t) {
		if name == ClusterAdmin {
			continue
		}
		for _, sub := range []string{"certificatesigningrequests/nodeclient", "certificatesigningrequests/selfnodeclient"} {
			if allows(r.Rules, "create", cert, sub, "") && r.Name != "system:"+cert+":"+strings.ReplaceAll(sub, "/", ":") {
				t.Errorf("ClusterRole %s grants create on %s", name, sub)
			}
		}
	}
}

// Upstream's aggregated user-facing roles: admin ⊇ edit ⊇ view, each filled from the
// system:aggregate-to-* roles through its aggregationRule and labels.
func TestAggregatedRoles(t *testing.T) {
	roles := clusterRolesByName(t)
	for name, label := range map[string]string{"admin": AggregateToAdminLabel, "edit": AggregateToEditLabel, "view": AggregateToViewLabel} {
		r := roles[name]
		if r.AggregationRule == nil || len(r.AggregationRule.ClusterRoleSelectors) != 1 ||
			!reflect.DeepEqual(r.AggregationRule.ClusterRoleSelectors[0].MatchLabels, map[string]string{label: "true"}) {
			t.Errorf("%s aggregationRule = %+v", name, r.AggregationRule)
		}
		if len(r.Rules) != 0 {
			t.Errorf("%s has rules of its own: the aggregation controller owns them", name)
		}
	}
	if roles["edit"].Labels[AggregateToAdminLabel] != "true" || roles["view"].Labels[AggregateToEditLabel] != "true" {
		t.Errorf("edit must aggregate into admin and view into edit: %v %v", roles["edit"].Labels, roles["view"].Labels)
	}
	if AggregateToAdminLabel != "rbac.authorization."+naming.GroupSuffix+"/aggregate-to-admin" {
		t.Errorf("aggregation label %q", AggregateToAdminLabel)
	}

	aggregate(t, roles)
	type perm struct{ verb, group, resource string }
	apps := "apps"
	core := ""
	rbac := naming.Group("rbac.authorization.k8s.io")
	cases := []struct {
		rule  string
		perm  perm
		admin bool
		edit  bool
		view  bool
	}{
		{"view reads pods", perm{"get", core, "pods"}, true, true, true},
		{"view reads pod logs", perm{"get", core, "pods/log"}, true, true, true},
		{"view never reads secrets (escalating read)", perm{"get", core, "secrets"}, true, true, false},
		{"view cannot exec", perm{"create", core, "pods/exec"}, true, true, false},
		{"edit writes deployments", perm{"update", apps, "deployments"}, true, true, false},
		{"edit scales statefulsets", perm{"patch", apps, "statefulsets/scale"}, true, true, false},
		{"edit creates tokens", perm{"create", core, "serviceaccounts/token"}, true, true, false},
		{"edit impersonates service accounts", perm{"impersonate", core, "serviceaccounts"}, true, true, false},
		{"edit writes leases", perm{"update", naming.Group("coordination.k8s.io"), "leases"}, true, true, false},
		{"only admin writes roles", perm{"create", rbac, "roles"}, true, false, false},
		{"only admin writes rolebindings", perm{"delete", rbac, "rolebindings"}, true, false, false},
		{"only admin creates local access reviews", perm{"create", naming.Group("authorization.k8s.io"), "localsubjectaccessreviews"}, true, false, false},
		{"nobody writes resource quotas (namespace control)", perm{"update", core, "resourcequotas"}, false, false, false},
		{"nobody writes pod status (the system's)", perm{"update", core, "pods/status"}, false, false, false},
		{"nobody edits namespaces", perm{"delete", core, "namespaces"}, false, false, false},
	}
	for _, c := range cases {
		for role, want := range map[string]bool{"admin": c.admin, "edit": c.edit, "view": c.view} {
			if got := allows(roles[role].Rules, c.perm.verb, c.perm.group, c.perm.resource, ""); got != want {
				t.Errorf("%s: %s %v = %v, want %v", c.rule, role, c.perm, got, want)
			}
		}
	}
}

// Upstream's system roles, permission by permission.
func TestSystemRoles(t *testing.T) {
	roles := clusterRolesByName(t)
	cert := naming.Group("certificates.k8s.io")
	type check struct {
		rule, role, verb, group, resource, name string
		want                                    bool
	}
	cases := []check{
		{"cluster-admin may do everything", "cluster-admin", "escalate", rbacGroup, "clusterroles", "", true},
		{"basic-user creates self reviews", "system:basic-user", "create", naming.Group("authorization.k8s.io"), "selfsubjectaccessreviews", "", true},
		{"basic-user creates self rules reviews", "system:basic-user", "create", naming.Group("authorization.k8s.io"), "selfsubjectrulesreviews", "", true},
		{"basic-user creates self subject reviews", "system:basic-user", "create", naming.Group("authentication.k8s.io"), "selfsubjectreviews", "", true},
		{"basic-user reads nothing", "system:basic-user", "get", "", "pods", "", false},
		{"auth-delegator creates token reviews", "system:auth-delegator", "create", naming.Group("authentication.k8s.io"), "tokenreviews", "", true},
		{"node-bootstrapper creates CSRs", "system:node-bootstrapper", "create", cert, "certificatesigningrequests", "", true},
		{"node-bootstrapper cannot approve", "system:node-bootstrapper", "update", cert, "certificatesigningrequests/approval", "", false},
		{"nodeclient role", "system:" + cert + ":certificatesigningrequests:nodeclient", "create", cert, "certificatesigningrequests/nodeclient", "", true},
		{"selfnodeclient role", "system:" + cert + ":certificatesigningrequests:selfnodeclient", "create", cert, "certificatesigningrequests/selfnodeclient", "", true},
		{"client approver approves the spec's client signer", "system:" + cert + ":kube-apiserver-client-approver", "approve", cert, "signers", naming.SignerAPIServerClient, true},
		{"client approver approves no other signer", "system:" + cert + ":kube-apiserver-client-approver", "approve", cert, "signers", naming.SignerKubeletServing, false},
		{"kubelet client approver", "system:" + cert + ":kube-apiserver-client-kubelet-approver", "approve", cert, "signers", naming.SignerAPIServerClientKubelet, true},
		{"kubelet serving approver", "system:" + cert + ":kubelet-serving-approver", "approve", cert, "signers", naming.SignerKubeletServing, true},
		{"legacy-unknown approver", "system:" + cert + ":legacy-unknown-approver", "approve", cert, "signers", naming.SignerLegacyUnknown, true},
		{"approvers cannot sign", "system:" + cert + ":kubelet-serving-approver", "sign", cert, "signers", naming.SignerKubeletServing, false},
		{"node-proxier lists endpointslices", "system:node-proxier", "list", naming.Group("discovery.k8s.io"), "endpointslices", "", true},
		{"node-proxier records events", "system:node-proxier", "create", naming.Group("events.k8s.io"), "events", "", true},
		{"kubelet-api-admin proxies to nodes", "system:kubelet-api-admin", "get", "", "nodes/proxy", "", true},
	}
	for _, c := range cases {
		r, ok := roles[c.role]
		if !ok {
			t.Errorf("%s: no ClusterRole %q", c.rule, c.role)
			continue
		}
		if got := allows(r.Rules, c.verb, c.group, c.resource, c.name); got != c.want {
			t.Errorf("%s: %s %s %s/%s %q = %v, want %v", c.rule, c.role, c.verb, c.group, c.resource, c.name, got, c.want)
		}
	}
	urls := []struct {
		rule, role, path string
		want             bool
	}{
		{"discovery reads /apis/...", "system:discovery", "/apis/apps/v1", true},
		{"discovery reads openapi", "system:discovery", "/openapi/v3", true},
		{"discovery reads /version", "system:discovery", "/version", true},
		{"discovery does not read metrics", "system:discovery", "/metrics", false},
		{"public-info reads /healthz", "system:public-info-viewer", "/healthz", true},
		{"public-info reads /version/", "system:public-info-viewer", "/version/", true},
		{"public-info does not read /apis", "system:public-info-viewer", "/apis", false},
		{"public-info does not read individual checks", "system:public-info-viewer", "/readyz/etcd", false},
		{"monitoring reads metrics", "system:monitoring", "/metrics", true},
		{"monitoring reads SLIs", "system:monitoring", "/metrics/slis", true},
		{"monitoring reads individual checks", "system:monitoring", "/livez/ping", true},
		{"issuer discovery", "system:service-account-issuer-discovery", "/openid/v1/jwks", true},
		{"cluster-admin every URL", "cluster-admin", "/anything/at/all", true},
	}
	for _, c := range urls {
		if got := allowsURL(roles[c.role].Rules, "get", c.path); got != c.want {
			t.Errorf("%s: %s get %s = %v, want %v", c.rule, c.role, c.path, got, c.want)
		}
	}
	if !reflect.DeepEqual(roles[SystemNode].Rules, NodeRules()) {
		t.Errorf("system:node's rules differ from NodeRules()")
	}
}

// The Node authorizer's static rules (upstream NodeRules with 1.33's default feature gates).
func TestNodeRules(t *testing.T) {
	rules := NodeRules()
	core := ""
	cases := []struct {
		rule, verb, group, resource string
		want                        bool
	}{
		{"register its Node", "create", core, "nodes", true},
		{"update Node status", "patch", core, "nodes/status", true},
		{"update pod status", "update", core, "pods/status", true},
		{"mirror pods", "create", core, "pods", true},
		{"evict pods", "create", core, "pods/eviction", true},
		{"record events", "create", core, "events", true},
		{"rotate certificates", "create", naming.Group("certificates.k8s.io"), "certificatesigningrequests", true},
		{"heartbeat leases", "update", naming.Group("coordination.k8s.io"), "leases", true},
		{"CSINode", "create", naming.Group("storage.k8s.io"), "csinodes", true},
		{"runtime classes", "watch", naming.Group("node.k8s.io"), "runtimeclasses", true},
		{"service account tokens", "create", core, "serviceaccounts/token", true},
		{"pvc status", "patch", core, "persistentvolumeclaims/status", true},
		{"cannot update pods (only their status)", "update", core, "pods", false},
		{"cannot delete Nodes", "delete", core, "nodes", false},
		{"cannot write secrets", "update", core, "secrets", false},
		{"cannot approve CSRs", "update", naming.Group("certificates.k8s.io"), "certificatesigningrequests/approval", false},
	}
	for _, c := range cases {
		if got := allows(rules, c.verb, c.group, c.resource, ""); got != c.want {
			t.Errorf("%s: %s %s/%s = %v, want %v", c.rule, c.verb, c.group, c.resource, got, c.want)
		}
	}
}

// What the controllers service does, permission by permission (brief C and upstream's controller
// roles), and what it must not be able to do.
func TestControllersRole(t *testing.T) {
	roles := clusterRolesByName(t)
	r, ok := roles[naming.ControllerManagerUser]
	if !ok {
		t.Fatalf("no ClusterRole %q", naming.ControllerManagerUser)
	}
	core := ""
	cert := naming.Group("certificates.k8s.io")
	cases := []struct {
		rule, verb, group, resource, name string
		want                              bool
	}{
		{"namespace: finalize", "update", core, "namespaces/finalize", "", true},
		{"namespace: conditions", "update", core, "namespaces/status", "", true},
		{"namespace: remove", "delete", core, "namespaces", "", true},
		{"namespace: empty any kind, custom ones too", "deletecollection", "widgets.example.com", "widgets", "", true},
		{"namespace: list any kind", "list", naming.Group("networking.k8s.io"), "ingresses", "", true},
		{"serviceaccount: default accounts", "create", core, "serviceaccounts", "", true},
		{"token: fill Secrets", "update", core, "secrets", "", true},
		{"token: remove Secrets", "delete", core, "secrets", "", true},
		{"bootstrapsigner: cluster-info", "update", core, "configmaps", "", true},
		{"bootstrapsigner: create cluster-info", "create", core, "configmaps", "", true},
		{"leader election", "update", naming.Group("coordination.k8s.io"), "leases", "", true},
		{"aggregation: update ClusterRoles", "update", rbacGroup, "clusterroles", "", true},
		{"aggregation: escalate (the aggregated rules exceed its own)", "escalate", rbacGroup, "clusterroles", "", true},
		{"token reviews", "create", naming.Group("authentication.k8s.io"), "tokenreviews", "", true},
		{"access reviews", "create", naming.Group("authorization.k8s.io"), "subjectaccessreviews", "", true},
		{"CSR approval", "update", cert, "certificatesigningrequests/approval", "", true},
		{"CSR signing", "update", cert, "certificatesigningrequests/status", "", true},
		{"CSR clean-up", "delete", cert, "certificatesigningrequests", "", true},
		{"csrcleaner: list requests", "list", cert, "certificatesigningrequests", "", true},
		{"csrcleaner: watch requests", "watch", cert, "certificatesigningrequests", "", true},
		{"approve for a built-in signer", "approve", cert, "signers", naming.SignerAPIServerClientKubelet, true},
		{"csrapproving: watch requests", "watch", cert, "certificatesigningrequests", "", true},
		{"csrapproving: access reviews of the requesters", "create", naming.Group("authorization.k8s.io"), "subjectaccessreviews", "", true},
		{"csrapproving: approval", "update", cert, "certificatesigningrequests/approval", "", true},
		{"csrapproving: approve for the kubelet client signer", "approve", cert, "signers", naming.SignerAPIServerClientKubelet, true},
		{"csrapproving: no node client certificates for itself", "create", cert, "certificatesigningrequests/nodeclient", "", false},
		{"sign for a built-in signer", "sign", cert, "signers", naming.SignerAPIServerClient, true},
		{"not for other signers", "sign", cert, "signers", "example.com/custom", false},
		{"events", "patch", core, "events", "", true},
		{"least privilege: no pod creation", "create", core, "pods", "", false},
		{"least privilege: no binding", "bind", rbacGroup, "clusterroles", "", false},
		{"least privilege: no ClusterRole creation", "create", rbacGroup, "clusterroles", "", false},
		{"garbage collector: owner references and finalizers of any kind", "patch", "widgets.example.com", "widgets", "", true},
		{"least privilege: no impersonation", "impersonate", core, "users", "", false},
	}
	for _, c := range cases {
		if got := allows(r.Rules, c.verb, c.group, c.resource, c.name); got != c.want {
			t.Errorf("%s: %s %s/%s %q = %v, want %v", c.rule, c.verb, c.group, c.resource, c.name, got, c.want)
		}
	}
}

// Upstream's namespaced defaults and kubeadm's cluster-info reader.
func TestNamespaceRoles(t *testing.T) {
	roles := NamespaceRoles()
	find := func(ns, name string) rbacv1.Role {
		for _, r := range roles[ns] {
			if r.Name == name {
				return r
			}
		}
		t.Fatalf("no Role %s/%s", ns, name)
		return rbacv1.Role{}
	}
	info := find(naming.PublicNamespace, naming.Product+":bootstrap-signer-clusterinfo")
	if !allows(info.Rules, "get", "", "configmaps", "cluster-info") {
		t.Errorf("cluster-info reader cannot get cluster-info")
	}
	if allows(info.Rules, "get", "", "configmaps", "other") || allows(info.Rules, "list", "", "configmaps", "") {
		t.Errorf("cluster-info reader reads more than cluster-info")
	}
	signerPublic := find(naming.PublicNamespace, BootstrapSignerRole)
	if !allows(signerPublic.Rules, "update", "", "configmaps", "cluster-info") || allows(signerPublic.Rules, "update", "", "configmaps", "other") {
		t.Errorf("bootstrap signer must update cluster-info and only it")
	}
	signerSystem := find(naming.SystemNamespace, BootstrapSignerRole)
	if !allows(signerSystem.Rules, "watch", "", "secrets", "") || allows(signerSystem.Rules, "delete", "", "secrets", "x") {
		t.Errorf("bootstrap signer reads token Secrets and does not delete them")
	}
	cleaner := find(naming.SystemNamespace, TokenCleanerRole)
	if !allows(cleaner.Rules, "delete", "", "secrets", "bootstrap-token-abcdef") {
		t.Errorf("token cleaner cannot delete token Secrets")
	}
	reader := find(naming.SystemNamespace, "extension-apiserver-authentication-reader")
	if !allows(reader.Rules, "get", "", "configmaps", ExtensionAPIServerAuthentication) {
		t.Errorf("authentication reader cannot read its ConfigMap")
	}

	bindings := NamespaceRoleBindings()
	var infoBinding *rbacv1.RoleBinding
	for i, b := range bindings[naming.PublicNamespace] {
		if b.Name == ClusterInfoReader {
			infoBinding = &bindings[naming.PublicNamespace][i]
		}
	}
	if infoBinding == nil {
		t.Fatal("no cluster-info RoleBinding")
	}
	groups := map[string]bool{}
	for _, s := range infoBinding.Subjects {
		if s.Kind == rbacv1.GroupKind {
			groups[s.Name] = true
		}
	}
	if !groups[GroupAuthenticated] || !groups[GroupUnauthenticated] {
		t.Errorf("cluster-info must be readable by everyone: %v", infoBinding.Subjects)
	}
	for _, b := range bindings[naming.PublicNamespace] {
		if b.Name == BootstrapSignerRole {
			if len(b.Subjects) != 1 || b.Subjects[0].Kind != rbacv1.ServiceAccountKind || b.Subjects[0].Namespace != naming.SystemNamespace {
				t.Errorf("bootstrap signer binding subjects %v", b.Subjects)
			}
		}
	}
}

// The objects survive a JSON round trip unchanged: what is stored is what reconciliation compares.
func TestJSONRoundTrip(t *testing.T) {
	for _, r := range ClusterRoles() {
		js, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back rbacv1.ClusterRole
		if err := json.Unmarshal(js, &back); err != nil {
			t.Fatal(err)
		}
		if _, changed := ReconcileClusterRole(&back, &r); changed {
			t.Errorf("%s: reconciling the stored form against the default changes it", r.Name)
		}
	}
}
