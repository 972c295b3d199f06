// Package apiregistration holds the APIService kind of the aggregation layer
// (apiregistration.k8s.io/v1 upstream, served under naming.Group of it). k8s.io/kube-aggregator is
// not in the module graph, so the Go types are defined here with upstream's JSON field names,
// tags and semantics; the gateway serves them as a built-in kind.
package apiregistration

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SchemeGroupVersion is upstream's group version of the kinds; the registry serves them under
// naming.Group(SchemeGroupVersion.Group).
var SchemeGroupVersion = schema.GroupVersion{Group: "apiregistration.k8s.io", Version: "v1"}

// AddToScheme registers APIService and APIServiceList in upstream's group version.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &APIService{}, &APIServiceList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}

// APIService represents a server for a particular group version. Its name must be
// "<version>.<group>".
type APIService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   APIServiceSpec   `json:"spec,omitempty"`
	Status APIServiceStatus `json:"status,omitempty"`
}

// APIServiceList is a list of APIServices.
type APIServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []APIService `json:"items"`
}

// ServiceReference names the Service an APIService's requests go to.
type ServiceReference struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// Port is the Service port (443 when unset); it must be a valid port number.
	Port *int32 `json:"port,omitempty"`
}

// APIServiceSpec says where a group version is served: by this server (Service nil) or by the
// Service's extension API server, and how it ranks in discovery.
type APIServiceSpec struct {
	// Service is nil for group versions served locally.
	Service *ServiceReference `json:"service,omitempty"`
	Group   string            `json:"group,omitempty"`
	Version string            `json:"version,omitempty"`
	// InsecureSkipTLSVerify turns off verification of the extension server's certificate.
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`
	// CABundle is the PEM bundle that verifies the extension server's serving certificate.
	CABundle []byte `json:"caBundle,omitempty"`
	// GroupPriorityMinimum orders groups (highest first); VersionPriority orders versions within
	// a group (highest first).
	GroupPriorityMinimum int32 `json:"groupPriorityMinimum"`
	VersionPriority      int32 `json:"versionPriority"`
}

// ConditionStatus is True, False or Unknown.
type ConditionStatus string

// The condition statuses.
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// APIServiceConditionType names a condition.
type APIServiceConditionType string

// Available says whether requests for the group version can be served.
const Available APIServiceConditionType = "Available"

// APIServiceCondition describes the state of an APIService at a point in time.
type APIServiceCondition struct {
	Type               APIServiceConditionType `json:"type"`
	Status             ConditionStatus         `json:"status"`
	LastTransitionTime metav1.Time             `json:"lastTransitionTime,omitempty"`
	Reason             string                  `json:"reason,omitempty"`
	Message            string                  `json:"message,omitempty"`
}

// APIServiceStatus holds the conditions.
type APIServiceStatus struct {
	Conditions []APIServiceCondition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// Condition returns the condition of type t, or nil.
func (s *APIServiceStatus) Condition(t APIServiceConditionType) *APIServiceCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

// SetCondition sets a condition, keeping its lastTransitionTime when the status is unchanged.
func (s *APIServiceStatus) SetCondition(c APIServiceCondition) {
	if cur := s.Condition(c.Type); cur != nil {
		if cur.Status == c.Status {
			c.LastTransitionTime = cur.LastTransitionTime
		}
		*cur = c
		return
	}
	s.Conditions = append(s.Conditions, c)
}

// IsAvailable tells whether the Available condition is True.
func (a *APIService) IsAvailable() bool {
	c := a.Status.Condition(Available)
	return c != nil && c.Status == ConditionTrue
}

// GroupVersion is the group version the APIService serves.
func (a *APIService) GroupVersion() schema.GroupVersion {
	return schema.GroupVersion{Group: a.Spec.Group, Version: a.Spec.Version}
}
