package node

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/bootstrappolicy"
	"platform.io/libs/naming"
	"platform.io/services/authz/authorizer"
)

func nodeUser(name string) *authorizer.User {
	return &authorizer.User{Name: UserPrefix + name, Groups: []string{NodesGroup, "system:authenticated"}}
}

func secretRef(name string) *corev1.SecretKeySelector {
	return &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "k"}
}

// webPod references one object of every kind a pod can reference.
func webPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "web"},
		Spec: corev1.PodSpec{
			NodeName:           "node1",
			ServiceAccountName: "web-sa",
			ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "pull"}},
			InitContainers: []corev1.Container{{Name: "init", Env: []corev1.EnvVar{
				{Name: "A", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: secretRef("init-secret")}},
			}}},
			Containers: []corev1.Container{{
				Name: "app",
				Env: []corev1.EnvVar{
					{Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: secretRef("env-secret")}},
					{Name: "C", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "env-cm"}, Key: "k"}}},
					{Name: "D", Value: "plain"},
				},
				EnvFrom: []corev1.EnvFromSource{
					{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "envfrom-secret"}}},
					{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "envfrom-cm"}}},
				},
			}},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "debug", Env: []corev1.EnvVar{{Name: "E", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: secretRef("debug-secret")}}},
			}}},
			Volumes: []corev1.Volume{
				{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "vol-secret"}}},
				{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "vol-cm"}}}},
				{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "proj-secret"}}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "proj-cm"}}},
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
				}}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
				{Name: "rbd", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "rbd-claim"}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
				{Name: "inline", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d", NodePublishSecretRef: &corev1.LocalObjectReference{Name: "csi-secret"}}}},
			},
		},
	}
}

func simplePod(ns, name, node, secret string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{NodeName: node, ServiceAccountName: "default"},
	}
	if secret != "" {
		p.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}}
	}
	return p
}

func csiPV(name, claimNS, claim string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			ClaimRef: &corev1.ObjectReference{Namespace: claimNS, Name: claim},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver:                     "d",
				NodePublishSecretRef:       &corev1.SecretReference{Namespace: "ns1", Name: "pv-publish"},
				NodeStageSecretRef:         &corev1.SecretReference{Namespace: "ns2", Name: "pv-stage"},
				NodeExpandSecretRef:        &corev1.SecretReference{Namespace: "ns1", Name: "pv-expand"},
				ControllerPublishSecretRef: &corev1.SecretReference{Namespace: "ns1", Name: "pv-controller"},
				ControllerExpandSecretRef:  &corev1.SecretReference{Namespace: "ns1", Name: "pv-controller-expand"},
			}},
		},
	}
}

func va(name, node string) *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.VolumeAttachmentSpec{NodeName: node}}
}

// fixture: node1 runs web (every reference kind) and a mirror pod; node2 runs other; a pod is
// pending; volumes and attachments for both nodes.
func fixture() (*Graph, *Authorizer) {
	g := NewGraph()
	g.AddOrUpdatePod(webPod())
	mirror := simplePod("ns1", "mirror", "node1", "mirror-secret")
	mirror.Annotations = map[string]string{naming.MirrorPodAnnotation: "hash"}
	mirror.Spec.ServiceAccountName = "mirror-sa"
	g.AddOrUpdatePod(mirror)
	g.AddOrUpdatePod(simplePod("ns1", "other", "node2", "other-secret"))
	g.AddOrUpdatePod(simplePod("ns1", "pending", "", "pending-secret"))
	g.AddOrUpdatePV(csiPV("pv-data", "ns1", "data"))
	g.AddOrUpdatePV(csiPV("pv-unused", "ns1", "unused-claim"))
	// A source that predates secret namespaces: the claim's namespace applies.
	g.AddOrUpdatePV(&corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-rbd"},
		Spec: corev1.PersistentVolumeSpec{
			ClaimRef: &corev1.ObjectReference{Namespace: "ns1", Name: "rbd-claim"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{RBD: &corev1.RBDPersistentVolumeSource{
				SecretRef: &corev1.SecretReference{Name: "rbd-secret"},
			}},
		},
	})
	g.AddOrUpdatePV(&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-unbound"}})
	g.AddOrUpdateVolumeAttachment(va("va1", "node1"))
	g.AddOrUpdateVolumeAttachment(va("va2", "node2"))
	return g, NewAuthorizer(g, bootstrappolicy.NodeRules())
}

func res(user *authorizer.User, verb, group, resource, sub, ns, name string) authorizer.Attributes {
	return authorizer.Attributes{User: user, Verb: verb, ResourceRequest: true, APIGroup: group, APIVersion: "v1",
		Resource: resource, Subresource: sub, Namespace: ns, Name: name}
}

type nodeCase struct {
	rule   string
	attrs  authorizer.Attributes
	want   authorizer.Decision
	reason string // substring of the reason, when the decision explains itself
	// graph: the decision came from the graph, so it must be uncacheable and name-dependent.
	graph bool
}

func runCases(t *testing.T, a *Authorizer, cases []nodeCase) {
	t.Helper()
	for _, c := range cases {
		got, err := a.Authorize(context.Background(), c.attrs)
		if err != nil {
			t.Errorf("%s: error %v", c.rule, err)
			continue
		}
		if got.Decision != c.want {
			t.Errorf("%s: decision %v (%q), want %v", c.rule, got.Decision, got.Reason, c.want)
			continue
		}
		if c.reason != "" && !strings.Contains(got.Reason, c.reason) {
			t.Errorf("%s: reason %q, want it to contain %q", c.rule, got.Reason, c.reason)
		}
		if c.want == authorizer.Deny {
			t.Errorf("%s: the Node authorizer never denies", c.rule)
		}
		if c.graph && (!got.Uncacheable || got.NameIndependent) {
			t.Errorf("%s: a graph decision must be uncacheable and name-dependent: %+v", c.rule, got)
		}
		if !c.graph && got.Uncacheable {
			t.Errorf("%s: a decision that does not depend on the graph is cacheable: %+v", c.rule, got)
		}
	}
}

// Upstream's Node authorizer: what pods bound to a node give it access to.
func TestGraphReferences(t *testing.T) {
	_, a := fixture()
	n1 := nodeUser("node1")
	const allow, none = authorizer.Allow, authorizer.NoOpinion
	const noRel = "no relationship found between node 'node1' and this object"
	storage := naming.Group("storage.k8s.io")
	var cases []nodeCase
	for _, s := range []string{"pull", "init-secret", "env-secret", "envfrom-secret", "debug-secret", "vol-secret", "proj-secret", "csi-secret"} {
		cases = append(cases, nodeCase{"pod references secret " + s, res(n1, "get", "", "secrets", "", "ns1", s), allow, "", true})
	}
	for _, cm := range []string{"env-cm", "envfrom-cm", "vol-cm", "proj-cm"} {
		cases = append(cases, nodeCase{"pod references configmap " + cm, res(n1, "get", "", "configmaps", "", "ns1", cm), allow, "", true})
	}
	cases = append(cases,
		nodeCase{"a single secret may be watched by name", res(n1, "watch", "", "secrets", "", "ns1", "vol-secret"), allow, "", true},
		nodeCase{"a single configmap may be listed by name", res(n1, "list", "", "configmaps", "", "ns1", "vol-cm"), allow, "", true},
		nodeCase{"secret of a pod on another node", res(n1, "get", "", "secrets", "", "ns1", "other-secret"), none, noRel, true},
		nodeCase{"same name, other namespace", res(n1, "get", "", "secrets", "", "ns2", "pull"), none, noRel, true},
		nodeCase{"mirror pods grant nothing", res(n1, "get", "", "secrets", "", "ns1", "mirror-secret"), none, noRel, true},
		nodeCase{"mirror pods grant no token", res(n1, "create", "", "serviceaccounts", "token", "ns1", "mirror-sa"), none, noRel, true},
		nodeCase{"unbound pods grant nothing", res(n1, "get", "", "secrets", "", "ns1", "pending-secret"), none, noRel, true},
		nodeCase{"unknown configmap", res(n1, "get", "", "configmaps", "", "ns1", "nope"), none, noRel, true},
		nodeCase{"claim of a pod", res(n1, "get", "", "persistentvolumeclaims", "", "ns1", "data"), allow, "", true},
		nodeCase{"ephemeral volume claim <pod>-<volume>", res(n1, "get", "", "persistentvolumeclaims", "", "ns1", "web-scratch"), allow, "", true},
		nodeCase{"claim nobody on the node uses", res(n1, "get", "", "persistentvolumeclaims", "", "ns1", "unused-claim"), none, noRel, true},
		nodeCase{"claim status update (expansion)", res(n1, "update", "", "persistentvolumeclaims", "status", "ns1", "data"), allow, "", true},
		nodeCase{"claim status of an unrelated claim", res(n1, "patch", "", "persistentvolumeclaims", "status", "ns1", "unused-claim"), none, noRel, true},
		nodeCase{"volume bound to a pod's claim", res(n1, "get", "", "persistentvolumes", "", "", "pv-data"), allow, "", true},
		nodeCase{"volume bound to an unused claim", res(n1, "get", "", "persistentvolumes", "", "", "pv-unused"), none, noRel, true},
		nodeCase{"unbound volume", res(n1, "get", "", "persistentvolumes", "", "", "pv-unbound"), none, noRel, true},
		nodeCase{"volume's node publish secret", res(n1, "get", "", "secrets", "", "ns1", "pv-publish"), allow, "", true},
		nodeCase{"volume's node stage secret in its own namespace", res(n1, "get", "", "secrets", "", "ns2", "pv-stage"), allow, "", true},
		nodeCase{"volume's node expand secret", res(n1, "get", "", "secrets", "", "ns1", "pv-expand"), allow, "", true},
		nodeCase{"volume's controller publish secret is not the node's", res(n1, "get", "", "secrets", "", "ns1", "pv-controller"), none, noRel, true},
		nodeCase{"volume's controller expand secret is not the node's", res(n1, "get", "", "secrets", "", "ns1", "pv-controller-expand"), none, noRel, true},
		nodeCase{"legacy volume secret takes the claim's namespace", res(n1, "get", "", "secrets", "", "ns1", "rbd-secret"), allow, "", true},
		nodeCase{"attachment to the node", res(n1, "get", storage, "volumeattachments", "", "", "va1"), allow, "", true},
		nodeCase{"attachment to another node", res(n1, "get", storage, "volumeattachments", "", "", "va2"), none, noRel, true},
		nodeCase{"token of its pod's service account", res(n1, "create", "", "serviceaccounts", "token", "ns1", "web-sa"), allow, "", true},
		nodeCase{"token of another node's pod's account", res(n1, "create", "", "serviceaccounts", "token", "ns1", "default"), none, noRel, true},
		nodeCase{"its own pod", res(n1, "get", "", "pods", "", "ns1", "web"), allow, "", true},
		nodeCase{"its mirror pod", res(n1, "get", "", "pods", "", "ns1", "mirror"), allow, "", true},
		nodeCase{"another node's pod", res(n1, "get", "", "pods", "", "ns1", "other"), none, noRel, true},
		nodeCase{"watch of one of its pods by name", res(n1, "watch", "", "pods", "", "ns1", "web"), allow, "", true},
	)
	runCases(t, a, cases)

	// The other node sees its own pod's objects and not node1's.
	n2 := nodeUser("node2")
	runCases(t, a, []nodeCase{
		{"node2: its pod's secret", res(n2, "get", "", "secrets", "", "ns1", "other-secret"), allow, "", true},
		{"node2: node1's secret", res(n2, "get", "", "secrets", "", "ns1", "vol-secret"), none, "no relationship found between node 'node2' and this object", true},
		{"node2: its attachment", res(n2, "get", storage, "volumeattachments", "", "", "va2"), allow, "", true},
		{"node2: its pod's default account token", res(n2, "create", "", "serviceaccounts", "token", "ns1", "default"), allow, "", true},
	})
}

// Upstream's verb and shape restrictions, and the node rules for everything else.
func TestRequestShapesAndRules(t *testing.T) {
	_, a := fixture()
	n1 := nodeUser("node1")
	const allow, none = authorizer.Allow, authorizer.NoOpinion
	coord := naming.Group("coordination.k8s.io")
	storage := naming.Group("storage.k8s.io")
	runCases(t, a, []nodeCase{
		// Secrets and ConfigMaps: read single namespaced objects.
		{"secrets: no writes", res(n1, "update", "", "secrets", "", "ns1", "vol-secret"), none, "can only read resources of this type", false},
		{"secrets: no subresources", res(n1, "get", "", "secrets", "status", "ns1", "vol-secret"), none, "cannot read subresource", false},
		{"secrets: namespaced only", res(n1, "list", "", "secrets", "", "", ""), none, "can only read namespaced object of this type", false},
		{"secrets: no list of a namespace", res(n1, "list", "", "secrets", "", "ns1", ""), none, "No Object name found", false},
		// Claims, volumes, attachments: get only.
		{"claims: get only", res(n1, "list", "", "persistentvolumeclaims", "", "ns1", ""), none, "can only get individual resources of this type", false},
		{"claims: no delete", res(n1, "delete", "", "persistentvolumeclaims", "", "ns1", "data"), none, "can only get individual resources of this type", false},
		{"claims: status is update/patch only", res(n1, "get", "", "persistentvolumeclaims", "status", "ns1", "data"), none, "can only get/update/patch this type", false},
		{"volumes: get only", res(n1, "watch", "", "persistentvolumes", "", "", "pv-data"), none, "can only get individual resources of this type", false},
		{"volumes: no subresource", res(n1, "get", "", "persistentvolumes", "status", "", "pv-data"), none, "cannot get subresource", false},
		{"attachments: get only", res(n1, "list", storage, "volumeattachments", "", "", ""), none, "can only get individual resources of this type", false},
		// Service accounts: only tokens.
		{"service accounts: not readable", res(n1, "get", "", "serviceaccounts", "", "ns1", "web-sa"), none, "can only create tokens for individual service accounts", false},
		{"service accounts: only the token subresource", res(n1, "create", "", "serviceaccounts", "", "ns1", "web-sa"), none, "can only create token subresource of serviceaccount", false},
		// Leases: its own, in the node lease namespace.
		{"lease: its own", res(n1, "update", coord, "leases", "", naming.NodeLeaseNamespace, "node1"), allow, "", false},
		{"lease: create (name checked by admission)", res(n1, "create", coord, "leases", "", naming.NodeLeaseNamespace, ""), allow, "", false},
		{"lease: another node's", res(n1, "get", coord, "leases", "", naming.NodeLeaseNamespace, "node2"), none, "can only access node lease with the same name as the requesting node", false},
		{"lease: other namespace", res(n1, "get", coord, "leases", "", naming.SystemNamespace, "node1"), none, fmt.Sprintf("can only access leases in the %q system namespace", naming.NodeLeaseNamespace), false},
		{"lease: no list", res(n1, "list", coord, "leases", "", naming.NodeLeaseNamespace, ""), none, "can only get, create, update, patch, or delete a node lease", false},
		{"lease: upstream's group is not ours", res(n1, "update", "coordination.k8s.io", "leases", "", naming.NodeLeaseNamespace, "node1"), none, "", false},
		// CSINode: its own.
		{"csinode: its own", res(n1, "patch", storage, "csinodes", "", "", "node1"), allow, "", false},
		{"csinode: create", res(n1, "create", storage, "csinodes", "", "", ""), allow, "", false},
		{"csinode: another node's", res(n1, "delete", storage, "csinodes", "", "", "node2"), none, "can only access CSINode with the same name as the requesting node", false},
		{"csinode: no list", res(n1, "list", storage, "csinodes", "", "", ""), none, "can only get, create, update, patch, or delete a CSINode", false},
		{"csinode: no subresources", res(n1, "get", storage, "csinodes", "status", "", "node1"), none, "cannot authorize CSINode subresources", false},
		// Nodes: read its own, write (admission limits to its own).
		{"node: read its own", res(n1, "get", "", "nodes", "", "", "node1"), allow, "", false},
		{"node: watch its own by name", res(n1, "watch", "", "nodes", "", "", "node1"), allow, "", false},
		{"node: not another node", res(n1, "get", "", "nodes", "", "", "node2"), none, "node 'node1' cannot read 'node2', only its own Node object", false},
		{"node: not all nodes", res(n1, "list", "", "nodes", "", "", ""), none, "node 'node1' cannot read all nodes, only its own Node object", false},
		{"node: register", res(n1, "create", "", "nodes", "", "", ""), allow, "", false},
		{"node: status", res(n1, "patch", "", "nodes", "status", "", "node1"), allow, "", false},
		{"node: cannot delete", res(n1, "delete", "", "nodes", "", "", "node1"), none, "", false},
		// Pods.
		{"pods: mirror pod create", res(n1, "create", "", "pods", "", "ns1", ""), allow, "", false},
		{"pods: status", res(n1, "update", "", "pods", "status", "ns1", "web"), allow, "", false},
		{"pods: eviction", res(n1, "create", "", "pods", "eviction", "ns1", "web"), allow, "", false},
		{"pods: no update", res(n1, "update", "", "pods", "", "ns1", "web"), none, "", false},
		{"pods: no logs", res(n1, "get", "", "pods", "log", "ns1", "web"), none, "", false},
		{"pods: list without a name falls back to the node rules (no field selector here)", res(n1, "list", "", "pods", "", "", ""), allow, "", false},
		// The node rules.
		{"rules: events", res(n1, "create", "", "events", "", "ns1", ""), allow, "", false},
		{"rules: services", res(n1, "watch", "", "services", "", "", ""), allow, "", false},
		{"rules: token reviews", res(n1, "create", naming.Group("authentication.k8s.io"), "tokenreviews", "", "", ""), allow, "", false},
		{"rules: CSRs", res(n1, "create", naming.Group("certificates.k8s.io"), "certificatesigningrequests", "", "", ""), allow, "", false},
		{"rules: runtime classes", res(n1, "list", naming.Group("node.k8s.io"), "runtimeclasses", "", "", ""), allow, "", false},
		{"rules: nothing else", res(n1, "create", "", "namespaces", "", "", ""), none, "", false},
		{"rules: no deployments", res(n1, "get", "apps", "deployments", "", "ns1", "d"), none, "", false},
		{"rules: no URLs", authorizer.Attributes{User: n1, Verb: "get", Path: "/healthz"}, none, "", false},
	})
}

// Upstream's node identifier: only system:node:<name> users in group system:nodes.
func TestNonNodeUsersUntouched(t *testing.T) {
	_, a := fixture()
	get := func(u *authorizer.User) authorizer.Attributes {
		return res(u, "get", "", "secrets", "", "ns1", "vol-secret")
	}
	for _, c := range []struct {
		rule string
		user *authorizer.User
	}{
		{"ordinary user", &authorizer.User{Name: "alice", Groups: []string{"system:authenticated"}}},
		{"node name without the nodes group", &authorizer.User{Name: UserPrefix + "node1", Groups: []string{"system:authenticated"}}},
		{"nodes group without a node name", &authorizer.User{Name: "alice", Groups: []string{NodesGroup}}},
		{"service account", &authorizer.User{Name: "system:serviceaccount:ns1:web-sa", Groups: []string{"system:serviceaccounts"}}},
		{"no user", nil},
	} {
		got, err := a.Authorize(context.Background(), get(c.user))
		if err != nil || got.Decision != authorizer.NoOpinion || got.Reason != "" || !got.NameIndependent || got.Uncacheable {
			t.Errorf("%s: %+v %v, want a cacheable, name-independent no opinion", c.rule, got, err)
		}
		res, nonRes, incomplete, err := a.RulesFor(context.Background(), c.user, "ns1")
		if res != nil || nonRes != nil || incomplete || err != nil {
			t.Errorf("%s: RulesFor = %v %v %v %v", c.rule, res, nonRes, incomplete, err)
		}
	}
	got, _ := a.Authorize(context.Background(), get(nodeUser("")))
	if got.Decision != authorizer.NoOpinion || got.Reason != `unknown node for user "system:node:"` {
		t.Errorf("empty node name: %+v", got)
	}
	if _, _, incomplete, err := a.RulesFor(context.Background(), nodeUser("node1"), "ns1"); !incomplete || err != ErrNoRuleResolution {
		t.Errorf("nodes' rules cannot be listed: incomplete=%v err=%v", incomplete, err)
	}
}

func decide(t *testing.T, a *Authorizer, at authorizer.Attributes) authorizer.Decision {
	t.Helper()
	r, err := a.Authorize(context.Background(), at)
	if err != nil {
		t.Fatal(err)
	}
	return r.Decision
}

// Access follows the graph: deleting or rebinding pods, volumes and attachments takes it away.
func TestDeletionRemovesAccess(t *testing.T) {
	g, a := fixture()
	n1 := nodeUser("node1")
	secret := func(ns, name string) authorizer.Attributes { return res(n1, "get", "", "secrets", "", ns, name) }
	gen := g.Generation()

	// Two pods share a secret: access lasts until the last one goes.
	g.AddOrUpdatePod(simplePod("ns1", "a", "node1", "shared"))
	g.AddOrUpdatePod(simplePod("ns1", "b", "node1", "shared"))
	if g.Generation() != gen+2 {
		t.Errorf("generation %d after two pods, want %d", g.Generation(), gen+2)
	}
	g.DeletePod("ns1", "a")
	if decide(t, a, secret("ns1", "shared")) != authorizer.Allow {
		t.Errorf("shared secret lost while pod b still uses it")
	}
	g.DeletePod("ns1", "b")
	if decide(t, a, secret("ns1", "shared")) != authorizer.NoOpinion {
		t.Errorf("shared secret still readable after both pods went")
	}

	// Deleting web takes away everything it gave, including volumes through its claim.
	before := g.Generation()
	g.DeletePod("ns1", "web")
	if g.Generation() <= before {
		t.Errorf("generation did not grow on delete")
	}
	for _, at := range []authorizer.Attributes{
		secret("ns1", "vol-secret"), secret("ns1", "pull"), secret("ns1", "pv-publish"), secret("ns1", "rbd-secret"),
		res(n1, "get", "", "configmaps", "", "ns1", "env-cm"),
		res(n1, "get", "", "persistentvolumeclaims", "", "ns1", "data"),
		res(n1, "get", "", "persistentvolumes", "", "", "pv-data"),
		res(n1, "create", "", "serviceaccounts", "token", "ns1", "web-sa"),
		res(n1, "get", "", "pods", "", "ns1", "web"),
	} {
		if d := decide(t, a, at); d != authorizer.NoOpinion {
			t.Errorf("after deleting the pod, %s %s/%s is still %v", at.Resource, at.Namespace, at.Name, d)
		}
	}
	// Deleting an unknown pod changes nothing.
	before = g.Generation()
	g.DeletePod("ns1", "web")
	if g.Generation() != before {
		t.Errorf("generation grew on a no-op delete")
	}

	// Re-adding the same pod twice is one change.
	g.AddOrUpdatePod(webPod())
	before = g.Generation()
	g.AddOrUpdatePod(webPod())
	if g.Generation() != before {
		t.Errorf("generation grew on an identical update")
	}
	if decide(t, a, secret("ns1", "pv-publish")) != authorizer.Allow {
		t.Errorf("volume secret not back with the pod")
	}
	// A volume rebound to another claim leaves the node.
	g.AddOrUpdatePV(csiPV("pv-data", "ns1", "unused-claim"))
	if decide(t, a, secret("ns1", "pv-publish")) != authorizer.NoOpinion || decide(t, a, res(n1, "get", "", "persistentvolumes", "", "", "pv-data")) != authorizer.NoOpinion {
		t.Errorf("rebinding the volume did not take its access away")
	}
	g.AddOrUpdatePV(csiPV("pv-data", "ns1", "data"))
	g.DeletePV("pv-data")
	if decide(t, a, secret("ns1", "pv-publish")) != authorizer.NoOpinion {
		t.Errorf("deleting the volume did not take its secret away")
	}
	// A pod that loses its node (re-added without one) gives nothing.
	p := webPod()
	p.Spec.NodeName = ""
	g.AddOrUpdatePod(p)
	if decide(t, a, secret("ns1", "vol-secret")) != authorizer.NoOpinion {
		t.Errorf("unbound pod still grants")
	}
	// Attachments.
	g.AddOrUpdateVolumeAttachment(va("va1", "node2"))
	if decide(t, a, res(n1, "get", naming.Group("storage.k8s.io"), "volumeattachments", "", "", "va1")) != authorizer.NoOpinion {
		t.Errorf("attachment moved to node2 still readable by node1")
	}
	g.DeleteVolumeAttachment("va1")
	if decide(t, a, res(nodeUser("node2"), "get", naming.Group("storage.k8s.io"), "volumeattachments", "", "", "va1")) != authorizer.NoOpinion {
		t.Errorf("deleted attachment still readable")
	}
	// Nothing leaks: with every pod gone the graph holds no node.
	g.DeletePod("ns1", "mirror")
	g.DeletePod("ns1", "other")
	g.mu.RLock()
	defer g.mu.RUnlock()
	if len(g.nodes) != 0 || len(g.pods) != 0 {
		t.Errorf("graph keeps %d nodes and %d pods after every pod went", len(g.nodes), len(g.pods))
	}
}

// Writers and readers at once (run with -race); afterwards the graph is exact: each writer's
// even pods remain and grant their secret to their node only, odd ones were deleted.
func TestConcurrentUpdatesAndDecisions(t *testing.T) {
	g := NewGraph()
	a := NewAuthorizer(g, bootstrappolicy.NodeRules())
	const writers, podsPerWriter, readers = 4, 200, 4
	podName := func(w, i int) string { return fmt.Sprintf("w%d-p%d", w, i) }
	secretName := func(w, i int) string { return fmt.Sprintf("s-%d-%d", w, i) }
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			node := fmt.Sprintf("node%d", w)
			for i := 0; i < podsPerWriter; i++ {
				g.AddOrUpdatePod(simplePod("ns", podName(w, i), node, secretName(w, i)))
				g.AddOrUpdatePV(csiPV(fmt.Sprintf("pv-%d-%d", w, i), "ns", "c"))
				g.AddOrUpdateVolumeAttachment(va(fmt.Sprintf("va-%d-%d", w, i), node))
				if i%2 == 1 {
					g.DeletePod("ns", podName(w, i))
				}
			}
		}(w)
	}
	stop := make(chan struct{})
	var readerWG sync.WaitGroup
	for r := 0; r < readers; r++ {
		readerWG.Add(1)
		go func(r int) {
			defer readerWG.Done()
			w := r % writers
			u := nodeUser(fmt.Sprintf("node%d", w))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				got, err := a.Authorize(context.Background(), res(u, "get", "", "secrets", "", "ns", secretName(w, i%podsPerWriter)))
				if err != nil || got.Decision == authorizer.Deny || !got.Uncacheable {
					t.Errorf("reader: %+v %v", got, err)
					return
				}
				_ = g.Generation()
			}
		}(r)
	}
	wg.Wait()
	close(stop)
	readerWG.Wait()
	for w := 0; w < writers; w++ {
		for i := 0; i < podsPerWriter; i++ {
			want := authorizer.NoOpinion
			if i%2 == 0 {
				want = authorizer.Allow
			}
			if got := decide(t, a, res(nodeUser(fmt.Sprintf("node%d", w)), "get", "", "secrets", "", "ns", secretName(w, i))); got != want {
				t.Errorf("node%d secret %s: %v, want %v", w, secretName(w, i), got, want)
			}
			if got := decide(t, a, res(nodeUser(fmt.Sprintf("node%d", (w+1)%writers)), "get", "", "secrets", "", "ns", secretName(w, i))); got != authorizer.NoOpinion {
				t.Errorf("another node reads %s", secretName(w, i))
			}
		}
	}
	// Every mutation was counted: pods, volumes, attachments added, odd pods deleted.
	if want := uint64(writers * (podsPerWriter*3 + podsPerWriter/2)); g.Generation() != want {
		t.Errorf("generation %d, want %d", g.Generation(), want)
	}
}

func BenchmarkAuthorizeSecret(b *testing.B) {
	g := NewGraph()
	for i := 0; i < 10000; i++ {
		g.AddOrUpdatePod(simplePod("ns", fmt.Sprintf("p%d", i), fmt.Sprintf("node%d", i%100), fmt.Sprintf("s%d", i)))
	}
	a := NewAuthorizer(g, bootstrappolicy.NodeRules())
	at := res(nodeUser("node7"), "get", "", "secrets", "", "ns", "s4507")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, _ := a.Authorize(context.Background(), at)
		if r.Decision != authorizer.Allow {
			b.Fatal(r)
		}
	}
}

func BenchmarkAddPod(b *testing.B) {
	g := NewGraph()
	p := webPod()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p.Name = fmt.Sprintf("p%d", i%10000)
		g.AddOrUpdatePod(p)
	}
}
