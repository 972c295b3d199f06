package pods

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// podNodeSelector is PodNodeSelector: a new pod's node selector gets its namespace's (the
// namespace annotation, else the cluster default from the configuration) merged in, a pod whose
// selector contradicts the namespace's is rejected, and a pod whose selector strays outside the
// namespace's whitelist from the configuration is rejected. It confines namespaces to sets of
// nodes.
type podNodeSelector struct {
	deps admission.Deps
	// selectors is the configuration's podNodeSelectorPluginConfig: namespace name to whitelist
	// selector, and clusterDefaultNodeSelector to the default for namespaces without annotation.
	selectors map[string]labels.Set
}

// PodNodeSelectorConfig is PodNodeSelector's configuration, as upstream's plugin file.
type PodNodeSelectorConfig struct {
	// PodNodeSelectorPluginConfig maps a namespace to the selector its pods must stay within,
	// and the key clusterDefaultNodeSelector to the selector of namespaces without annotation.
	// Selectors are label selectors of equality terms ("env=prod,tier=web").
	PodNodeSelectorPluginConfig map[string]string `json:"podNodeSelectorPluginConfig"`
}

// clusterDefaultNodeSelector is the configuration key of the cluster's default selector.
const clusterDefaultNodeSelector = "clusterDefaultNodeSelector"

func newPodNodeSelector(deps admission.Deps, config []byte) (admission.Plugin, error) {
	p := &podNodeSelector{deps: deps, selectors: map[string]labels.Set{}}
	if len(config) == 0 {
		return p, nil
	}
	var c PodNodeSelectorConfig
	if err := decodeConfig(admission.PodNodeSelector, config, &c); err != nil {
		return nil, err
	}
	// Upstream parses the selectors on every request and fails the request for a bad one;
	// parsing them here fails at start instead, naming the entry.
	for k, v := range c.PodNodeSelectorPluginConfig {
		set, err := labels.ConvertSelectorToLabelsMap(v)
		if err != nil {
			return nil, fmt.Errorf("%s: podNodeSelectorPluginConfig[%s]: %w", admission.PodNodeSelector, k, err)
		}
		p.selectors[k] = set
	}
	return p, nil
}

func (*podNodeSelector) Name() string { return admission.PodNodeSelector }

// Interests: pod creates.
func (*podNodeSelector) Interests() []admission.Interest {
	return []admission.Interest{podInterest(admission.Create)}
}

func (p *podNodeSelector) Admit(ctx context.Context, a *admission.Attributes) error {
	pod, ok := p.applies(a)
	if !ok {
		return nil
	}
	nsSelector, err := p.namespaceSelector(ctx, a.Namespace)
	if err != nil {
		return err
	}
	if labels.Conflicts(nsSelector, labels.Set(pod.Spec.NodeSelector)) {
		return forbiddenPod(a, pod, errors.New("pod node label selector conflicts with its namespace node label selector"))
	}
	// The pod's own terms win where both set a key (there is no conflict by now).
	pod.Spec.NodeSelector = map[string]string(labels.Merge(nsSelector, pod.Spec.NodeSelector))
	return p.validate(a, pod, nsSelector)
}

func (p *podNodeSelector) Validate(ctx context.Context, a *admission.Attributes) error {
	pod, ok := p.applies(a)
	if !ok {
		return nil
	}
	nsSelector, err := p.namespaceSelector(ctx, a.Namespace)
	if err != nil {
		return err
	}
	return p.validate(a, pod, nsSelector)
}

func (p *podNodeSelector) validate(a *admission.Attributes, pod *corev1.Pod, nsSelector labels.Set) error {
	if labels.Conflicts(nsSelector, labels.Set(pod.Spec.NodeSelector)) {
		return forbiddenPod(a, pod, errors.New("pod node label selector conflicts with its namespace node label selector"))
	}
	if !isSubset(pod.Spec.NodeSelector, p.selectors[a.Namespace]) {
		return forbiddenPod(a, pod, errors.New("pod node label selector labels conflict with its namespace whitelist"))
	}
	return nil
}

// applies returns the pod of a pod create; anything else (and an object that is not a pod) is
// ignored, as upstream does.
func (*podNodeSelector) applies(a *admission.Attributes) (*corev1.Pod, bool) {
	if !isPod(a) || a.Operation != admission.Create {
		return nil, false
	}
	pod, ok := a.Object.(*corev1.Pod)
	return pod, ok && pod != nil
}

// namespaceSelector is the namespace's node selector: its annotation, else the cluster default.
func (p *podNodeSelector) namespaceSelector(ctx context.Context, name string) (labels.Set, error) {
	ns, err := getNamespace(ctx, p.deps, name)
	if err != nil {
		return nil, err
	}
	if v, ok := ns.Annotations[naming.NamespaceNodeSelectorAnnotation]; ok {
		set, err := labels.ConvertSelectorToLabelsMap(v)
		if err != nil {
			// Upstream returns the parse error as is (a 500 to the client).
			return nil, unknownError(err.Error())
		}
		return set, nil
	}
	return p.selectors[clusterDefaultNodeSelector], nil
}

// isSubset tells whether every term of sub is in super (an empty super allows everything).
func isSubset(sub map[string]string, super labels.Set) bool {
	if len(super) == 0 {
		return true
	}
	for k, v := range sub {
		if w, ok := super[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// getNamespace reads a namespace from the lister, and from storage when the lister does not
// have it (it may lag a namespace created just before): upstream's lister-then-client lookup.
// A namespace that does not exist is upstream's 404; other failures are 500s.
func getNamespace(ctx context.Context, deps admission.Deps, name string) (*corev1.Namespace, error) {
	if ns, ok := deps.Objects.Namespaces().Get("", name); ok {
		return ns, nil
	}
	ns, err := deps.Store.GetNamespace(ctx, name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
		}
		return nil, apierrors.NewInternalError(err)
	}
	return ns, nil
}
