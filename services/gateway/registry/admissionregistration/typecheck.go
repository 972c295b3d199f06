package admissionregistration

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/gorilla/mux"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"platform.io/libs/naming"
	"platform.io/services/gateway/openapi"
	"platform.io/services/gateway/registry"
)

// typeChecker fills a policy's status.typeChecking as upstream's
// validatingadmissionpolicy-status controller does, with upstream's TypeChecker: each validation
// expression and message expression is compiled against the schema of every kind the policy's
// resource rules name (at most ten), with params of the paramKind's schema. The kinds come from
// the registry; the schemas from the gateway's own OpenAPI v3 documents (built on first use and
// following the registry, custom resources included), read through client-go's discovery
// client over an in-process transport, which is upstream's ClientDiscoveryResolver. Groups
// written with upstream's names resolve to Platform's.
type typeChecker struct {
	reg *registry.Registry

	once    sync.Once
	checker *validating.TypeChecker
	err     error
}

func newTypeChecker(reg *registry.Registry) *typeChecker { return &typeChecker{reg: reg} }

func (t *typeChecker) init() {
	h, err := openapi.New(t.reg)
	if err != nil {
		t.err = fmt.Errorf("building the OpenAPI documents for type checking: %w", err)
		return
	}
	router := mux.NewRouter()
	h.Install(router)
	client, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: "http://openapi.in-process", Transport: inProcess{router}})
	if err != nil {
		t.err = err
		return
	}
	t.checker = &validating.TypeChecker{
		SchemaResolver: platformSchemas{&resolver.ClientDiscoveryResolver{Discovery: client}},
		RestMapper:     kinds{reg: t.reg},
	}
}

// check returns the expression warnings of p (nil when the checker cannot run).
func (t *typeChecker) check(p *admissionregistrationv1.ValidatingAdmissionPolicy) ([]admissionregistrationv1.ExpressionWarning, error) {
	t.once.Do(t.init)
	if t.err != nil {
		return nil, t.err
	}
	return t.checker.Check(p), nil
}

// inProcess answers requests with a handler, without a network.
type inProcess struct{ h http.Handler }

func (p inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	p.h.ServeHTTP(w, r)
	return w.Result(), nil
}

// platformSchemas resolves kinds named with upstream's groups under Platform's.
type platformSchemas struct{ r resolver.SchemaResolver }

func (s platformSchemas) ResolveSchema(gvk schema.GroupVersionKind) (*spec.Schema, error) {
	gvk.Group = naming.Group(gvk.Group)
	return s.r.ResolveSchema(gvk)
}

// kinds is the registry as the one RESTMapper method the type checker calls (KindsFor); the
// others are left unimplemented.
type kinds struct {
	meta.RESTMapper
	reg *registry.Registry
}

func (k kinds) KindsFor(gvr schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	gvr.Group = naming.Group(gvr.Group)
	res, ok := k.reg.Resource(gvr)
	if !ok {
		return nil, &meta.NoResourceMatchError{PartialResource: gvr}
	}
	return []schema.GroupVersionKind{res.GroupVersionKind()}, nil
}
