package quota

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// Configuration is the plugin's entry in the admission configuration file (upstream
// ResourceQuotaConfiguration of apiserver.config.k8s.io/v1, or the older Configuration of
// resourcequota.admission.k8s.io/v1beta1; both read the same).
type Configuration struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	// LimitedResources are resources that may be consumed only where a quota covers them: a
	// request that consumes one (a name containing one of matchContains, or an object in one of
	// matchScopes) in a namespace without a covering quota is rejected.
	LimitedResources []LimitedResource `json:"limitedResources,omitempty"`
}

// LimitedResource is one resource consumable only under a covering quota.
type LimitedResource struct {
	// APIGroup is the resource's group (upstream or Platform name; "" for core).
	APIGroup string `json:"apiGroup,omitempty"`
	// Resource is the resource measured ("pods", "persistentvolumeclaims").
	Resource string `json:"resource"`
	// MatchContains: any quota name of the object's usage containing one of these (for example
	// "requests.storage") must be covered.
	MatchContains []string `json:"matchContains,omitempty"`
	// MatchScopes: an object in one of these scopes must be covered by a quota of that scope.
	MatchScopes []corev1.ScopedResourceSelectorRequirement `json:"matchScopes,omitempty"`
}

var knownScopes = map[corev1.ResourceQuotaScope]bool{
	corev1.ResourceQuotaScopeTerminating:               true,
	corev1.ResourceQuotaScopeNotTerminating:            true,
	corev1.ResourceQuotaScopeBestEffort:                true,
	corev1.ResourceQuotaScopeNotBestEffort:             true,
	corev1.ResourceQuotaScopePriorityClass:             true,
	corev1.ResourceQuotaScopeCrossNamespacePodAffinity: true,
}

// parseConfig reads the configuration (nil or empty: none), rejecting unknown fields so a typo
// does not silently disable a limit.
func parseConfig(data []byte) (*Configuration, error) {
	c := &Configuration{}
	if len(bytes.TrimSpace(data)) == 0 || string(bytes.TrimSpace(data)) == "null" {
		return c, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(c); err != nil {
		return nil, fmt.Errorf("%s: invalid configuration: %w", admission.ResourceQuota, err)
	}
	switch c.Kind {
	case "", "ResourceQuotaConfiguration", "Configuration":
	default:
		return nil, fmt.Errorf("%s: invalid configuration: kind must be ResourceQuotaConfiguration, not %q", admission.ResourceQuota, c.Kind)
	}
	var errs []string
	for i := range c.LimitedResources {
		lr := &c.LimitedResources[i]
		if lr.Resource == "" {
			errs = append(errs, fmt.Sprintf("limitedResources[%d].resource: Required value", i))
		}
		lr.APIGroup = naming.Group(lr.APIGroup)
		for j, s := range lr.MatchScopes {
			if !knownScopes[s.ScopeName] {
				errs = append(errs, fmt.Sprintf("limitedResources[%d].matchScopes[%d].scopeName: Unsupported value: %q", i, j, s.ScopeName))
			}
			switch s.Operator {
			case corev1.ScopeSelectorOpIn, corev1.ScopeSelectorOpNotIn:
				if len(s.Values) == 0 {
					errs = append(errs, fmt.Sprintf("limitedResources[%d].matchScopes[%d].values: Required value: must be at least one value when `operator` is 'In' or 'NotIn' for scope selector", i, j))
				}
			case corev1.ScopeSelectorOpExists, corev1.ScopeSelectorOpDoesNotExist:
				if len(s.Values) != 0 {
					errs = append(errs, fmt.Sprintf("limitedResources[%d].matchScopes[%d].values: Invalid value: must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector", i, j))
				}
			default:
				errs = append(errs, fmt.Sprintf("limitedResources[%d].matchScopes[%d].operator: Unsupported value: %q", i, j, s.Operator))
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: invalid configuration: %s", admission.ResourceQuota, strings.Join(errs, "; "))
	}
	return c, nil
}
