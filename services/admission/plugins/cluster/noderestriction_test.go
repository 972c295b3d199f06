package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/admission/admissiontest"
)

// objectsWithPods is an admission.Objects that keeps pods too.
type objectsWithPods struct {
	*admissiontest.Objects
	pods admissiontest.Lister[*corev1.Pod]
}

func (o *objectsWithPods) Pods() admission.Lister[*corev1.Pod] { return &o.pods }

var node1 = &admission.User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}

func mirrorPod(mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "static-web-n1", Namespace: "ns", Annotations: map[string]string{naming.MirrorPodAnnotation: "hash"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "node-uid", Controller: ptr(true)}}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func boundPod(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "uid-x"}, Spec: corev1.PodSpec{NodeName: node}}
}

func csrPEM(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func nodeObj(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
}

func TestNodeRestriction(t *testing.T) {
	slice := func(node string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": naming.Group("resource.k8s.io") + "/v1beta1", "kind": "ResourceSlice",
			"metadata": map[string]any{"name": "s"}, "spec": map[string]any{"nodeName": node, "driver": "gpu.example.com"}}}
	}
	tokenRequest := func(ref *authenticationv1.BoundObjectReference) *authenticationv1.TokenRequest {
		return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: ref}}
	}
	podRef := func(name, uid string) *authenticationv1.BoundObjectReference {
		return &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: name, UID: types.UID(uid)}
	}
	taint := corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	withPVCLabel := claim(func(c *corev1.PersistentVolumeClaim) { c.Labels = map[string]string{"x": "y"} })
	grown := claim(func(c *corev1.PersistentVolumeClaim) {
		c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
	})

	cases := []struct {
		name    string
		user    *admission.User
		attrs   *admission.Attributes
		noPods  bool
		wantErr string
		// wantCode when not 403.
		wantCode int32
	}{
		// Who is a node.
		{name: "upstream: other users are not restricted", user: &admission.User{Name: "alice"},
			attrs: attrs(admission.Update, "", "nodes", "", "", "n2", nodeObj("n2", nil, taint), nodeObj("n2", nil))},
		{name: "upstream: a node name without the system:nodes group is not a node", user: &admission.User{Name: "system:node:n1"},
			attrs: attrs(admission.Delete, "", "nodes", "", "", "n1", nil, nodeObj("n1", nil))},
		{name: "upstream: a node user without a name is refused", user: &admission.User{Name: "system:node:", Groups: []string{"system:nodes"}},
			attrs: attrs(admission.Update, "", "nodes", "", "", "n1", nodeObj("n1", nil), nodeObj("n1", nil)), wantErr: `nodes "n1" is forbidden: could not determine node from user "system:node:"`},

		// Its Node.
		{name: "upstream: a node registers itself", attrs: attrs(admission.Create, "", "nodes", "", "", "", nodeObj("n1", map[string]string{naming.LabelHostname: "n1", naming.LabelOS: "linux", naming.LabelTopologyZone: "z1", "kubelet." + naming.GroupSuffix + "/x": "1", "sub.node." + naming.GroupSuffix + "/y": "2", "example.com/team": "a"}), nil)},
		{name: "upstream: a node may not write another node", attrs: attrs(admission.Update, "", "nodes", "status", "", "n2", nodeObj("n2", nil), nodeObj("n2", nil)),
			wantErr: `nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2"`},
		{name: "the spec: a node may not set node-restriction labels",
			attrs:   attrs(admission.Create, "", "nodes", "", "", "n1", nodeObj("n1", map[string]string{naming.LabelNamespaceNodeRestriction + "/pool": "secure"}), nil),
			wantErr: `nodes "n1" is forbidden: node "n1" is not allowed to set the following labels: ` + naming.LabelNamespaceNodeRestriction + `/pool`},
		{name: "the spec: other platform and k8s.io labels are restricted",
			attrs:   attrs(admission.Create, "", "nodes", "", "", "n1", nodeObj("n1", map[string]string{"node-role." + naming.GroupSuffix + "/control-plane": "", "x.k8s.io/y": "z"}), nil),
			wantErr: `nodes "n1" is forbidden: node "n1" is not allowed to set the following labels: node-role.` + naming.GroupSuffix + `/control-plane, x.k8s.io/y`},
		{name: "upstream: a node may not change its taints", attrs: attrs(admission.Update, "", "nodes", "", "", "n1", nodeObj("n1", nil), nodeObj("n1", nil, taint)),
			wantErr: `nodes "n1" is forbidden: node "n1" is not allowed to modify taints`},
		{name: "upstream: a node may not remove a restricted label on update",
			attrs:   attrs(admission.Update, "", "nodes", "", "", "n1", nodeObj("n1", nil), nodeObj("n1", map[string]string{naming.LabelNamespaceNodeRestriction + "/pool": "a"})),
			wantErr: `nodes "n1" is forbidden: is not allowed to modify labels: ` + naming.LabelNamespaceNodeRestriction + `/pool`},
		{name: "upstream: a node may update its allowed labels and status", attrs: attrs(admission.Update, "", "nodes", "status", "", "n1",
			nodeObj("n1", map[string]string{naming.LabelArch: "arm64"}, taint), nodeObj("n1", map[string]string{naming.LabelArch: "amd64"}, taint))},
		{name: "upstream: a node may not create itself with a config source",
			attrs:   attrs(admission.Create, "", "nodes", "", "", "n1", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ConfigSource: &corev1.NodeConfigSource{}}}, nil),
			wantErr: `nodes "n1" is forbidden: node "n1" is not allowed to create pods with a non-nil configSource`},
		{name: "the spec: a node may not delete its Node", attrs: attrs(admission.Delete, "", "nodes", "", "", "n1", nil, nodeObj("n1", nil)),
			wantErr: `nodes "n1" is forbidden: node "n1" is not allowed to delete node "n1"`},

		// Mirror pods.
		{name: "upstream: a node creates a mirror pod of itself", attrs: attrs(admission.Create, "", "pods", "", "ns", "static-web-n1", mirrorPod(), nil)},
		{name: "upstream: only mirror pods", attrs: attrs(admission.Create, "", "pods", "", "ns", "p", mirrorPod(func(p *corev1.Pod) { p.Annotations = nil; p.Name = "p" }), nil),
			wantErr: `pods "p" is forbidden: pod does not have "` + naming.MirrorPodAnnotation + `" annotation, node "n1" can only create mirror pods`},
		{name: "upstream: only bound to itself", attrs: attrs(admission.Create, "", "pods", "", "ns", "static-web-n1", mirrorPod(func(p *corev1.Pod) { p.Spec.NodeName = "n2" }), nil),
			wantErr: `pods "static-web-n1" is forbidden: node "n1" can only create pods with spec.nodeName set to itself`},
		{name: "upstream: owned by itself", attrs: attrs(admission.Create, "", "pods", "", "ns", "static-web-n1", mirrorPod(func(p *corev1.Pod) { p.OwnerReferences = nil }), nil),
			wantErr: `pods "static-web-n1" is forbidden: node "n1" can only create pods with an owner reference set to itself`},
		{name: "upstream: as controller", attrs: attrs(admission.Create, "", "pods", "", "ns", "static-web-n1", mirrorPod(func(p *corev1.Pod) { p.OwnerReferences[0].Controller = nil }), nil),
			wantErr: `pods "static-web-n1" is forbidden: node "n1" can only create pods with a controller owner reference set to itself`},
		{name: "upstream: not blocking its deletion", attrs: attrs(admission.Create, "", "pods", "", "ns", "static-web-n1", mirrorPod(func(p *corev1.Pod) { p.OwnerReferences[0].BlockOwnerDeletion = ptr(true) }), nil),
			wantErr: `pods "static-web-n1" is forbidden: node "n1" must not set blockOwnerDeletion on an owner reference`},
		{name: "upstream: with its node's uid", attrs: attrs(admission.Create, "", "pods", "", "ns", "static-web-n1", mirrorPod(func(p *corev1.Pod) { p.OwnerReferences[0].UID = "old" }), nil),
			wantErr: `pods "static-web-n1" is forbidden: node n1 UID mismatch: expected old got node-uid`},
		{name: "upstream: referencing no secret", attrs: attrs(admission.Create, "", "pods", "", "ns", "static-web-n1", mirrorPod(func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}}}
		}), nil), wantErr: `pods "static-web-n1" is forbidden: node "n1" can not create pods that reference secrets`},
		{name: "upstream: referencing no configmap", attrs: attrs(admission.Create, "", "pods", "", "ns", "static-web-n1", mirrorPod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{}}}}}}}
		}), nil), wantErr: `pods "static-web-n1" is forbidden: node "n1" can not create pods that reference configmaps`},
		{name: "upstream: referencing no claim", attrs: attrs(admission.Create, "", "pods", "", "ns", "static-web-n1", mirrorPod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}
		}), nil), wantErr: `pods "static-web-n1" is forbidden: node "n1" can not create pods that reference persistentvolumeclaims`},
		{name: "upstream: referencing no service account", attrs: attrs(admission.Create, "", "pods", "", "ns", "static-web-n1", mirrorPod(func(p *corev1.Pod) { p.Spec.ServiceAccountName = "default" }), nil),
			wantErr: `pods "static-web-n1" is forbidden: node "n1" can not create pods that reference a service account`},
		{name: "upstream: the owner node must exist", user: &admission.User{Name: "system:node:n9", Groups: []string{"system:nodes"}},
			attrs:   attrs(admission.Create, "", "pods", "", "ns", "static-web-n1", mirrorPod(func(p *corev1.Pod) { p.Spec.NodeName = "n9"; p.OwnerReferences[0].Name = "n9" }), nil),
			wantErr: `nodes "n9" not found`, wantCode: 404},

		// Its pods.
		{name: "upstream: a node deletes its own pods", attrs: attrs(admission.Delete, "", "pods", "", "ns", "p", nil, boundPod("p", "n1"))},
		{name: "upstream: not other nodes' pods", attrs: attrs(admission.Delete, "", "pods", "", "ns", "p", nil, boundPod("p", "n2")),
			wantErr: `pods "p" is forbidden: node "n1" can only delete pods with spec.nodeName set to itself`},
		{name: "upstream: a node may not update pods", attrs: attrs(admission.Update, "", "pods", "", "ns", "p", boundPod("p", "n1"), boundPod("p", "n1")),
			wantErr: `pods "p" is forbidden: unexpected operation "UPDATE", node "n1" can only create and delete mirror pods`},
		{name: "upstream: a node updates the status of its pods", attrs: attrs(admission.Update, "", "pods", "status", "ns", "p", boundPod("p", "n1"), boundPod("p", "n1"))},
		{name: "upstream: not of other nodes' pods", attrs: attrs(admission.Update, "", "pods", "status", "ns", "p", boundPod("p", "n2"), boundPod("p", "n2")),
			wantErr: `pods "p" is forbidden: node "n1" can only update pod status for pods with spec.nodeName set to itself`},
		{name: "upstream: and not labels through status", attrs: attrs(admission.Update, "", "pods", "status", "ns", "p",
			func() *corev1.Pod { p := boundPod("p", "n1"); p.Labels = map[string]string{"a": "b"}; return p }(), boundPod("p", "n1")),
			wantErr: `pods "p" is forbidden: node "n1" cannot update labels through pod status`},
		{name: "upstream: a node evicts its own pods", attrs: attrs(admission.Create, "", "pods", "eviction", "ns", "mine", &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}, nil)},
		{name: "upstream: not other nodes' pods (eviction)", attrs: attrs(admission.Create, "", "pods", "eviction", "ns", "theirs", &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "theirs"}}, nil),
			wantErr: `pods "theirs" is forbidden: node n1 can only evict pods with spec.nodeName set to itself`},
		{name: "upstream: an eviction of a missing pod is 404", attrs: attrs(admission.Create, "", "pods", "eviction", "ns", "gone", &policyv1.Eviction{}, nil),
			wantErr: `pods "gone" not found`, wantCode: 404},
		{name: "framework limit: without a pod lister evictions are refused", noPods: true,
			attrs:   attrs(admission.Create, "", "pods", "eviction", "ns", "mine", &policyv1.Eviction{}, nil),
			wantErr: `pods "mine" is forbidden: pod "mine" cannot be looked up: the admission service keeps no pods`},
		{name: "upstream: other pod subresources are refused", attrs: attrs(admission.Create, "", "pods", "binding", "ns", "p", &corev1.Binding{}, nil),
			wantErr: `pods "p" is forbidden: unexpected pod subresource "binding", only 'status' and 'eviction' are allowed`},

		// Claims.
		{name: "upstream: a node may only update claim status", attrs: attrs(admission.Update, "", "persistentvolumeclaims", "", "ns", "data", claim(), claim()),
			wantErr: `persistentvolumeclaims "data" is forbidden: may only update PVC status`},
		{name: "upstream: a node updates a claim's capacity", attrs: attrs(admission.Update, "", "persistentvolumeclaims", "status", "ns", "data", grown, claim())},
		{name: "upstream: but nothing else", attrs: attrs(admission.Update, "", "persistentvolumeclaims", "status", "ns", "data", withPVCLabel, claim()),
			wantErr: `persistentvolumeclaims "data" is forbidden: node "n1" is not allowed to update fields other than status.quantity and status.conditions: changed metadata.labels`},

		// Tokens.
		{name: "upstream: a token bound to a pod on the node", attrs: attrs(admission.Create, "", "serviceaccounts", "token", "ns", "sa", tokenRequest(podRef("mine", "uid-x")), nil)},
		{name: "upstream: a token must be bound to a pod", attrs: attrs(admission.Create, "", "serviceaccounts", "token", "ns", "sa", tokenRequest(nil), nil),
			wantErr: `serviceaccounts "sa" is forbidden: node requested token not bound to a pod`},
		{name: "upstream: with the pod's uid", attrs: attrs(admission.Create, "", "serviceaccounts", "token", "ns", "sa", tokenRequest(podRef("mine", "")), nil),
			wantErr: `serviceaccounts "sa" is forbidden: node requested token with a pod binding without a uid`},
		{name: "upstream: the current pod's uid", attrs: attrs(admission.Create, "", "serviceaccounts", "token", "ns", "sa", tokenRequest(podRef("mine", "stale")), nil),
			wantErr: `serviceaccounts "sa" is forbidden: the UID in the bound object reference (stale) does not match the UID in record. The object might have been deleted and then recreated`},
		{name: "upstream: a pod on this node", attrs: attrs(admission.Create, "", "serviceaccounts", "token", "ns", "sa", tokenRequest(podRef("theirs", "uid-x")), nil),
			wantErr: `serviceaccounts "sa" is forbidden: node requested token bound to a pod scheduled on a different node`},

		// Leases, CSINodes, ResourceSlices, CSRs.
		{name: "upstream: a node renews its lease", attrs: attrs(admission.Update, coordinationGroup, "leases", "", naming.NodeLeaseNamespace, "n1", &coordinationv1.Lease{}, &coordinationv1.Lease{})},
		{name: "upstream: only in the node lease namespace", attrs: attrs(admission.Create, coordinationGroup, "leases", "", "default", "n1", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, nil),
			wantErr: `leases.` + coordinationGroup + ` "n1" is forbidden: can only access leases in the "` + naming.NodeLeaseNamespace + `" system namespace`},
		{name: "upstream: only its own lease", attrs: attrs(admission.Create, coordinationGroup, "leases", "", naming.NodeLeaseNamespace, "n2", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, nil),
			wantErr: `leases.` + coordinationGroup + ` "n2" is forbidden: can only access node lease with the same name as the requesting node`},
		{name: "upstream: only its own CSINode", attrs: attrs(admission.Create, storageGroup, "csinodes", "", "", "n2", &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, nil),
			wantErr: `csinodes.` + storageGroup + ` "n2" is forbidden: can only access CSINode with the same name as the requesting node`},
		{name: "upstream: ResourceSlices of its own node", attrs: attrs(admission.Create, resourceGroup, "resourceslices", "", "", "", slice("n1"), nil)},
		{name: "upstream: not of other nodes", attrs: attrs(admission.Create, resourceGroup, "resourceslices", "", "", "s", slice("n2"), nil),
			wantErr: `resourceslices.` + resourceGroup + ` "s" is forbidden: can only create ResourceSlice with the same NodeName as the requesting node`},
		{name: "upstream: nor delete them", attrs: attrs(admission.Delete, resourceGroup, "resourceslices", "", "", "s", nil, slice("n2")),
			wantErr: `resourceslices.` + resourceGroup + ` "s" is forbidden: can only delete ResourceSlice with the same NodeName as the requesting node`},
		{name: "upstream: a kubelet serving CSR in its own name", attrs: attrs(admission.Create, certificatesGroup, "certificatesigningrequests", "", "", "csr-1",
			&certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: naming.SignerKubeletServing, Request: csrPEM(t, "system:node:n1")}}, nil)},
		{name: "upstream: not in another node's name", attrs: attrs(admission.Create, certificatesGroup, "certificatesigningrequests", "", "", "csr-1",
			&certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: naming.SignerAPIServerClientKubelet, Request: csrPEM(t, "system:node:n2")}}, nil),
			wantErr: `certificatesigningrequests.` + certificatesGroup + ` "csr-1" is forbidden: can only create a node CSR with CN=system:node:n1`},
		{name: "upstream: other signers are not checked", attrs: attrs(admission.Create, certificatesGroup, "certificatesigningrequests", "", "", "csr-1",
			&certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: "example.com/x", Request: csrPEM(t, "anything")}}, nil)},
		{name: "upstream: an unparsable request is refused", attrs: attrs(admission.Create, certificatesGroup, "certificatesigningrequests", "", "", "csr-1",
			&certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: naming.SignerKubeletServing, Request: []byte("junk")}}, nil),
			wantErr: `certificatesigningrequests.` + certificatesGroup + ` "csr-1" is forbidden: unable to parse csr: PEM block type must be CERTIFICATE REQUEST`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := &admissiontest.Objects{}
			base.NodeList.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}})
			var objs admission.Objects = base
			if !tc.noPods {
				withPods := &objectsWithPods{Objects: base}
				withPods.pods.Add(boundPod("mine", "n1"), boundPod("theirs", "n2"))
				objs = withPods
			}
			deps := admissiontest.Deps(base, nil)
			deps.Objects = objs
			p, err := NewNodeRestriction(deps, nil)
			if err != nil {
				t.Fatal(err)
			}
			a := tc.attrs
			a.User = tc.user
			if a.User == nil {
				a.User = node1
			}
			err = p.(admission.Mutator).Admit(context.Background(), a)
			if tc.wantCode != 0 {
				if err == nil || statusOf(t, err).Code != tc.wantCode || err.Error() != tc.wantErr {
					t.Fatalf("got %v, want %d %q", err, tc.wantCode, tc.wantErr)
				}
				return
			}
			expect(t, err, tc.wantErr)
		})
	}
}

func TestNodeRestrictionInterest(t *testing.T) {
	p, _ := NewNodeRestriction(admissiontest.Deps(&admissiontest.Objects{}, nil), nil)
	for _, in := range p.(admission.Interested).Interests() {
		if len(in.UserGroups) != 1 || in.UserGroups[0] != "system:nodes" {
			t.Errorf("interest %+v is not limited to system:nodes", in)
		}
		for _, op := range in.Operations {
			if op == admission.Connect {
				t.Errorf("interest %+v includes CONNECT (upstream's plugin handles create, update, delete)", in)
			}
		}
	}
}
