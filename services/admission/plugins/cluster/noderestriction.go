package cluster

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// Node identities (upstream's, unchanged: they are not derived from the product name).
const (
	nodeUserPrefix = "system:node:"
	nodesGroup     = "system:nodes"
)

// Groups of the resources NodeRestriction guards, by Platform's names.
var (
	coordinationGroup = naming.Group("coordination.k8s.io")
	storageGroup      = naming.Group("storage.k8s.io")
	resourceGroup     = naming.Group("resource.k8s.io")
	certificatesGroup = naming.Group("certificates.k8s.io")
)

// PodLister is what an admission.Objects implementation offers when it keeps pods.
// NodeRestriction needs pods for evictions and token requests (the stored pod decides whether it
// is bound to the requesting node); without it those requests from nodes are refused, as
// upstream refuses when its pod lookup fails.
type PodLister interface {
	Pods() admission.Lister[*corev1.Pod]
}

// NodeRestriction limits what node agents (users system:node:<name> in group system:nodes) may
// write: their own Node (no taint changes, no restricted labels, not its deletion), mirror pods
// bound to them, the status and eviction of their pods, their Lease, their CSINode, their
// ResourceSlices, service account tokens bound to their pods and CSRs in their own name.
type NodeRestriction struct {
	nodes admission.Lister[*corev1.Node]
	pods  admission.Lister[*corev1.Pod] // nil when the service keeps no pods
}

var (
	_ admission.Mutator    = (*NodeRestriction)(nil)
	_ admission.Interested = (*NodeRestriction)(nil)
)

// NewNodeRestriction builds NodeRestriction.
func NewNodeRestriction(deps admission.Deps, config []byte) (admission.Plugin, error) {
	ignoreConfig(deps, admission.NodeRestriction, config)
	p := &NodeRestriction{nodes: deps.Objects.Nodes()}
	if pl, ok := deps.Objects.(PodLister); ok {
		p.pods = pl.Pods()
	}
	return p, nil
}

// Name is the plugin's name.
func (p *NodeRestriction) Name() string { return admission.NodeRestriction }

// Interests: writes by members of system:nodes to the resources the plugin guards.
func (p *NodeRestriction) Interests() []admission.Interest {
	nodes := []string{nodesGroup}
	cud := ops(admission.Create, admission.Update, admission.Delete)
	return []admission.Interest{
		{Operations: cud, APIGroups: []string{""}, UserGroups: nodes,
			Resources: []string{"pods", "pods/*", "nodes", "nodes/*", "persistentvolumeclaims", "persistentvolumeclaims/*"}},
		{Operations: ops(admission.Create), APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, UserGroups: nodes},
		{Operations: cud, APIGroups: []string{coordinationGroup}, Resources: []string{"leases"}, UserGroups: nodes},
		{Operations: cud, APIGroups: []string{storageGroup}, Resources: []string{"csinodes"}, UserGroups: nodes},
		{Operations: ops(admission.Create, admission.Delete), APIGroups: []string{resourceGroup}, Resources: []string{"resourceslices"}, UserGroups: nodes},
		{Operations: ops(admission.Create), APIGroups: []string{certificatesGroup}, Resources: []string{"certificatesigningrequests"}, UserGroups: nodes},
	}
}

// nodeIdentity returns the node a user is, if it is one.
func nodeIdentity(u *admission.User) (string, bool) {
	if u == nil || !strings.HasPrefix(u.Name, nodeUserPrefix) || !u.InGroup(nodesGroup) {
		return "", false
	}
	return strings.TrimPrefix(u.Name, nodeUserPrefix), true
}

// Admit applies the restrictions to a node's request (nothing else is touched).
func (p *NodeRestriction) Admit(_ context.Context, a *admission.Attributes) error {
	node, isNode := nodeIdentity(a.User)
	if !isNode {
		return nil
	}
	if node == "" {
		return admission.Forbidden(a, fmt.Errorf("could not determine node from user %q", a.User.Name))
	}
	r := a.Resource
	switch {
	case r.Group == "" && r.Resource == "pods":
		switch a.Subresource {
		case "":
			return p.admitPod(node, a)
		case "status":
			return p.admitPodStatus(node, a)
		case "eviction":
			return p.admitEviction(node, a)
		default:
			return admission.Forbidden(a, fmt.Errorf("unexpected pod subresource %q, only 'status' and 'eviction' are allowed", a.Subresource))
		}
	case r.Group == "" && r.Resource == "nodes":
		return p.admitNode(node, a)
	case r.Group == "" && r.Resource == "persistentvolumeclaims":
		if a.Subresource != "status" {
			return admission.Forbidden(a, fmt.Errorf("may only update PVC status"))
		}
		return admitPVCStatus(node, a)
	case r.Group == "" && r.Resource == "serviceaccounts":
		return p.admitTokenRequest(node, a)
	case r.Group == coordinationGroup && r.Resource == "leases":
		return admitLease(node, a)
	case r.Group == storageGroup && r.Resource == "csinodes":
		return admitCSINode(node, a)
	case r.Group == resourceGroup && r.Resource == "resourceslices":
		return admitResourceSlice(node, a)
	case r.Group == certificatesGroup && r.Resource == "certificatesigningrequests":
		return admitCSR(node, a)
	}
	return nil
}

// objectName is the name of the request's object: the request's, or the new object's on create.
func objectName(a *admission.Attributes) string {
	if a.Name != "" {
		return a.Name
	}
	if m := admission.Accessor(a.Object); m != nil && !isNil(a.Object) {
		return m.GetName()
	}
	return ""
}

// storedPod returns the pod a request is about as stored: the old object when the gateway sent
// it, else the pod lister's copy.
func (p *NodeRestriction) storedPod(a *admission.Attributes, name string) (*corev1.Pod, error) {
	if old, ok := a.OldObject.(*corev1.Pod); ok && old != nil && old.Name == name {
		return old, nil
	}
	if p.pods == nil {
		return nil, admission.Forbidden(a, fmt.Errorf("pod %q cannot be looked up: the admission service keeps no pods", name))
	}
	pod, ok := p.pods.Get(a.Namespace, name)
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	return pod, nil
}

// admitPod: a node creates only mirror pods of itself and deletes only its own pods.
func (p *NodeRestriction) admitPod(node string, a *admission.Attributes) error {
	switch a.Operation {
	case admission.Create:
		return p.admitMirrorPod(node, a)
	case admission.Delete:
		pod, err := p.storedPod(a, a.Name)
		if err != nil {
			return err
		}
		if pod.Spec.NodeName != node {
			return admission.Forbidden(a, fmt.Errorf("node %q can only delete pods with spec.nodeName set to itself", node))
		}
		return nil
	default:
		return admission.Forbidden(a, fmt.Errorf("unexpected operation %q, node %q can only create and delete mirror pods", a.Operation, node))
	}
}

func (p *NodeRestriction) admitMirrorPod(node string, a *admission.Attributes) error {
	pod, ok := a.Object.(*corev1.Pod)
	if !ok || pod == nil {
		return admission.Forbidden(a, fmt.Errorf("unexpected type %T", a.Object))
	}
	if _, mirror := pod.Annotations[naming.MirrorPodAnnotation]; !mirror {
		return admission.Forbidden(a, fmt.Errorf("pod does not have %q annotation, node %q can only create mirror pods", naming.MirrorPodAnnotation, node))
	}
	if pod.Spec.NodeName != node {
		return admission.Forbidden(a, fmt.Errorf("node %q can only create pods with spec.nodeName set to itself", node))
	}
	switch len(pod.OwnerReferences) {
	case 0:
		return admission.Forbidden(a, fmt.Errorf("node %q can only create pods with an owner reference set to itself", node))
	case 1:
	default:
		return admission.Forbidden(a, fmt.Errorf("node %q can only create pods with a single owner reference set to itself", node))
	}
	owner := pod.OwnerReferences[0]
	if owner.APIVersion != "v1" || owner.Kind != "Node" || owner.Name != node {
		return admission.Forbidden(a, fmt.Errorf("node %q can only create pods with an owner reference set to itself", node))
	}
	if owner.Controller == nil || !*owner.Controller {
		return admission.Forbidden(a, fmt.Errorf("node %q can only create pods with a controller owner reference set to itself", node))
	}
	if owner.BlockOwnerDeletion != nil && *owner.BlockOwnerDeletion {
		return admission.Forbidden(a, fmt.Errorf("node %q must not set blockOwnerDeletion on an owner reference", node))
	}
	n, ok := p.nodes.Get("", node)
	if !ok {
		return apierrors.NewNotFound(corev1.Resource("nodes"), node)
	}
	if owner.UID != n.UID {
		return admission.Forbidden(a, fmt.Errorf("node %s UID mismatch: expected %s got %s", node, owner.UID, n.UID))
	}
	// A mirror pod may reference no other API object: the node would gain access to it.
	if pod.Spec.ServiceAccountName != "" {
		return admission.Forbidden(a, fmt.Errorf("node %q can not create pods that reference a service account", node))
	}
	if referencesSecrets(pod) {
		return admission.Forbidden(a, fmt.Errorf("node %q can not create pods that reference secrets", node))
	}
	if referencesConfigMaps(pod) {
		return admission.Forbidden(a, fmt.Errorf("node %q can not create pods that reference configmaps", node))
	}
	for _, v := range pod.Spec.Volumes {
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ClusterTrustBundle != nil {
					return admission.Forbidden(a, fmt.Errorf("node %q can not create pods that reference clustertrustbundles", node))
				}
			}
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			return admission.Forbidden(a, fmt.Errorf("node %q can not create pods that reference persistentvolumeclaims", node))
		}
	}
	return nil
}

// containers lists every container of a pod: init, regular and ephemeral.
func containers(pod *corev1.Pod) []corev1.Container {
	out := append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, e := range pod.Spec.EphemeralContainers {
		out = append(out, corev1.Container{Env: e.Env, EnvFrom: e.EnvFrom})
	}
	return out
}

// referencesSecrets tells whether a pod names any Secret (pull secrets, environment, volumes).
func referencesSecrets(pod *corev1.Pod) bool {
	if len(pod.Spec.ImagePullSecrets) > 0 {
		return true
	}
	for _, c := range containers(pod) {
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				return true
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				return true
			}
		}
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.Secret != nil, v.AzureFile != nil,
			v.CephFS != nil && v.CephFS.SecretRef != nil,
			v.Cinder != nil && v.Cinder.SecretRef != nil,
			v.FlexVolume != nil && v.FlexVolume.SecretRef != nil,
			v.ISCSI != nil && v.ISCSI.SecretRef != nil,
			v.RBD != nil && v.RBD.SecretRef != nil,
			v.ScaleIO != nil && v.ScaleIO.SecretRef != nil,
			v.StorageOS != nil && v.StorageOS.SecretRef != nil,
			v.CSI != nil && v.CSI.NodePublishSecretRef != nil:
			return true
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					return true
				}
			}
		}
	}
	return false
}

// referencesConfigMaps tells whether a pod names any ConfigMap (environment, volumes).
func referencesConfigMaps(pod *corev1.Pod) bool {
	for _, c := range containers(pod) {
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				return true
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
				return true
			}
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil {
			return true
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					return true
				}
			}
		}
	}
	return false
}

// admitPodStatus: a node updates the status of its own pods only, and not their labels or
// resource claim statuses through it.
func (p *NodeRestriction) admitPodStatus(node string, a *admission.Attributes) error {
	if a.Operation != admission.Update {
		return admission.Forbidden(a, fmt.Errorf("unexpected operation %q", a.Operation))
	}
	old, ok := a.OldObject.(*corev1.Pod)
	if !ok || old == nil {
		return admission.Forbidden(a, fmt.Errorf("unexpected type %T", a.OldObject))
	}
	if old.Spec.NodeName != node {
		return admission.Forbidden(a, fmt.Errorf("node %q can only update pod status for pods with spec.nodeName set to itself", node))
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok || pod == nil {
		return admission.Forbidden(a, fmt.Errorf("unexpected type %T", a.Object))
	}
	if !labels.Equals(old.Labels, pod.Labels) {
		return admission.Forbidden(a, fmt.Errorf("node %q cannot update labels through pod status", node))
	}
	if !claimStatusesEqual(old.Status.ResourceClaimStatuses, pod.Status.ResourceClaimStatuses) {
		return admission.Forbidden(a, fmt.Errorf("node %q cannot update resource claim statues", node))
	}
	return nil
}

func claimStatusesEqual(x, y []corev1.PodResourceClaimStatus) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i].Name != y[i].Name {
			return false
		}
		a, b := x[i].ResourceClaimName, y[i].ResourceClaimName
		if (a == nil) != (b == nil) || (a != nil && *a != *b) {
			return false
		}
	}
	return true
}

// admitEviction: a node evicts only its own pods.
func (p *NodeRestriction) admitEviction(node string, a *admission.Attributes) error {
	if a.Operation != admission.Create {
		return admission.Forbidden(a, fmt.Errorf("unexpected operation %s", a.Operation))
	}
	ev, ok := a.Object.(*policyv1.Eviction)
	if !ok || ev == nil {
		return admission.Forbidden(a, fmt.Errorf("unexpected type %T", a.Object))
	}
	name := a.Name
	if name == "" {
		if ev.Name == "" {
			return admission.Forbidden(a, fmt.Errorf("could not determine pod from request data"))
		}
		name = ev.Name
	}
	pod, err := p.storedPod(a, name)
	if err != nil {
		return err
	}
	if pod.Spec.NodeName != node {
		return admission.Forbidden(a, fmt.Errorf("node %s can only evict pods with spec.nodeName set to itself", node))
	}
	return nil
}

// admitPVCStatus: a node may change only a claim's capacity, conditions and allocation status.
func admitPVCStatus(node string, a *admission.Attributes) error {
	if a.Operation != admission.Update {
		return admission.Forbidden(a, fmt.Errorf("unexpected operation %q", a.Operation))
	}
	old, ok := a.OldObject.(*corev1.PersistentVolumeClaim)
	if !ok || old == nil {
		return admission.Forbidden(a, fmt.Errorf("unexpected type %T", a.OldObject))
	}
	pvc, ok := a.Object.(*corev1.PersistentVolumeClaim)
	if !ok || pvc == nil {
		return admission.Forbidden(a, fmt.Errorf("unexpected type %T", a.Object))
	}
	strip := func(c *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
		c = c.DeepCopy()
		c.ResourceVersion = ""
		c.ManagedFields = nil
		c.Status.Capacity = nil
		c.Status.Conditions = nil
		c.Status.AllocatedResources = nil
		c.Status.AllocatedResourceStatuses = nil
		return c
	}
	o, n := strip(old), strip(pvc)
	if !apiequality.Semantic.DeepEqual(o, n) {
		return admission.Forbidden(a, fmt.Errorf("node %q is not allowed to update fields other than status.quantity and status.conditions: %s", node, changedFields(o, n)))
	}
	return nil
}

// changedFields names the fields (JSON paths) where two objects differ, for messages.
func changedFields(x, y any) string {
	var a, b map[string]any
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	_ = json.Unmarshal(ja, &a)
	_ = json.Unmarshal(jb, &b)
	var paths []string
	var walk func(prefix string, a, b any)
	walk = func(prefix string, a, b any) {
		ma, okA := a.(map[string]any)
		mb, okB := b.(map[string]any)
		if !okA || !okB {
			if !reflect.DeepEqual(a, b) {
				paths = append(paths, prefix)
			}
			return
		}
		keys := map[string]bool{}
		for k := range ma {
			keys[k] = true
		}
		for k := range mb {
			keys[k] = true
		}
		for k := range keys {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			walk(p, ma[k], mb[k])
		}
	}
	walk("", a, b)
	sort.Strings(paths)
	return "changed " + strings.Join(paths, ", ")
}

// admitNode: a node writes only its own Node; it may not set a config source, change its taints,
// set restricted labels, or delete it (the spec's rule).
func (p *NodeRestriction) admitNode(node string, a *admission.Attributes) error {
	requested := objectName(a)
	if requested != node {
		return admission.Forbidden(a, fmt.Errorf("node %q is not allowed to modify node %q", node, requested))
	}
	switch a.Operation {
	case admission.Create:
		n, ok := a.Object.(*corev1.Node)
		if !ok || n == nil {
			return admission.Forbidden(a, fmt.Errorf("unexpected type %T", a.Object))
		}
		if n.Spec.ConfigSource != nil {
			return admission.Forbidden(a, fmt.Errorf("node %q is not allowed to create pods with a non-nil configSource", node))
		}
		if forbidden := forbiddenLabels(modifiedLabels(n.Labels, nil)); len(forbidden) > 0 {
			return admission.Forbidden(a, fmt.Errorf("node %q is not allowed to set the following labels: %s", node, strings.Join(forbidden, ", ")))
		}
	case admission.Update:
		n, ok := a.Object.(*corev1.Node)
		if !ok || n == nil {
			return admission.Forbidden(a, fmt.Errorf("unexpected type %T", a.Object))
		}
		old, ok := a.OldObject.(*corev1.Node)
		if !ok || old == nil {
			return admission.Forbidden(a, fmt.Errorf("unexpected type %T", a.OldObject))
		}
		// Old agents may drop the field in a status update, so only a new non-nil source counts.
		if n.Spec.ConfigSource != nil && !apiequality.Semantic.DeepEqual(n.Spec.ConfigSource, old.Spec.ConfigSource) {
			return admission.Forbidden(a, fmt.Errorf("node %q is not allowed to update configSource to a new non-nil configSource", node))
		}
		// Removing or changing its taints would let a node attract workloads kept away from it.
		if !apiequality.Semantic.DeepEqual(n.Spec.Taints, old.Spec.Taints) {
			return admission.Forbidden(a, fmt.Errorf("node %q is not allowed to modify taints", node))
		}
		if forbidden := forbiddenLabels(modifiedLabels(n.Labels, old.Labels)); len(forbidden) > 0 {
			return admission.Forbidden(a, fmt.Errorf("is not allowed to modify labels: %s", strings.Join(forbidden, ", ")))
		}
	case admission.Delete:
		return admission.Forbidden(a, fmt.Errorf("node %q is not allowed to delete node %q", node, requested))
	}
	return nil
}

// modifiedLabels lists the keys whose presence or value differs.
func modifiedLabels(x, y map[string]string) []string {
	set := map[string]bool{}
	for k, v := range x {
		if w, ok := y[k]; !ok || v != w {
			set[k] = true
		}
	}
	for k, v := range y {
		if w, ok := x[k]; !ok || v != w {
			set[k] = true
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	return out
}

// upstreamLabelDomain is upstream's other reserved label domain (k8s.io); it is not derived
// from the product name, so Platform reserves it as well.
const upstreamLabelDomain = "k8s.io"

// kubeletLabels are the labels of the platform's domain a node may set on itself (the spec's
// list).
var kubeletLabels = map[string]bool{
	naming.LabelHostname: true, naming.LabelArch: true, naming.LabelOS: true,
	naming.LabelBetaArch: true, naming.LabelBetaOS: true,
	naming.LabelInstanceType: true, naming.LabelInstanceTypeStable: true,
	naming.LabelFailureDomainBetaZone: true, naming.LabelFailureDomainBetaRegion: true,
	naming.LabelTopologyZone: true, naming.LabelTopologyRegion: true,
}

func labelDomain(key string) string {
	if d, _, ok := strings.Cut(key, "/"); ok {
		return d
	}
	return ""
}

func inDomain(domain, d string) bool { return domain == d || strings.HasSuffix(domain, "."+d) }

func isKubeletLabel(key string) bool {
	if kubeletLabels[key] {
		return true
	}
	d := labelDomain(key)
	return inDomain(d, naming.LabelNamespaceKubelet) || inDomain(d, naming.LabelNamespaceNode)
}

// forbiddenLabels returns, sorted, the labels a node may not add, change or remove on itself:
// the node-restriction domain, and the platform's and k8s.io domains beyond the kubelet labels.
func forbiddenLabels(modified []string) []string {
	var out []string
	for _, k := range modified {
		d := labelDomain(k)
		switch {
		case inDomain(d, naming.LabelNamespaceNodeRestriction):
			out = append(out, k)
		case (inDomain(d, naming.Domain) || inDomain(d, upstreamLabelDomain)) && !isKubeletLabel(k):
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// admitTokenRequest: a node asks for service account tokens only bound to a pod of its own.
func (p *NodeRestriction) admitTokenRequest(node string, a *admission.Attributes) error {
	if a.Operation != admission.Create || a.Subresource != "token" {
		return nil
	}
	tr, ok := a.Object.(*authenticationv1.TokenRequest)
	if !ok || tr == nil {
		return admission.Forbidden(a, fmt.Errorf("unexpected type %T", a.Object))
	}
	ref := tr.Spec.BoundObjectRef
	if ref == nil || ref.APIVersion != "v1" || ref.Kind != "Pod" || ref.Name == "" {
		return admission.Forbidden(a, fmt.Errorf("node requested token not bound to a pod"))
	}
	if ref.UID == "" {
		return admission.Forbidden(a, fmt.Errorf("node requested token with a pod binding without a uid"))
	}
	pod, err := p.storedPod(a, ref.Name)
	if err != nil {
		return err
	}
	if ref.UID != pod.UID {
		return admission.Forbidden(a, fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	if pod.Spec.NodeName != node {
		return admission.Forbidden(a, fmt.Errorf("node requested token bound to a pod scheduled on a different node"))
	}
	return nil
}

// admitLease: a node writes only its own Lease in the node lease namespace.
func admitLease(node string, a *admission.Attributes) error {
	if a.Namespace != naming.NodeLeaseNamespace {
		return admission.Forbidden(a, fmt.Errorf("can only access leases in the %q system namespace", naming.NodeLeaseNamespace))
	}
	name := a.Name
	if a.Operation == admission.Create {
		lease, ok := a.Object.(*coordinationv1.Lease)
		if !ok || lease == nil {
			return admission.Forbidden(a, fmt.Errorf("unexpected type %T", a.Object))
		}
		name = lease.Name
	}
	if name != node {
		return admission.Forbidden(a, fmt.Errorf("can only access node lease with the same name as the requesting node"))
	}
	return nil
}

// admitCSINode: a node writes only the CSINode named after it.
func admitCSINode(node string, a *admission.Attributes) error {
	name := a.Name
	if a.Operation == admission.Create {
		m := admission.Accessor(a.Object)
		if m == nil || isNil(a.Object) {
			return admission.Forbidden(a, fmt.Errorf("unable to access the object name"))
		}
		name = m.GetName()
	}
	if name != node {
		return admission.Forbidden(a, fmt.Errorf("can only access CSINode with the same name as the requesting node"))
	}
	return nil
}

// sliceNode reads spec.nodeName of a ResourceSlice, typed or not.
func sliceNode(obj runtime.Object) (string, bool) {
	if isNil(obj) {
		return "", false
	}
	var m map[string]any
	if u, ok := obj.(*unstructured.Unstructured); ok {
		m = u.Object
	} else {
		var err error
		if m, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
			return "", false
		}
	}
	name, _, err := unstructured.NestedString(m, "spec", "nodeName")
	return name, err == nil
}

// admitResourceSlice: a node creates and deletes only the ResourceSlices of its own node (the
// authorizer cannot see the object's content on create, nor each object of a collection delete).
func admitResourceSlice(node string, a *admission.Attributes) error {
	switch a.Operation {
	case admission.Create:
		name, ok := sliceNode(a.Object)
		if !ok {
			return admission.Forbidden(a, fmt.Errorf("unexpected type %T", a.Object))
		}
		if name != node {
			return admission.Forbidden(a, errors.New("can only create ResourceSlice with the same NodeName as the requesting node"))
		}
	case admission.Delete:
		name, ok := sliceNode(a.OldObject)
		if !ok {
			return admission.Forbidden(a, fmt.Errorf("unexpected type %T", a.OldObject))
		}
		if name != node {
			return admission.Forbidden(a, errors.New("can only delete ResourceSlice with the same NodeName as the requesting node"))
		}
	}
	return nil
}

// admitCSR: a node's request for a kubelet serving or kubelet client certificate must be in its
// own name (CN=system:node:<name>).
func admitCSR(node string, a *admission.Attributes) error {
	if a.Operation != admission.Create {
		return nil
	}
	csr, ok := a.Object.(*certificatesv1.CertificateSigningRequest)
	if !ok || csr == nil {
		return admission.Forbidden(a, fmt.Errorf("unexpected type %T", a.Object))
	}
	if csr.Spec.SignerName != naming.SignerKubeletServing && csr.Spec.SignerName != naming.SignerAPIServerClientKubelet {
		return nil
	}
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return admission.Forbidden(a, fmt.Errorf("unable to parse csr: %w", errors.New("PEM block type must be CERTIFICATE REQUEST")))
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return admission.Forbidden(a, fmt.Errorf("unable to parse csr: %w", err))
	}
	if req.Subject.CommonName != nodeUserPrefix+node {
		return admission.Forbidden(a, fmt.Errorf("can only create a node CSR with CN=system:node:%s", node))
	}
	return nil
}

// isNil tells whether obj is nil or a nil pointer (odd requests must not panic a plugin).
func isNil(obj runtime.Object) bool {
	if obj == nil {
		return true
	}
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
