package webhook

import (
	"context"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// admissionRegistrationGroup is the group of the webhook configurations (Platform's name).
var admissionRegistrationGroup = naming.Group(admissionregistrationv1.GroupName)

// exemptKinds are never sent to webhooks, so a broken webhook cannot lock out the
// configurations that would fix it (upstream's IsExemptAdmissionConfigurationResource).
var exemptKinds = map[string]bool{
	"ValidatingWebhookConfiguration":   true,
	"MutatingWebhookConfiguration":     true,
	"ValidatingAdmissionPolicy":        true,
	"ValidatingAdmissionPolicyBinding": true,
	"MutatingAdmissionPolicy":          true,
	"MutatingAdmissionPolicyBinding":   true,
}

// exemptResources are the same by resource, for requests whose kind is not set.
var exemptResources = map[string]bool{
	"validatingwebhookconfigurations":   true,
	"mutatingwebhookconfigurations":     true,
	"validatingadmissionpolicies":       true,
	"validatingadmissionpolicybindings": true,
	"mutatingadmissionpolicies":         true,
	"mutatingadmissionpolicybindings":   true,
}

func exempt(a *admission.Attributes) bool {
	return (a.Kind.Group == admissionRegistrationGroup && exemptKinds[a.Kind.Kind]) ||
		(a.Resource.Group == admissionRegistrationGroup && exemptResources[a.Resource.Resource])
}

func isNamespace(a *admission.Attributes) bool {
	return a.Resource.Group == "" && a.Resource.Resource == "namespaces"
}

// matchesRules tells whether any rule of h matches the request (upstream's rules.Matcher).
// Groups in rules are read with naming.Group, so rules written with upstream's group names match
// Platform's. matchPolicy Equivalent: each resource is served in one version here, so a rule
// naming the group and resource matches whatever version it lists; Exact also needs the version.
func (h *hook) matchesRules(a *admission.Attributes) bool {
	for i := range h.rules {
		if ruleMatches(&h.rules[i], a, h.exact) {
			return true
		}
	}
	return false
}

func ruleMatches(r *admissionregistrationv1.RuleWithOperations, a *admission.Attributes, exact bool) bool {
	return scopeMatches(r.Scope, a) && operationMatches(r.Operations, a.Operation) &&
		groupMatches(r.APIGroups, a.Resource.Group) && (!exact || exactOrWildcard(r.APIVersions, a.Resource.Version)) &&
		resourceMatches(r.Resources, a.Resource.Resource, a.Subresource)
}

func scopeMatches(scope *admissionregistrationv1.ScopeType, a *admission.Attributes) bool {
	if scope == nil || *scope == admissionregistrationv1.AllScopes {
		return true
	}
	switch *scope {
	case admissionregistrationv1.NamespacedScope:
		// A Namespace carries its own name as its namespace but is cluster-scoped.
		return !isNamespace(a) && a.Namespace != ""
	case admissionregistrationv1.ClusterScope:
		return isNamespace(a) || a.Namespace == ""
	}
	return false
}

func operationMatches(ops []admissionregistrationv1.OperationType, op admission.Operation) bool {
	for _, o := range ops {
		if o == admissionregistrationv1.OperationAll || string(o) == string(op) {
			return true
		}
	}
	return false
}

func groupMatches(groups []string, group string) bool {
	for _, g := range groups {
		if g == "*" || naming.Group(g) == group {
			return true
		}
	}
	return false
}

func exactOrWildcard(items []string, v string) bool {
	for _, i := range items {
		if i == "*" || i == v {
			return true
		}
	}
	return false
}

// resourceMatches reads "res", "res/sub", "*" (all resources, no subresources), "*/*",
// "res/*" and "*/sub".
func resourceMatches(resources []string, resource, sub string) bool {
	for _, r := range resources {
		res, s, _ := strings.Cut(r, "/")
		if (res == "*" || res == resource) && (s == "*" || s == sub) {
			return true
		}
	}
	return false
}

// namespaceLabels returns the labels the namespaceSelector is tested against: a Namespace's own
// (for its creation and updates, the new object's), otherwise the request's namespace's, from
// the lister or, when the lister does not have it yet, from storage.
func (d *dispatcher) namespaceLabels(ctx context.Context, a *admission.Attributes) (map[string]string, error) {
	if isNamespace(a) && a.Subresource == "" && (a.Operation == admission.Create || a.Operation == admission.Update) {
		if m := admission.Accessor(a.Object); m != nil {
			return m.GetLabels(), nil
		}
		return nil, nil
	}
	name := a.Namespace
	if name == "" && isNamespace(a) {
		name = a.Name
	}
	if ns, ok := d.deps.Objects.Namespaces().Get("", name); ok && ns != nil {
		return ns.Labels, nil
	}
	ns, err := d.deps.Store.GetNamespace(ctx, name)
	if err != nil {
		return nil, err
	}
	return ns.Labels, nil
}

// matchNamespace applies the namespaceSelector; it does not apply to cluster-scoped requests
// other than for Namespaces.
func (d *dispatcher) matchNamespace(ctx context.Context, h *hook, a *admission.Attributes) (bool, error) {
	if a.Namespace == "" && !isNamespace(a) {
		return true, nil
	}
	if h.nsSelector.Empty() {
		return true, nil
	}
	lbls, err := d.namespaceLabels(ctx, a)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return false, err
		}
		return false, apierrors.NewInternalError(err)
	}
	return h.nsSelector.Matches(labels.Set(lbls)), nil
}

// matchObject applies the objectSelector to the object and the old object: either matching is
// enough; an absent object, or one without metadata, never matches a non-empty selector.
func matchObject(h *hook, a *admission.Attributes) bool {
	if h.objSelector.Empty() {
		return true
	}
	return objectMatches(a.Object, h.objSelector) || objectMatches(a.OldObject, h.objSelector)
}

func objectMatches(obj runtime.Object, sel labels.Selector) bool {
	if obj == nil {
		return false
	}
	m := admission.Accessor(obj)
	if m == nil {
		return false
	}
	return sel.Matches(labels.Set(m.GetLabels()))
}

// shouldCall decides whether h is called for the request, in upstream's order: selectors and
// rules first (a selector's error only counts for a webhook whose rules match), then the
// matchConditions, whose evaluation error follows the failurePolicy: Fail rejects (403), Ignore
// skips the webhook.
func (d *dispatcher) shouldCall(ctx context.Context, h *hook, a *admission.Attributes, st *requestState) (bool, error) {
	nsMatch, nsErr := true, error(nil)
	if h.selectorErr == nil {
		nsMatch, nsErr = d.matchNamespace(ctx, h, a)
		if !nsMatch && nsErr == nil {
			return false, nil
		}
		if !matchObject(h, a) {
			return false, nil
		}
	}
	if !h.matchesRules(a) {
		return false, nil
	}
	if h.selectorErr != nil {
		return false, apierrors.NewInternalError(h.selectorErr)
	}
	if nsErr != nil {
		return false, nsErr
	}
	if h.conditions.Empty() {
		return true, nil
	}
	res := h.conditions.Match(ctx, st.celInput())
	if res.Err != nil {
		if h.ignoreFailure {
			d.deps.Log.WarnContext(ctx, "webhook match conditions failed, skipping the webhook", "webhook", h.name, "err", res.Err)
			return false, nil
		}
		d.deps.Log.WarnContext(ctx, "webhook match conditions failed, failing closed", "webhook", h.name, "err", res.Err)
		return false, apierrors.NewForbidden(a.GroupResource(), a.Name, res.Err)
	}
	return res.Matches, nil
}
