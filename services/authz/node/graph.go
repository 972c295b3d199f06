// Package node is upstream's Node authorization mode: a node agent (user system:node:<name> in
// group system:nodes) may read the Secrets, ConfigMaps, claims, volumes and service account
// tokens the pods bound to it use, its own Lease and CSINode, and otherwise what system:node's
// rules allow. What a node may reach is kept in a Graph fed from watches of pods, persistent
// volumes and volume attachments.
package node

import (
	"slices"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"platform.io/libs/naming"
)

// objKey names a namespaced object.
type objKey struct{ namespace, name string }

// podRefs is what one bound pod gives its node access to. A pod's references are immutable
// once it is bound, so they are computed once per update.
type podRefs struct {
	node           string
	serviceAccount string
	secrets        []string
	configMaps     []string
	claims         []string
}

// nodeRefs counts, per object, the pods on a node that reference it: access lasts while any
// does.
type nodeRefs struct {
	pods            int
	secrets         map[objKey]int
	configMaps      map[objKey]int
	claims          map[objKey]int
	serviceAccounts map[objKey]int
}

func newNodeRefs() *nodeRefs {
	return &nodeRefs{
		secrets:         map[objKey]int{},
		configMaps:      map[objKey]int{},
		claims:          map[objKey]int{},
		serviceAccounts: map[objKey]int{},
	}
}

func (n *nodeRefs) empty() bool {
	return n.pods == 0 && len(n.secrets) == 0 && len(n.configMaps) == 0 && len(n.claims) == 0 && len(n.serviceAccounts) == 0
}

// pvRefs is a bound persistent volume: the claim it is bound to and the Secrets the node needs
// to mount it.
type pvRefs struct {
	claim   objKey
	secrets []objKey
}

// Graph records which objects each node may reach: node <- pod <- secret, configmap, claim,
// service account; claim <- volume <- secret; node <- volume attachment. It is safe for
// concurrent use; lookups cost a few map reads whatever the number of pods.
type Graph struct {
	mu    sync.RWMutex
	pods  map[objKey]*podRefs
	nodes map[string]*nodeRefs
	pvs   map[string]*pvRefs
	// pvsByClaim and pvsBySecret index volumes by what they reference.
	pvsByClaim  map[objKey]map[string]struct{}
	pvsBySecret map[objKey]map[string]struct{}
	vas         map[string]string // attachment name -> node
	gen         atomic.Uint64
}

// NewGraph returns an empty graph.
func NewGraph() *Graph {
	return &Graph{
		pods:        map[objKey]*podRefs{},
		nodes:       map[string]*nodeRefs{},
		pvs:         map[string]*pvRefs{},
		pvsByClaim:  map[objKey]map[string]struct{}{},
		pvsBySecret: map[objKey]map[string]struct{}{},
		vas:         map[string]string{},
	}
}

// Generation grows with every change of the graph, so a caller can tell whether an answer it
// computed may be stale.
func (g *Graph) Generation() uint64 { return g.gen.Load() }

// AddOrUpdatePod records a pod. Only pods bound to a node (spec.nodeName) give access; a pod
// without one is removed. A mirror pod (naming.MirrorPodAnnotation) gives its node access to
// itself only: a node creates mirror pods, and must not grant itself access by doing so.
func (g *Graph) AddOrUpdatePod(p *corev1.Pod) {
	key := objKey{p.Namespace, p.Name}
	var refs *podRefs
	if p.Spec.NodeName != "" {
		refs = podReferences(p)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.pods[key]
	if old == nil && refs == nil {
		return
	}
	if old != nil && refs != nil && old.equal(refs) {
		return
	}
	if old != nil {
		g.removePodLocked(key, old)
	}
	if refs != nil {
		g.addPodLocked(key, refs)
	}
	g.gen.Add(1)
}

// DeletePod forgets a pod: its node loses what only this pod gave it.
func (g *Graph) DeletePod(namespace, name string) {
	key := objKey{namespace, name}
	g.mu.Lock()
	defer g.mu.Unlock()
	if old := g.pods[key]; old != nil {
		g.removePodLocked(key, old)
		g.gen.Add(1)
	}
}

func (r *podRefs) equal(o *podRefs) bool {
	return r.node == o.node && r.serviceAccount == o.serviceAccount &&
		slices.Equal(r.secrets, o.secrets) && slices.Equal(r.configMaps, o.configMaps) && slices.Equal(r.claims, o.claims)
}

func (g *Graph) addPodLocked(key objKey, r *podRefs) {
	g.pods[key] = r
	n := g.nodes[r.node]
	if n == nil {
		n = newNodeRefs()
		g.nodes[r.node] = n
	}
	n.pods++
	if r.serviceAccount != "" {
		n.serviceAccounts[objKey{key.namespace, r.serviceAccount}]++
	}
	for _, s := range r.secrets {
		n.secrets[objKey{key.namespace, s}]++
	}
	for _, c := range r.configMaps {
		n.configMaps[objKey{key.namespace, c}]++
	}
	for _, c := range r.claims {
		n.claims[objKey{key.namespace, c}]++
	}
}

func decrement(m map[objKey]int, k objKey) {
	if m[k] <= 1 {
		delete(m, k)
		return
	}
	m[k]--
}

func (g *Graph) removePodLocked(key objKey, r *podRefs) {
	delete(g.pods, key)
	n := g.nodes[r.node]
	if n == nil {
		return
	}
	n.pods--
	if r.serviceAccount != "" {
		decrement(n.serviceAccounts, objKey{key.namespace, r.serviceAccount})
	}
	for _, s := range r.secrets {
		decrement(n.secrets, objKey{key.namespace, s})
	}
	for _, c := range r.configMaps {
		decrement(n.configMaps, objKey{key.namespace, c})
	}
	for _, c := range r.claims {
		decrement(n.claims, objKey{key.namespace, c})
	}
	if n.empty() {
		delete(g.nodes, r.node)
	}
}

// AddOrUpdatePV records a persistent volume. Only a volume bound to a claim (spec.claimRef) is
// reachable, from the nodes whose pods use that claim, and so are the Secrets the node agent
// needs to mount it (not those only the attach/detach and resize controllers use).
func (g *Graph) AddOrUpdatePV(pv *corev1.PersistentVolume) {
	var refs *pvRefs
	if pv.Spec.ClaimRef != nil {
		refs = &pvRefs{claim: objKey{pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name}, secrets: pvSecrets(pv)}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.pvs[pv.Name]
	if old == nil && refs == nil {
		return
	}
	if old != nil && refs != nil && old.claim == refs.claim && slices.Equal(old.secrets, refs.secrets) {
		return
	}
	if old != nil {
		g.removePVLocked(pv.Name, old)
	}
	if refs != nil {
		g.pvs[pv.Name] = refs
		addIndex(g.pvsByClaim, refs.claim, pv.Name)
		for _, s := range refs.secrets {
			addIndex(g.pvsBySecret, s, pv.Name)
		}
	}
	g.gen.Add(1)
}

// DeletePV forgets a persistent volume.
func (g *Graph) DeletePV(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if old := g.pvs[name]; old != nil {
		g.removePVLocked(name, old)
		g.gen.Add(1)
	}
}

func addIndex(idx map[objKey]map[string]struct{}, k objKey, name string) {
	s := idx[k]
	if s == nil {
		s = map[string]struct{}{}
		idx[k] = s
	}
	s[name] = struct{}{}
}

func removeIndex(idx map[objKey]map[string]struct{}, k objKey, name string) {
	if s := idx[k]; s != nil {
		delete(s, name)
		if len(s) == 0 {
			delete(idx, k)
		}
	}
}

func (g *Graph) removePVLocked(name string, r *pvRefs) {
	delete(g.pvs, name)
	removeIndex(g.pvsByClaim, r.claim, name)
	for _, s := range r.secrets {
		removeIndex(g.pvsBySecret, s, name)
	}
}

// AddOrUpdateVolumeAttachment records which node a volume attachment is for.
func (g *Graph) AddOrUpdateVolumeAttachment(va *storagev1.VolumeAttachment) {
	g.mu.Lock()
	defer g.mu.Unlock()
	old, had := g.vas[va.Name]
	node := va.Spec.NodeName
	if had && old == node {
		return
	}
	if !had && node == "" {
		return
	}
	if node == "" {
		delete(g.vas, va.Name)
	} else {
		g.vas[va.Name] = node
	}
	g.gen.Add(1)
}

// DeleteVolumeAttachment forgets a volume attachment.
func (g *Graph) DeleteVolumeAttachment(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, had := g.vas[name]; had {
		delete(g.vas, name)
		g.gen.Add(1)
	}
}

// Lookups: is there a path from the object to the node?

func (g *Graph) podOnNode(node, namespace, name string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	p := g.pods[objKey{namespace, name}]
	return p != nil && p.node == node
}

func (g *Graph) configMapOnNode(node, namespace, name string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	n := g.nodes[node]
	return n != nil && n.configMaps[objKey{namespace, name}] > 0
}

func (g *Graph) serviceAccountOnNode(node, namespace, name string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	n := g.nodes[node]
	return n != nil && n.serviceAccounts[objKey{namespace, name}] > 0
}

func (g *Graph) claimOnNode(node, namespace, name string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	n := g.nodes[node]
	return n != nil && n.claims[objKey{namespace, name}] > 0
}

// secretOnNode: a pod on the node references the Secret, or a volume bound to a claim a pod on
// the node uses does.
func (g *Graph) secretOnNode(node, namespace, name string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	n := g.nodes[node]
	if n == nil {
		return false
	}
	key := objKey{namespace, name}
	if n.secrets[key] > 0 {
		return true
	}
	for pv := range g.pvsBySecret[key] {
		if n.claims[g.pvs[pv].claim] > 0 {
			return true
		}
	}
	return false
}

func (g *Graph) pvOnNode(node, name string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	pv := g.pvs[name]
	n := g.nodes[node]
	return pv != nil && n != nil && n.claims[pv.claim] > 0
}

func (g *Graph) attachmentOnNode(node, name string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.vas[name] == node
}

// podReferences computes what a bound pod gives its node access to.
func podReferences(p *corev1.Pod) *podRefs {
	r := &podRefs{node: p.Spec.NodeName}
	if _, mirror := p.Annotations[naming.MirrorPodAnnotation]; mirror {
		return r
	}
	r.serviceAccount = p.Spec.ServiceAccountName
	secrets := newNameSet()
	configMaps := newNameSet()
	claims := newNameSet()
	for _, s := range p.Spec.ImagePullSecrets {
		secrets.add(s.Name)
	}
	visitContainers(&p.Spec, func(c *corev1.Container) {
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				secrets.add(e.SecretRef.Name)
			}
			if e.ConfigMapRef != nil {
				configMaps.add(e.ConfigMapRef.Name)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if e.ValueFrom.SecretKeyRef != nil {
				secrets.add(e.ValueFrom.SecretKeyRef.Name)
			}
			if e.ValueFrom.ConfigMapKeyRef != nil {
				configMaps.add(e.ValueFrom.ConfigMapKeyRef.Name)
			}
		}
	})
	for i := range p.Spec.Volumes {
		v := &p.Spec.Volumes[i]
		s := &v.VolumeSource
		switch {
		case s.Secret != nil:
			secrets.add(s.Secret.SecretName)
		case s.ConfigMap != nil:
			configMaps.add(s.ConfigMap.Name)
		case s.Projected != nil:
			for _, src := range s.Projected.Sources {
				if src.Secret != nil {
					secrets.add(src.Secret.Name)
				}
				if src.ConfigMap != nil {
					configMaps.add(src.ConfigMap.Name)
				}
			}
		case s.PersistentVolumeClaim != nil:
			claims.add(s.PersistentVolumeClaim.ClaimName)
		case s.Ephemeral != nil:
			// The claim of a generic ephemeral volume is named <pod>-<volume>.
			claims.add(p.Name + "-" + v.Name)
		case s.AzureFile != nil:
			secrets.add(s.AzureFile.SecretName)
		case s.CephFS != nil && s.CephFS.SecretRef != nil:
			secrets.add(s.CephFS.SecretRef.Name)
		case s.Cinder != nil && s.Cinder.SecretRef != nil:
			secrets.add(s.Cinder.SecretRef.Name)
		case s.FlexVolume != nil && s.FlexVolume.SecretRef != nil:
			secrets.add(s.FlexVolume.SecretRef.Name)
		case s.RBD != nil && s.RBD.SecretRef != nil:
			secrets.add(s.RBD.SecretRef.Name)
		case s.ScaleIO != nil && s.ScaleIO.SecretRef != nil:
			secrets.add(s.ScaleIO.SecretRef.Name)
		case s.ISCSI != nil && s.ISCSI.SecretRef != nil:
			secrets.add(s.ISCSI.SecretRef.Name)
		case s.StorageOS != nil && s.StorageOS.SecretRef != nil:
			secrets.add(s.StorageOS.SecretRef.Name)
		case s.CSI != nil && s.CSI.NodePublishSecretRef != nil:
			secrets.add(s.CSI.NodePublishSecretRef.Name)
		}
	}
	r.secrets = secrets.sorted()
	r.configMaps = configMaps.sorted()
	r.claims = claims.sorted()
	return r
}

// visitContainers calls f for init, regular and ephemeral containers.
func visitContainers(spec *corev1.PodSpec, f func(*corev1.Container)) {
	for i := range spec.InitContainers {
		f(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		f(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		f((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
}

// pvSecrets returns the Secrets a node agent needs to mount the volume. Sources that predate
// secret namespaces take the claim's namespace.
func pvSecrets(pv *corev1.PersistentVolume) []objKey {
	claimNS := ""
	if pv.Spec.ClaimRef != nil {
		claimNS = pv.Spec.ClaimRef.Namespace
	}
	var out []objKey
	add := func(ns, name string) {
		if name != "" {
			out = append(out, objKey{ns, name})
		}
	}
	orClaimNS := func(ns string) string {
		if ns != "" {
			return ns
		}
		return claimNS
	}
	s := &pv.Spec.PersistentVolumeSource
	switch {
	case s.AzureFile != nil:
		ns := claimNS
		if s.AzureFile.SecretNamespace != nil && *s.AzureFile.SecretNamespace != "" {
			ns = *s.AzureFile.SecretNamespace
		}
		add(ns, s.AzureFile.SecretName)
	case s.CephFS != nil && s.CephFS.SecretRef != nil:
		add(orClaimNS(s.CephFS.SecretRef.Namespace), s.CephFS.SecretRef.Name)
	case s.Cinder != nil && s.Cinder.SecretRef != nil:
		add(s.Cinder.SecretRef.Namespace, s.Cinder.SecretRef.Name)
	case s.FlexVolume != nil && s.FlexVolume.SecretRef != nil:
		add(orClaimNS(s.FlexVolume.SecretRef.Namespace), s.FlexVolume.SecretRef.Name)
	case s.RBD != nil && s.RBD.SecretRef != nil:
		add(orClaimNS(s.RBD.SecretRef.Namespace), s.RBD.SecretRef.Name)
	case s.ScaleIO != nil && s.ScaleIO.SecretRef != nil:
		add(orClaimNS(s.ScaleIO.SecretRef.Namespace), s.ScaleIO.SecretRef.Name)
	case s.ISCSI != nil && s.ISCSI.SecretRef != nil:
		add(orClaimNS(s.ISCSI.SecretRef.Namespace), s.ISCSI.SecretRef.Name)
	case s.StorageOS != nil && s.StorageOS.SecretRef != nil:
		add(s.StorageOS.SecretRef.Namespace, s.StorageOS.SecretRef.Name)
	case s.CSI != nil:
		// Controller publish and expand secrets are for controllers, not for the node.
		for _, ref := range []*corev1.SecretReference{s.CSI.NodePublishSecretRef, s.CSI.NodeStageSecretRef, s.CSI.NodeExpandSecretRef} {
			if ref != nil {
				add(ref.Namespace, ref.Name)
			}
		}
	}
	slices.SortFunc(out, func(a, b objKey) int {
		if a.namespace != b.namespace {
			if a.namespace < b.namespace {
				return -1
			}
			return 1
		}
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	return slices.Compact(out)
}

// nameSet collects unique non-empty names.
type nameSet map[string]struct{}

func newNameSet() nameSet { return nameSet{} }

func (s nameSet) add(name string) {
	if name != "" {
		s[name] = struct{}{}
	}
}

func (s nameSet) sorted() []string {
	out := make([]string, 0, len(s))
	for n := range s {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
