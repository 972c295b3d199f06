// Package matchconditions compiles and evaluates the CEL matchConditions of admission webhooks,
// in the environment the webhook dispatcher runs them in; the configuration validation compiles
// with the same environment, so an expression that is accepted on write is one the dispatcher can
// run.
//
// The environment follows upstream's base CEL environment for admission (release 1.33): the
// variables object and oldObject (the objects as JSON values, null when absent), request (the
// AdmissionRequest's fields without the objects), authorizer and authorizer.requestResource
// (upstream's authz library: path, group, serviceAccount, resource, subresource, namespace, name,
// check, allowed, reason, errored, error); the cel-go standard library with optional types,
// cross-type numeric comparisons, the strings (version 2), sets and two-variable comprehension
// extensions, literal validators, UTC as the default time zone, and upstream's cost limits
// (1,000,000 per expression, 10,000,000 per webhook's conditions, 350,000 per authorization
// check). Not provided: the authorizer's fieldSelector and labelSelector, and Kubernetes' own CEL
// libraries (regex find, lists, URLs, quantity, IP, CIDR, format, semver); an expression using
// them fails to compile, so a configuration using them is refused on write rather than failing
// at admission time.
package matchconditions

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

// Upstream's limits (k8s.io/apiserver/pkg/apis/cel).
const (
	// PerCallLimit bounds the runtime cost of one expression (roughly 0.1s of evaluation).
	PerCallLimit = 1000000
	// RuntimeCostBudget bounds the summed runtime cost of one webhook's conditions.
	RuntimeCostBudget = 10000000
	// MaxConditions is the most matchConditions a webhook may have.
	MaxConditions = 64
	// checkFrequency is how many comprehension iterations run between checks for cancellation.
	checkFrequency = 100
)

// Variable names, as upstream declares them.
const (
	ObjectVar    = "object"
	OldObjectVar = "oldObject"
	RequestVar   = "request"
)

// requestFields are the fields of the request variable (upstream's kubernetes.AdmissionRequest
// type, which has no uid and no objects) and, for the structured ones, their fields. The
// variable is a map at run time; selecting a field that is not listed fails compilation, as it
// does upstream where the variable is typed.
var requestFields = map[string][]string{
	"kind":               {"group", "version", "kind"},
	"resource":           {"group", "version", "resource"},
	"subResource":        nil,
	"requestKind":        {"group", "version", "kind"},
	"requestResource":    {"group", "version", "resource"},
	"requestSubResource": nil,
	"name":               nil,
	"namespace":          nil,
	"operation":          nil,
	"userInfo":           {"username", "uid", "groups", "extra"},
	"dryRun":             nil,
	"options":            nil,
}

var (
	envOnce sync.Once
	env     *cel.Env
	envErr  error
)

// Env returns the CEL environment of matchConditions.
func Env() (*cel.Env, error) {
	envOnce.Do(func() {
		opts := []cel.EnvOption{
			cel.HomogeneousAggregateLiterals(),
			cel.EagerlyValidateDeclarations(true),
			cel.DefaultUTCTimeZone(true),
			cel.CostEstimatorOptions(checker.PresenceTestHasCost(false)),
			cel.CrossTypeNumericComparisons(true),
			cel.OptionalTypes(),
			cel.ASTValidators(
				cel.ValidateDurationLiterals(),
				cel.ValidateTimestampLiterals(),
				cel.ValidateRegexLiterals(),
				cel.ValidateHomogeneousAggregateLiterals(),
			),
			ext.Strings(ext.StringsVersion(2)),
			ext.Sets(),
			ext.TwoVarComprehensions(),
			cel.Variable(ObjectVar, cel.DynType),
			cel.Variable(OldObjectVar, cel.DynType),
			cel.Variable(RequestVar, cel.MapType(cel.StringType, cel.DynType)),
		}
		env, envErr = cel.NewEnv(append(opts, authzOptions()...)...)
	})
	return env, envErr
}

// Compile compiles one expression into a program that returns a bool. The error's message is
// upstream's ("compilation failed: ...", "must evaluate to bool", "program instantiation failed:
// ...").
func Compile(expression string) (cel.Program, error) {
	e, err := Env()
	if err != nil {
		return nil, fmt.Errorf("unexpected error loading CEL environment: %w", err)
	}
	ast, issues := e.Compile(expression)
	if issues != nil && issues.Err() != nil {
		return nil, errors.New("compilation failed: " + issues.String())
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return nil, errors.New("must evaluate to bool")
	}
	if err := checkRequestFields(ast); err != nil {
		return nil, errors.New("compilation failed: " + err.Error())
	}
	prog, err := e.Program(ast,
		cel.EvalOptions(cel.OptOptimize, cel.OptTrackCost),
		cel.CostLimit(PerCallLimit),
		cel.CostTrackerOptions(append(authzCostTrackers(), interpreter.PresenceTestHasCost(false))...),
		cel.InterruptCheckFrequency(checkFrequency),
	)
	if err != nil {
		return nil, errors.New("program instantiation failed: " + err.Error())
	}
	return prog, nil
}

// checkRequestFields refuses selections of fields the request variable does not have.
func checkRequestFields(ast *cel.Ast) error {
	native := ast.NativeRep()
	refs := native.ReferenceMap()
	var bad []string
	celast.PreOrderVisit(native.Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		if e.Kind() != celast.SelectKind {
			return
		}
		sel := e.AsSelect()
		op := sel.Operand()
		switch op.Kind() {
		case celast.IdentKind:
			if !isRequestVar(op, refs) {
				return
			}
			if _, ok := requestFields[sel.FieldName()]; !ok {
				bad = append(bad, fmt.Sprintf("undefined field '%s'", sel.FieldName()))
			}
		case celast.SelectKind:
			parent := op.AsSelect()
			if parent.Operand().Kind() != celast.IdentKind || !isRequestVar(parent.Operand(), refs) {
				return
			}
			sub, ok := requestFields[parent.FieldName()]
			if !ok || sub == nil {
				return // reported for the parent, or options (any shape)
			}
			for _, f := range sub {
				if f == sel.FieldName() {
					return
				}
			}
			bad = append(bad, fmt.Sprintf("undefined field '%s'", sel.FieldName()))
		}
	}))
	if len(bad) > 0 {
		sort.Strings(bad)
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

func isRequestVar(e celast.Expr, refs map[int64]*celast.ReferenceInfo) bool {
	if e.AsIdent() != RequestVar {
		return false
	}
	ref, ok := refs[e.ID()]
	return ok && ref.Name == RequestVar
}

// Input is what conditions see: object and oldObject as decoded JSON (map[string]any, nil when
// absent), request as a map of the AdmissionRequest's fields, and the authorizer (Authorize
// answers for the request's user; without it the authorizer variables are absent and using them
// is an evaluation error).
type Input struct {
	Object          any
	OldObject       any
	Request         map[string]any
	Authorize       Authorize
	RequestResource RequestResource
}

// condition is one compiled matchCondition; err is set when it does not compile (a stored
// configuration written before a rule changed), and evaluating it is then an error.
type condition struct {
	name       string
	expression string
	program    cel.Program
	err        error
}

// Matcher is a webhook's compiled matchConditions.
type Matcher struct {
	conditions []condition
}

// NewMatcher compiles a webhook's conditions; conditions that do not compile are kept and fail
// when evaluated, as upstream does.
func NewMatcher(conds []admissionregistrationv1.MatchCondition) *Matcher {
	m := &Matcher{conditions: make([]condition, 0, len(conds))}
	for _, c := range conds {
		prog, err := Compile(c.Expression)
		m.conditions = append(m.conditions, condition{name: c.Name, expression: c.Expression, program: prog, err: err})
	}
	return m
}

// Empty tells whether there are no conditions.
func (m *Matcher) Empty() bool { return m == nil || len(m.conditions) == 0 }

// Result is the outcome of evaluating the conditions.
type Result struct {
	// Matches is true when every condition is true (and none failed).
	Matches bool
	// FailedCondition names the first condition that was false.
	FailedCondition string
	// Err is set when a condition could not be evaluated (and none was false), or when the cost
	// budget ran out; the webhook's failurePolicy decides what it means.
	Err error
}

// Match evaluates the conditions in order: any false condition means no match (whatever errors
// others had); otherwise any error is the result's error; otherwise a match.
func (m *Matcher) Match(ctx context.Context, in Input) Result {
	if m.Empty() {
		return Result{Matches: true}
	}
	vars := map[string]any{ObjectVar: in.Object, OldObjectVar: in.OldObject, RequestVar: in.Request}
	if in.Authorize != nil {
		a := newAuthorizer(ctx, in.Authorize)
		vars[AuthorizerVar] = a
		vars[RequestResourceVar] = newResourceCheck(a, in.RequestResource)
	}
	var errs []error
	remaining := int64(RuntimeCostBudget)
	for _, c := range m.conditions {
		if c.err != nil {
			errs = append(errs, fmt.Errorf("compilation error: %v", c.err))
			continue
		}
		out, details, err := c.program.ContextEval(ctx, vars)
		if details != nil {
			if cost := details.ActualCost(); cost != nil {
				if *cost > uint64(remaining) {
					return Result{Err: errors.New("validation failed due to running out of cost budget, no further validation rules will be run")}
				}
				remaining -= int64(*cost)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("expression '%s' resulted in error: %v", c.expression, err))
			continue
		}
		switch out {
		case types.False:
			return Result{FailedCondition: c.name}
		case types.True:
		default:
			errs = append(errs, fmt.Errorf("expression '%s' resulted in error: must evaluate to bool, got %v", c.expression, out.Type()))
		}
	}
	if len(errs) > 0 {
		return Result{Err: utilerrors.NewAggregate(errs)}
	}
	return Result{Matches: true}
}
