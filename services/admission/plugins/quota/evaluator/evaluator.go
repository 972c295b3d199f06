// Package evaluator measures what objects cost against ResourceQuota, as upstream's quota
// evaluators do: object counts (count/<resource>.<group> and the legacy names), the compute
// resources of pods with the quota scopes, services (load balancers, node ports) and persistent
// volume claims (storage, per storage class). The ResourceQuota admission plugin charges with it
// and the quota controller recomputes status.used with it, so both always agree.
package evaluator

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
)

// Operations an evaluator may handle, as admission names them.
const (
	Create = "CREATE"
	Update = "UPDATE"
)

// Evaluator measures one resource for quota.
type Evaluator interface {
	// GroupResource is the resource measured (Platform's group name).
	GroupResource() schema.GroupResource
	// Handles tells whether an operation on the main resource can change usage (a create
	// always does; an update only where the object's cost can change).
	Handles(operation string) bool
	// MatchingResources returns the names among names that this resource's usage counts in.
	MatchingResources(names []corev1.ResourceName) []corev1.ResourceName
	// MatchingScopes returns the scope selectors of scopes that obj matches.
	MatchingScopes(obj runtime.Object, scopes []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error)
	// UncoveredScopes returns the limited scopes that no matched quota scope covers.
	UncoveredScopes(limited, matched []corev1.ScopedResourceSelectorRequirement) []corev1.ScopedResourceSelectorRequirement
	// Matches tells whether the quota constrains obj: it names a resource obj counts in and every
	// scope of the quota matches obj.
	Matches(q *corev1.ResourceQuota, obj runtime.Object) (bool, error)
	// Constraints checks that obj declares what the quota's required resources need (pods must
	// request and limit cpu and memory when a quota tracks them).
	Constraints(required []corev1.ResourceName, obj runtime.Object) error
	// Usage is what obj costs.
	Usage(obj runtime.Object) (corev1.ResourceList, error)
}

// ObjectCountName is the quota name of the number of objects of a resource: count/<resource>
// for the core group, count/<resource>.<group> otherwise.
func ObjectCountName(gr schema.GroupResource) corev1.ResourceName {
	if gr.Group == "" {
		return corev1.ResourceName("count/" + gr.Resource)
	}
	return corev1.ResourceName("count/" + gr.Resource + "." + gr.Group)
}

// legacyCountNames are the older names of some object counts, still honoured.
var legacyCountNames = map[string]corev1.ResourceName{
	"configmaps":             corev1.ResourceConfigMaps,
	"resourcequotas":         corev1.ResourceQuotas,
	"replicationcontrollers": corev1.ResourceReplicationControllers,
	"secrets":                corev1.ResourceSecrets,
}

// ignored are resources quota never measures (upstream's default: core events).
var ignored = map[schema.GroupResource]bool{{Resource: "events"}: true}

// For returns the evaluator of a resource, or nil for the ones quota ignores. now is the clock
// (pods stuck terminating stop counting once their grace period has passed).
func For(gr schema.GroupResource, now func() time.Time) Evaluator {
	if ignored[gr] {
		return nil
	}
	if now == nil {
		now = time.Now
	}
	if gr.Group == "" {
		switch gr.Resource {
		case "pods":
			return &podEvaluator{now: now}
		case "services":
			return serviceEvaluator{}
		case "persistentvolumeclaims":
			return pvcEvaluator{}
		}
	}
	return countEvaluator{gr: gr, name: ObjectCountName(gr), alias: legacy(gr)}
}

func legacy(gr schema.GroupResource) corev1.ResourceName {
	if gr.Group != "" {
		return ""
	}
	return legacyCountNames[gr.Resource]
}

// ScopeSelectors returns a quota's scopes (spec.scopes as Exists selectors, then
// spec.scopeSelector's expressions).
func ScopeSelectors(q *corev1.ResourceQuota) []corev1.ScopedResourceSelectorRequirement {
	var out []corev1.ScopedResourceSelectorRequirement
	for _, s := range q.Spec.Scopes {
		out = append(out, corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists})
	}
	if q.Spec.ScopeSelector != nil {
		out = append(out, q.Spec.ScopeSelector.MatchExpressions...)
	}
	return out
}

// matches is the generic quota match: some resource of status.hard counts obj, and every scope
// matches it.
func matches(e Evaluator, q *corev1.ResourceQuota, obj runtime.Object, scope func(corev1.ScopedResourceSelectorRequirement, runtime.Object) (bool, error)) (bool, error) {
	if q == nil {
		return false, fmt.Errorf("expected non-nil quota")
	}
	if len(e.MatchingResources(Names(q.Status.Hard))) == 0 {
		return false, nil
	}
	for _, s := range ScopeSelectors(q) {
		ok, err := scope(s, obj)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// noScope is the scope match of resources that have no scopes: a scoped quota never constrains
// them.
func noScope(corev1.ScopedResourceSelectorRequirement, runtime.Object) (bool, error) {
	return false, nil
}

// countEvaluator counts the objects of any resource.
type countEvaluator struct {
	gr    schema.GroupResource
	name  corev1.ResourceName
	alias corev1.ResourceName
}

func (e countEvaluator) GroupResource() schema.GroupResource { return e.gr }

// Handles: only creates change a count.
func (e countEvaluator) Handles(op string) bool { return op == Create }

func (e countEvaluator) MatchingResources(names []corev1.ResourceName) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, n := range names {
		if n == e.name || (e.alias != "" && n == e.alias) {
			out = append(out, n)
		}
	}
	return out
}

func (e countEvaluator) MatchingScopes(runtime.Object, []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return nil, nil
}

func (e countEvaluator) UncoveredScopes(_, _ []corev1.ScopedResourceSelectorRequirement) []corev1.ScopedResourceSelectorRequirement {
	return nil
}

func (e countEvaluator) Matches(q *corev1.ResourceQuota, obj runtime.Object) (bool, error) {
	return matches(e, q, obj, noScope)
}

func (e countEvaluator) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }

func (e countEvaluator) Usage(runtime.Object) (corev1.ResourceList, error) {
	out := corev1.ResourceList{e.name: *resource.NewQuantity(1, resource.DecimalSI)}
	if e.alias != "" {
		out[e.alias] = *resource.NewQuantity(1, resource.DecimalSI)
	}
	return out, nil
}

// scopeSelector turns a scope selector into a label selector over {scopeName: value}.
func scopeSelector(s corev1.ScopedResourceSelectorRequirement) (labels.Selector, error) {
	var op selection.Operator
	switch s.Operator {
	case corev1.ScopeSelectorOpIn:
		op = selection.In
	case corev1.ScopeSelectorOpNotIn:
		op = selection.NotIn
	case corev1.ScopeSelectorOpExists:
		op = selection.Exists
	case corev1.ScopeSelectorOpDoesNotExist:
		op = selection.DoesNotExist
	default:
		return nil, fmt.Errorf("%q is not a valid scope selector operator", s.Operator)
	}
	r, err := labels.NewRequirement(string(s.ScopeName), op, s.Values)
	if err != nil {
		return nil, err
	}
	return labels.NewSelector().Add(*r), nil
}
