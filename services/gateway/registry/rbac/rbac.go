// Package rbac holds the rules of roles and bindings: upstream's validation, path-segment names,
// and escalation prevention (a write hook: a role grants only what its writer holds).
package rbac

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/libs/naming"
	authzv1 "platform.io/proto/authz/v1"
	"platform.io/services/gateway/auth"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
)

// Group is the served group of roles and bindings.
var Group = naming.Group("rbac.authorization.k8s.io")

// Authorizer is what escalation prevention asks the authorization service: whether the writer
// may escalate or bind, and whether the writer holds the rules a role or binding grants.
type Authorizer interface {
	auth.Authorizer
	CheckEscalation(ctx context.Context, u *auth.User, namespace string, rules []*authzv1.PolicyRule) (*authzv1.CheckEscalationResponse, error)
}

// Getter reads the most recent version of a stored object (the role a binding references).
type Getter func(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (runtime.Object, error)

// Deps are what the rules need from the API server.
type Deps struct {
	Authorizer Authorizer
	Get        Getter
	Log        *slog.Logger
}

// Strategy is the strategy of Roles, ClusterRoles, RoleBindings and ClusterRoleBindings.
type Strategy struct {
	*builtin.Strategy
	deps Deps
}

// New returns the strategy of a role or binding kind over its default one.
func New(b *builtin.Strategy, deps Deps) registry.Strategy { return &Strategy{Strategy: b, deps: deps} }

// Validate applies upstream's validation of roles and bindings.
func (s *Strategy) Validate(obj, old runtime.Object) field.ErrorList { return validateRBAC(obj, old) }

// ValidateName: names of roles and bindings need only be one URL path segment, as upstream's.
func (s *Strategy) ValidateName(name string) []string { return builtin.PathSegmentName(name) }

// CheckWrite is escalation prevention, for writes of a user (the gateway's own carry none).
func (s *Strategy) CheckWrite(ctx context.Context, obj, old runtime.Object) error {
	u, ok := auth.UserFrom(ctx)
	if !ok {
		return nil
	}
	return s.checkEscalation(ctx, u, obj, old)
}

// checkEscalation is upstream's escalation prevention: a role may grant only what its writer
// holds (or the writer has the escalate verb on it); a binding may reference only a role whose
// permissions its writer holds (or the writer has the bind verb on that role). system:masters is
// exempt, and so are writes that change nothing but fields the garbage collector manages.
func (s *Strategy) checkEscalation(ctx context.Context, u *auth.User, obj, old runtime.Object) error {
	res := s.Res
	if slices.Contains(u.Groups, auth.GroupMasters) {
		return nil
	}
	if old != nil && onlyGCFieldsChanged(obj, old) {
		return nil
	}
	gr := res.GroupResource()
	name := registry.Meta(obj).GetName()
	namespace := registry.Meta(obj).GetNamespace()
	verbAllowed := func(verb, resource, roleName string) (bool, error) {
		attrs := auth.Attributes{User: u, Verb: verb, ResourceRequest: true, APIGroup: Group, APIVersion: "v1", Resource: resource, Namespace: namespace, Name: roleName}
		d, _, err := s.deps.Authorizer.Authorize(ctx, attrs)
		if err != nil {
			return false, auth.DependencyError(ctx, s.deps.Log, err)
		}
		return d == auth.DecisionAllow, nil
	}
	covers := func(rules []rbacv1.PolicyRule) error {
		resp, err := s.deps.Authorizer.CheckEscalation(ctx, u, namespace, toProtoRules(rules))
		if err != nil {
			return auth.DependencyError(ctx, s.deps.Log, err)
		}
		if !resp.GetCovered() {
			return apierrors.NewForbidden(gr, name, errors.New(resp.GetMessage()))
		}
		return nil
	}
	switch o := obj.(type) {
	case *rbacv1.Role, *rbacv1.ClusterRole:
		if ok, err := verbAllowed("escalate", res.Resource, name); err != nil || ok {
			return err
		}
		var rules []rbacv1.PolicyRule
		var aggregated bool
		switch r := o.(type) {
		case *rbacv1.Role:
			rules = r.Rules
		case *rbacv1.ClusterRole:
			rules, aggregated = r.Rules, r.AggregationRule != nil
		}
		if err := covers(rules); err != nil {
			return err
		}
		if aggregated {
			// An aggregation rule can gather anything: it takes every permission to set one.
			all := []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}, {Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}
			if err := covers(all); err != nil {
				return apierrors.NewForbidden(gr, name, errors.New("must have cluster-admin privileges to use the aggregationRule"))
			}
		}
		return nil
	case *rbacv1.RoleBinding, *rbacv1.ClusterRoleBinding:
		var ref rbacv1.RoleRef
		switch b := o.(type) {
		case *rbacv1.RoleBinding:
			ref = b.RoleRef
		case *rbacv1.ClusterRoleBinding:
			ref = b.RoleRef
		}
		roleResource := "roles"
		if ref.Kind == "ClusterRole" {
			roleResource = "clusterroles"
		}
		if ok, err := verbAllowed("bind", roleResource, ref.Name); err != nil || ok {
			return err
		}
		rules, err := s.roleRules(ctx, ref, namespace)
		if err != nil {
			return apierrors.NewForbidden(gr, name, err)
		}
		return covers(rules)
	}
	return nil
}

// roleRules reads the rules of the role a binding references.
func (s *Strategy) roleRules(ctx context.Context, ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	resource, ns := "roles", namespace
	if ref.Kind == "ClusterRole" {
		resource, ns = "clusterroles", ""
	}
	obj, err := s.deps.Get(ctx, schema.GroupVersionResource{Group: Group, Version: "v1", Resource: resource}, ns, ref.Name)
	if err != nil {
		return nil, err
	}
	switch r := obj.(type) {
	case *rbacv1.Role:
		return r.Rules, nil
	case *rbacv1.ClusterRole:
		return r.Rules, nil
	}
	return nil, fmt.Errorf("unexpected %T", obj)
}

// onlyGCFieldsChanged tells whether an update changes nothing but ownerReferences and
// finalizers (upstream lets anyone who may update do that, so the garbage collector can work).
func onlyGCFieldsChanged(obj, old runtime.Object) bool {
	a, b := obj.DeepCopyObject(), old.DeepCopyObject()
	for _, o := range []runtime.Object{a, b} {
		m := registry.Meta(o)
		m.SetOwnerReferences(nil)
		m.SetFinalizers(nil)
		m.SetResourceVersion("")
		m.SetManagedFields(nil)
	}
	return equality.Semantic.DeepEqual(a, b)
}

func toProtoRules(rules []rbacv1.PolicyRule) []*authzv1.PolicyRule {
	out := make([]*authzv1.PolicyRule, 0, len(rules))
	for _, r := range rules {
		out = append(out, &authzv1.PolicyRule{Verbs: r.Verbs, ApiGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames, NonResourceUrls: r.NonResourceURLs})
	}
	return out
}

// validateRBAC applies upstream's validation of roles and bindings.
func validateRBAC(obj, old runtime.Object) field.ErrorList {
	switch o := obj.(type) {
	case *rbacv1.Role:
		return validateRules(o.Rules, true)
	case *rbacv1.ClusterRole:
		errs := validateRules(o.Rules, false)
		if ar := o.AggregationRule; ar != nil && len(ar.ClusterRoleSelectors) == 0 {
			errs = append(errs, field.Required(field.NewPath("aggregationRule", "clusterRoleSelectors"), "at least one clusterRoleSelector required if aggregationRule is non-nil"))
		}
		return errs
	case *rbacv1.RoleBinding:
		errs := validateRoleRef(o.RoleRef, true)
		errs = append(errs, validateSubjects(o.Subjects, true)...)
		if prev, ok := old.(*rbacv1.RoleBinding); ok && prev.RoleRef != o.RoleRef {
			errs = append(errs, field.Invalid(field.NewPath("roleRef"), o.RoleRef, "cannot change roleRef"))
		}
		return errs
	case *rbacv1.ClusterRoleBinding:
		errs := validateRoleRef(o.RoleRef, false)
		errs = append(errs, validateSubjects(o.Subjects, false)...)
		if prev, ok := old.(*rbacv1.ClusterRoleBinding); ok && prev.RoleRef != o.RoleRef {
			errs = append(errs, field.Invalid(field.NewPath("roleRef"), o.RoleRef, "cannot change roleRef"))
		}
		return errs
	}
	return nil
}

func validateRules(rules []rbacv1.PolicyRule, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	for i, r := range rules {
		p := field.NewPath("rules").Index(i)
		if len(r.Verbs) == 0 {
			errs = append(errs, field.Required(p.Child("verbs"), "verbs must contain at least one value"))
		}
		if len(r.NonResourceURLs) > 0 {
			if namespaced {
				errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), r.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
			}
			if len(r.APIGroups) > 0 || len(r.Resources) > 0 || len(r.ResourceNames) > 0 {
				errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), r.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
			}
			continue
		}
		if len(r.APIGroups) == 0 {
			errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
		}
		if len(r.Resources) == 0 {
			errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
		}
	}
	return errs
}

func validateRoleRef(ref rbacv1.RoleRef, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("roleRef")
	// Upstream's name of the group is accepted too: kubectl's create rolebinding and manifests
	// written for upstream carry it (only kind and name select the role).
	if naming.Group(ref.APIGroup) != Group {
		errs = append(errs, field.NotSupported(p.Child("apiGroup"), ref.APIGroup, []string{Group}))
	}
	kinds := []string{"ClusterRole"}
	if namespaced {
		kinds = []string{"Role", "ClusterRole"}
	}
	if !slices.Contains(kinds, ref.Kind) {
		errs = append(errs, field.NotSupported(p.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		for _, msg := range builtin.PathSegmentName(ref.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), ref.Name, msg))
		}
	}
	return errs
}

func validateSubjects(subjects []rbacv1.Subject, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	for i, s := range subjects {
		p := field.NewPath("subjects").Index(i)
		if s.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		}
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			if s.APIGroup != "" {
				errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{""}))
			}
			if s.Name != "" {
				for _, msg := range validation.IsDNS1123Subdomain(s.Name) {
					errs = append(errs, field.Invalid(p.Child("name"), s.Name, msg))
				}
			}
			if !namespaced && s.Namespace == "" {
				errs = append(errs, field.Required(p.Child("namespace"), ""))
			}
		case rbacv1.UserKind, rbacv1.GroupKind:
			if naming.Group(s.APIGroup) != Group {
				errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{Group}))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
		}
	}
	return errs
}
