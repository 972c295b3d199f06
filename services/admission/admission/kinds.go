package admission

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
)

// Mapping is the resource serving a kind, and whether it is namespaced (Platform's group names).
type Mapping struct {
	Kind       schema.GroupVersionKind
	Resource   schema.GroupVersionResource
	Namespaced bool
}

// clusterScoped are the built-in cluster-scoped kinds, by Platform's group.
var clusterScoped = func() map[schema.GroupKind]bool {
	out := map[schema.GroupKind]bool{}
	for group, kinds := range map[string][]string{
		"":                             {"Namespace", "Node", "PersistentVolume", "ComponentStatus"},
		"rbac.authorization.k8s.io":    {"ClusterRole", "ClusterRoleBinding"},
		"storage.k8s.io":               {"StorageClass", "CSIDriver", "CSINode", "VolumeAttachment", "VolumeAttributesClass"},
		"scheduling.k8s.io":            {"PriorityClass"},
		"node.k8s.io":                  {"RuntimeClass"},
		"networking.k8s.io":            {"IngressClass", "IPAddress", "ServiceCIDR"},
		"admissionregistration.k8s.io": {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"},
		"apiextensions.k8s.io":         {"CustomResourceDefinition"},
		"apiregistration.k8s.io":       {"APIService"},
		"certificates.k8s.io":          {"CertificateSigningRequest", "ClusterTrustBundle"},
		"flowcontrol.apiserver.k8s.io": {"FlowSchema", "PriorityLevelConfiguration"},
		"resource.k8s.io":              {"DeviceClass", "ResourceSlice"},
		"authentication.k8s.io":        {"TokenReview", "SelfSubjectReview"},
		"authorization.k8s.io":         {"SubjectAccessReview", "SelfSubjectAccessReview", "SelfSubjectRulesReview"},
		"internal.apiserver.k8s.io":    {"StorageVersion"},
	} {
		for _, k := range kinds {
			out[schema.GroupKind{Group: naming.Group(group), Kind: k}] = true
		}
	}
	return out
}()

// irregularPlurals are the built-in kinds whose resource is not the regular plural.
var irregularPlurals = map[string]string{"Endpoints": "endpoints"}

// BuiltinMapping resolves a built-in kind (Platform's group name) as the gateway serves it: the
// resource is the kind's plural (upstream's regular pluralisation, with its exceptions), the
// scope comes from the list of cluster-scoped kinds. Kinds the Go types do not have are not
// found.
func BuiltinMapping(gvk schema.GroupVersionKind) (Mapping, error) {
	if _, ok := types[gvk]; !ok {
		return Mapping{}, fmt.Errorf("no matches for kind %q in version %q", gvk.Kind, gvk.GroupVersion().String())
	}
	plural, ok := irregularPlurals[gvk.Kind]
	if !ok {
		plural = pluralize(strings.ToLower(gvk.Kind))
	}
	return Mapping{Kind: gvk, Resource: gvk.GroupVersion().WithResource(plural), Namespaced: !clusterScoped[gvk.GroupKind()]}, nil
}

// pluralize is upstream's regular English plural of a lower-case kind.
func pluralize(s string) string {
	switch {
	case strings.HasSuffix(s, "s"), strings.HasSuffix(s, "x"), strings.HasSuffix(s, "z"),
		strings.HasSuffix(s, "ch"), strings.HasSuffix(s, "sh"):
		return s + "es"
	case strings.HasSuffix(s, "y") && len(s) > 1 && !strings.ContainsRune("aeiou", rune(s[len(s)-2])):
		return s[:len(s)-1] + "ies"
	}
	return s + "s"
}
