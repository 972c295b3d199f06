package matchconditions

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"

	"platform.io/libs/naming"
)

// The authorizer variables: authorizer checks what the requester (or a service account) may
// do, authorizer.requestResource is a resource check preset to the request's resource (upstream's
// authz library). A check costs 350,000 (upstream's fixed cost: two checks per expression).
const (
	AuthorizerVar      = "authorizer"
	RequestResourceVar = "authorizer.requestResource"
	checkCost          = 350000
)

// Check is one authorization question an expression asks.
type Check struct {
	// ServiceAccountNamespace and ServiceAccountName, when set, ask about that service account
	// instead of the requester.
	ServiceAccountNamespace, ServiceAccountName string
	// ResourceRequest tells a resource check from a path check.
	ResourceRequest bool
	Path            string
	Verb            string
	Group           string
	Resource        string
	Subresource     string
	Namespace       string
	Name            string
}

// Authorize answers a Check for the request's user.
type Authorize func(ctx context.Context, c Check) (allowed bool, reason string, err error)

// RequestResource is the request's resource, for authorizer.requestResource.
type RequestResource struct {
	Group, Resource, Subresource, Namespace, Name string
}

var (
	authorizerType    = cel.ObjectType(naming.Product + ".authorization.Authorizer")
	pathCheckType     = cel.ObjectType(naming.Product + ".authorization.PathCheck")
	groupCheckType    = cel.ObjectType(naming.Product + ".authorization.GroupCheck")
	resourceCheckType = cel.ObjectType(naming.Product + ".authorization.ResourceCheck")
	decisionType      = cel.ObjectType(naming.Product + ".authorization.Decision")
)

// authzOptions declares the authorizer variables and the functions of upstream's authz library:
// path, group, serviceAccount, resource, subresource, namespace, name, check, allowed, reason,
// errored, error.
func authzOptions() []cel.EnvOption {
	str := cel.StringType
	return []cel.EnvOption{
		cel.Variable(AuthorizerVar, authorizerType),
		cel.Variable(RequestResourceVar, resourceCheckType),
		cel.Function("path", cel.MemberOverload("authorizer_path", []*cel.Type{authorizerType, str}, pathCheckType, cel.BinaryBinding(authorizerPath))),
		cel.Function("group", cel.MemberOverload("authorizer_group", []*cel.Type{authorizerType, str}, groupCheckType, cel.BinaryBinding(authorizerGroup))),
		cel.Function("serviceAccount", cel.MemberOverload("authorizer_serviceaccount", []*cel.Type{authorizerType, str, str}, authorizerType,
			cel.FunctionBinding(authorizerServiceAccount))),
		cel.Function("resource", cel.MemberOverload("groupcheck_resource", []*cel.Type{groupCheckType, str}, resourceCheckType, cel.BinaryBinding(groupResource))),
		cel.Function("subresource", cel.MemberOverload("resourcecheck_subresource", []*cel.Type{resourceCheckType, str}, resourceCheckType,
			cel.BinaryBinding(resourceSetter(func(r *resourceCheckVal, v string) { r.subresource = v })))),
		cel.Function("namespace", cel.MemberOverload("resourcecheck_namespace", []*cel.Type{resourceCheckType, str}, resourceCheckType,
			cel.BinaryBinding(resourceSetter(func(r *resourceCheckVal, v string) { r.namespace = v })))),
		cel.Function("name", cel.MemberOverload("resourcecheck_name", []*cel.Type{resourceCheckType, str}, resourceCheckType,
			cel.BinaryBinding(resourceSetter(func(r *resourceCheckVal, v string) { r.name = v })))),
		cel.Function("check",
			cel.MemberOverload("pathcheck_check", []*cel.Type{pathCheckType, str}, decisionType, cel.BinaryBinding(pathCheck)),
			cel.MemberOverload("resourcecheck_check", []*cel.Type{resourceCheckType, str}, decisionType, cel.BinaryBinding(resourceCheck))),
		cel.Function("allowed", cel.MemberOverload("decision_allowed", []*cel.Type{decisionType}, cel.BoolType,
			cel.UnaryBinding(decisionField(func(d decisionVal) ref.Val { return types.Bool(d.allowed) })))),
		cel.Function("reason", cel.MemberOverload("decision_reason", []*cel.Type{decisionType}, str,
			cel.UnaryBinding(decisionField(func(d decisionVal) ref.Val { return types.String(d.reason) })))),
		cel.Function("errored", cel.MemberOverload("decision_errored", []*cel.Type{decisionType}, cel.BoolType,
			cel.UnaryBinding(decisionField(func(d decisionVal) ref.Val { return types.Bool(d.err != nil) })))),
		cel.Function("error", cel.MemberOverload("decision_error", []*cel.Type{decisionType}, str,
			cel.UnaryBinding(decisionField(func(d decisionVal) ref.Val {
				if d.err == nil {
					return types.String("")
				}
				return types.String(d.err.Error())
			})))),
	}
}

// authzCostTrackers give a check its fixed runtime cost.
func authzCostTrackers() []interpreter.CostTrackerOption {
	cost := func([]ref.Val, ref.Val) *uint64 { c := uint64(checkCost); return &c }
	return []interpreter.CostTrackerOption{
		interpreter.OverloadCostTracker("pathcheck_check", cost),
		interpreter.OverloadCostTracker("resourcecheck_check", cost),
	}
}

// opaque is the part of ref.Val the authorization values share: they have functions, no fields.
type opaque struct{ t *types.Type }

func (o opaque) ConvertToNative(typeDesc reflect.Type) (any, error) {
	return nil, fmt.Errorf("type conversion error from '%s' to '%v'", o.t, typeDesc)
}

func (o opaque) ConvertToType(t ref.Type) ref.Val {
	if t == types.TypeType {
		return o.t
	}
	return types.NewErr("type conversion error from '%s' to '%s'", o.t, t)
}

func (o opaque) Equal(other ref.Val) ref.Val { return types.MaybeNoSuchOverloadErr(other) }
func (o opaque) Type() ref.Type              { return o.t }
func (o opaque) Value() any                  { return nil }

func newOpaque(t *cel.Type) opaque { return opaque{t: types.NewObjectTypeValue(t.String())} }

type authorizerVal struct {
	opaque
	ctx       context.Context
	authorize Authorize
	saNS      string
	saName    string
}

func newAuthorizer(ctx context.Context, authorize Authorize) authorizerVal {
	return authorizerVal{opaque: newOpaque(authorizerType), ctx: ctx, authorize: authorize}
}

type pathCheckVal struct {
	opaque
	a    authorizerVal
	path string
}

type groupCheckVal struct {
	opaque
	a     authorizerVal
	group string
}

type resourceCheckVal struct {
	opaque
	g                                      groupCheckVal
	resource, subresource, namespace, name string
}

func newResourceCheck(a authorizerVal, r RequestResource) resourceCheckVal {
	g := groupCheckVal{opaque: newOpaque(groupCheckType), a: a, group: r.Group}
	return resourceCheckVal{opaque: newOpaque(resourceCheckType), g: g, resource: r.Resource, subresource: r.Subresource, namespace: r.Namespace, name: r.Name}
}

type decisionVal struct {
	opaque
	allowed bool
	reason  string
	err     error
}

func stringArg(v ref.Val) (string, bool) {
	s, ok := v.Value().(string)
	return s, ok
}

func authorizerPath(lhs, rhs ref.Val) ref.Val {
	a, ok := lhs.(authorizerVal)
	path, ok2 := stringArg(rhs)
	if !ok || !ok2 {
		return types.MaybeNoSuchOverloadErr(lhs)
	}
	if strings.TrimSpace(path) == "" {
		return types.NewErr("path must not be empty")
	}
	return pathCheckVal{opaque: newOpaque(pathCheckType), a: a, path: path}
}

func authorizerGroup(lhs, rhs ref.Val) ref.Val {
	a, ok := lhs.(authorizerVal)
	group, ok2 := stringArg(rhs)
	if !ok || !ok2 {
		return types.MaybeNoSuchOverloadErr(lhs)
	}
	return groupCheckVal{opaque: newOpaque(groupCheckType), a: a, group: group}
}

func authorizerServiceAccount(args ...ref.Val) ref.Val {
	if len(args) != 3 {
		return types.NoSuchOverloadErr()
	}
	a, ok := args[0].(authorizerVal)
	ns, ok2 := stringArg(args[1])
	name, ok3 := stringArg(args[2])
	if !ok || !ok2 || !ok3 {
		return types.MaybeNoSuchOverloadErr(args[0])
	}
	if len(apimachineryvalidation.ValidateServiceAccountName(name, false)) > 0 {
		return types.NewErr("Invalid service account name")
	}
	if len(apimachineryvalidation.ValidateNamespaceName(ns, false)) > 0 {
		return types.NewErr("Invalid service account namespace")
	}
	a.saNS, a.saName = ns, name
	return a
}

func groupResource(lhs, rhs ref.Val) ref.Val {
	g, ok := lhs.(groupCheckVal)
	resource, ok2 := stringArg(rhs)
	if !ok || !ok2 {
		return types.MaybeNoSuchOverloadErr(lhs)
	}
	if strings.TrimSpace(resource) == "" {
		return types.NewErr("resource must not be empty")
	}
	return resourceCheckVal{opaque: newOpaque(resourceCheckType), g: g, resource: resource}
}

func resourceSetter(set func(r *resourceCheckVal, v string)) func(lhs, rhs ref.Val) ref.Val {
	return func(lhs, rhs ref.Val) ref.Val {
		r, ok := lhs.(resourceCheckVal)
		v, ok2 := stringArg(rhs)
		if !ok || !ok2 {
			return types.MaybeNoSuchOverloadErr(lhs)
		}
		set(&r, v)
		return r
	}
}

func pathCheck(lhs, rhs ref.Val) ref.Val {
	p, ok := lhs.(pathCheckVal)
	verb, ok2 := stringArg(rhs)
	if !ok || !ok2 {
		return types.MaybeNoSuchOverloadErr(lhs)
	}
	return decide(p.a, Check{Path: p.path, Verb: verb})
}

func resourceCheck(lhs, rhs ref.Val) ref.Val {
	r, ok := lhs.(resourceCheckVal)
	verb, ok2 := stringArg(rhs)
	if !ok || !ok2 {
		return types.MaybeNoSuchOverloadErr(lhs)
	}
	return decide(r.g.a, Check{ResourceRequest: true, Verb: verb, Group: r.g.group, Resource: r.resource, Subresource: r.subresource,
		Namespace: r.namespace, Name: r.name})
}

func decide(a authorizerVal, c Check) ref.Val {
	c.ServiceAccountNamespace, c.ServiceAccountName = a.saNS, a.saName
	d := decisionVal{opaque: newOpaque(decisionType)}
	if a.authorize == nil {
		d.err = fmt.Errorf("no authorizer")
		return d
	}
	d.allowed, d.reason, d.err = a.authorize(a.ctx, c)
	return d
}

func decisionField(f func(d decisionVal) ref.Val) func(ref.Val) ref.Val {
	return func(v ref.Val) ref.Val {
		d, ok := v.(decisionVal)
		if !ok {
			return types.MaybeNoSuchOverloadErr(v)
		}
		return f(d)
	}
}
