// Package rbac is the RBAC authorization mode: Kubernetes RBAC (rbac.authorization.platform.io/v1,
// the semantics of upstream's rbac.authorization.k8s.io/v1) compiled into a Rego data document
// and decided by one fixed, data-driven Rego policy through a prepared OPA query.
//
// The RBAC objects become data, indexed by subject (user and group) and scope (cluster-wide or
// one namespace), with every binding's role resolved at compile time. A decision reads only the
// entries of the requesting user and its groups, so its cost does not grow with the number of
// bindings, and an RBAC change is an Update of the data, never a new policy. Policy and Data
// print both, for operators to read and test with opa.
package rbac

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/topdown"

	"platform.io/services/authz/authorizer"
)

//go:embed policy.rego
var policy string

// DecisionQuery is the query Authorize evaluates; operators ask opa the same with the printed
// policy and data (data.rbac.allow is the plain boolean).
const DecisionQuery = "data.rbac.decision"

// Authorizer is the RBAC authorization mode. It is safe for concurrent use: Authorize, RulesFor
// and Covers run concurrently with each other and with Update.
type Authorizer struct {
	query rego.PreparedEvalQuery
	store storage.Store

	// mu serializes Updates, so the store and the Go index change in the same order.
	mu         sync.Mutex
	current    atomic.Pointer[compiled]
	generation atomic.Uint64
	log        *slog.Logger
}

// Option configures an Authorizer.
type Option func(*Authorizer)

// WithLogger sets the logger Updates are reported to (slog.Default otherwise).
func WithLogger(l *slog.Logger) Option {
	return func(a *Authorizer) { a.log = l }
}

// New compiles the policy and prepares its query over an empty snapshot (which allows nothing).
func New(opts ...Option) (*Authorizer, error) {
	a := &Authorizer{log: slog.Default()}
	for _, o := range opts {
		o(a)
	}
	empty := compileSnapshot(Snapshot{})
	// The store keeps the data as AST values, so evaluation reads them without conversion.
	a.store = inmem.NewFromASTObject(empty.data)
	q, err := rego.New(
		rego.SetRegoVersion(ast.RegoV1),
		rego.Module("rbac.rego", policy),
		rego.Query(DecisionQuery),
		rego.Store(a.store),
		rego.StrictBuiltinErrors(true),
		// Hand the decision back as AST: Authorize reads three fields, no JSON conversion.
		rego.GenerateJSON(func(t *ast.Term, _ *rego.EvalContext) (any, error) { return t, nil }),
	).PrepareForEval(context.Background())
	if err != nil {
		return nil, fmt.Errorf("rbac: compiling the policy: %w", err)
	}
	a.query = q
	a.current.Store(empty)
	return a, nil
}

// Update replaces the RBAC objects decisions are made from. Readers see the old or the new
// snapshot, never a mix; Generation grows once the new one is in effect.
func (a *Authorizer) Update(ctx context.Context, s Snapshot) error {
	start := time.Now()
	c := compileSnapshot(s)

	a.mu.Lock()
	defer a.mu.Unlock()
	txn, err := a.store.NewTransaction(ctx, storage.WriteParams)
	if err != nil {
		return fmt.Errorf("rbac: opening the data transaction: %w", err)
	}
	if err := a.store.Write(ctx, txn, storage.ReplaceOp, storage.RootPath, c.data); err != nil {
		a.store.Abort(ctx, txn)
		return fmt.Errorf("rbac: writing the data: %w", err)
	}
	if err := a.store.Commit(ctx, txn); err != nil {
		return fmt.Errorf("rbac: committing the data: %w", err)
	}
	a.current.Store(c)
	gen := a.generation.Add(1)
	a.log.LogAttrs(ctx, slog.LevelInfo, "rbac data updated",
		slog.Uint64("generation", gen),
		slog.Int("roles", len(s.Roles)), slog.Int("clusterRoles", len(s.ClusterRoles)),
		slog.Int("roleBindings", len(s.RoleBindings)), slog.Int("clusterRoleBindings", len(s.ClusterRoleBindings)),
		slog.Int("effectiveBindings", c.bindings), slog.Int("grants", c.grants), slog.Int("entries", c.entries),
		slog.Duration("took", time.Since(start)))
	return nil
}

// Generation counts the Updates in effect; it grows on every Update.
func (a *Authorizer) Generation() uint64 { return a.generation.Load() }

// Policy is the Rego module decisions are made with, for --dump-policy: it never changes, the
// RBAC objects are in Data.
func (a *Authorizer) Policy() string { return policy }

// Data is the current data document as JSON (load it with the policy: opa eval -d policy.rego
// -d data.json -i input.json data.rbac.decision).
func (a *Authorizer) Data() ([]byte, error) {
	ctx := context.Background()
	txn, err := a.store.NewTransaction(ctx)
	if err != nil {
		return nil, err
	}
	defer a.store.Abort(ctx, txn)
	v, err := a.store.Read(ctx, txn, storage.RootPath)
	if err != nil {
		return nil, err
	}
	val, ok := v.(ast.Value)
	if !ok {
		return nil, fmt.Errorf("rbac: data document is a %T, not an AST value", v)
	}
	doc, err := ast.JSON(val)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Terms of the decision's fields; its "reason" is keyReason, the key the grants use too.
var (
	keyAllowed         = ast.StringTerm("allowed")
	keyNameIndependent = ast.StringTerm("nameIndependent")
)

// noMetrics spares every evaluation a metrics registry nobody reads.
var noMetrics = metrics.NoOp()

// noCancel is the cancellation of an evaluation whose context cannot be cancelled.
type noCancel struct{}

func (noCancel) Cancel()         {}
func (noCancel) Cancelled() bool { return false }

// errNoUser is returned for attributes without a user: RBAC decides for someone.
var errNoUser = errors.New("rbac: request has no user")

// Authorize decides a request: Allow with the binding that allows it, or NoOpinion (RBAC never
// denies). An evaluation error is returned with an uncacheable NoOpinion.
func (a *Authorizer) Authorize(ctx context.Context, at authorizer.Attributes) (authorizer.Result, error) {
	if at.User == nil {
		return authorizer.Result{Uncacheable: true}, errNoUser
	}
	if err := ctx.Err(); err != nil {
		return authorizer.Result{Uncacheable: true}, err
	}
	opts := []rego.EvalOption{rego.EvalParsedInput(inputValue(&at)), rego.EvalMetrics(noMetrics)}
	// rego watches the context with a goroutine per evaluation unless told how to cancel; a
	// callback on the context's cancellation costs far less.
	if ctx.Done() != nil {
		c := topdown.NewCancel()
		stop := context.AfterFunc(ctx, c.Cancel)
		defer stop()
		opts = append(opts, rego.EvalExternalCancel(c))
	} else {
		opts = append(opts, rego.EvalExternalCancel(noCancel{}))
	}
	rs, err := a.query.Eval(ctx, opts...)
	if err != nil {
		return authorizer.Result{Uncacheable: true}, fmt.Errorf("rbac: evaluating the policy: %w", err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return authorizer.Result{Uncacheable: true}, fmt.Errorf("rbac: the policy gave %d results, want one decision", len(rs))
	}
	t, ok := rs[0].Expressions[0].Value.(*ast.Term)
	if !ok {
		return authorizer.Result{Uncacheable: true}, fmt.Errorf("rbac: the decision is a %T", rs[0].Expressions[0].Value)
	}
	obj, ok := t.Value.(ast.Object)
	if !ok {
		return authorizer.Result{Uncacheable: true}, fmt.Errorf("rbac: the decision is %v, not an object", t)
	}
	allowed, ok1 := boolField(obj, keyAllowed)
	nameIndependent, ok2 := boolField(obj, keyNameIndependent)
	reason, ok3 := stringField(obj, keyReason)
	if !ok1 || !ok2 || !ok3 {
		return authorizer.Result{Uncacheable: true}, fmt.Errorf("rbac: malformed decision %v", t)
	}
	res := authorizer.Result{Reason: reason, NameIndependent: nameIndependent}
	if allowed {
		res.Decision = authorizer.Allow
	}
	return res, nil
}

func boolField(obj ast.Object, key *ast.Term) (bool, bool) {
	t := obj.Get(key)
	if t == nil {
		return false, false
	}
	b, ok := t.Value.(ast.Boolean)
	return bool(b), ok
}

func stringField(obj ast.Object, key *ast.Term) (string, bool) {
	t := obj.Get(key)
	if t == nil {
		return "", false
	}
	s, ok := t.Value.(ast.String)
	return string(s), ok
}
