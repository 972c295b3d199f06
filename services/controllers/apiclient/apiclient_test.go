package apiclient_test

import (
	"bytes"
	"context"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"platform.io/libs/naming"
	"platform.io/services/controllers/apiclient"
	"platform.io/services/controllers/internal/testenv"
)

// exchange is what the recorder saw of one request.
type exchange struct {
	method, path, query string
	contentType         string // request
	accept              string
	bodyPrefix          []byte // the request body's first 4 bytes
	status              int
	respContentType     string
}

// recorder records the media types of every request of the clients.
type recorder struct {
	mu  sync.Mutex
	log []exchange
}

// wrap is a rest.Config WrapTransport: every client New builds gets its own transport.
func (r *recorder) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) { return r.roundTrip(next, req) })
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func (r *recorder) roundTrip(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	ex := exchange{method: req.Method, path: req.URL.Path, query: req.URL.RawQuery, contentType: req.Header.Get("Content-Type"), accept: req.Header.Get("Accept")}
	if req.GetBody != nil {
		if body, err := req.GetBody(); err == nil {
			prefix := make([]byte, 4)
			n, _ := io.ReadFull(body, prefix)
			ex.bodyPrefix = prefix[:n]
			body.Close()
		}
	}
	resp, err := next.RoundTrip(req)
	if resp != nil {
		ex.status = resp.StatusCode
		ex.respContentType = resp.Header.Get("Content-Type")
	}
	r.mu.Lock()
	r.log = append(r.log, ex)
	r.mu.Unlock()
	return resp, err
}

// find returns the last exchange of method on path (with a query containing query), or fails.
func (r *recorder) find(t *testing.T, method, path, query string) exchange {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.log) - 1; i >= 0; i-- {
		ex := r.log[i]
		if ex.method == method && ex.path == path && strings.Contains(ex.query, query) {
			return ex
		}
	}
	var seen []string
	for _, ex := range r.log {
		seen = append(seen, ex.method+" "+ex.path+"?"+ex.query)
	}
	t.Fatalf("no %s %s?%s recorded; saw %v", method, path, query, seen)
	return exchange{}
}

func baseType(t *testing.T, ct string) string {
	t.Helper()
	if ct == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		t.Fatalf("media type %q: %v", ct, err)
	}
	return mt
}

// protobufExchange checks that a typed request asked for Protobuf and was answered in it, and
// that its body (if any, and not a patch) was the Protobuf envelope.
func protobufExchange(t *testing.T, what string, ex exchange) {
	t.Helper()
	if ex.accept != apiclient.AcceptContentTypes {
		t.Errorf("%s: Accept %q, want %q", what, ex.accept, apiclient.AcceptContentTypes)
	}
	if got := baseType(t, ex.respContentType); got != naming.UpstreamProtobufMediaType {
		t.Errorf("%s: answered %d in %q, want %s", what, ex.status, ex.respContentType, naming.UpstreamProtobufMediaType)
	}
	if ex.method == http.MethodPatch {
		return
	}
	if ex.bodyPrefix != nil {
		if got := baseType(t, ex.contentType); got != naming.UpstreamProtobufMediaType {
			t.Errorf("%s: request body in %q, want %s", what, ex.contentType, naming.UpstreamProtobufMediaType)
		}
		if !bytes.Equal(ex.bodyPrefix, naming.ProtobufMagic[:]) {
			t.Errorf("%s: request body starts with %q, not the Protobuf envelope prefix", what, ex.bodyPrefix)
		}
	}
}

// TestTypedClientsSpeakProtobuf runs the kinds of typed calls the controllers make against a
// real gateway and checks on the wire that they are Protobuf both ways (patches keep their patch
// content types), including the renamed groups, whose kinds are found by the Protobuf decoder
// under their Platform names; the dynamic and discovery clients stay JSON.
func TestTypedClientsSpeakProtobuf(t *testing.T) {
	env := testenv.Start(t)
	rec := &recorder{}
	cert, key := env.ClientCert("test-protobuf-admin", "system:masters")
	c, err := apiclient.New(&rest.Config{
		Host: env.URL, TLSClientConfig: rest.TLSClientConfig{CAFile: env.CAFile, CertData: cert, KeyData: key},
		QPS: 200, Burst: 400,
		// Whatever the caller set is replaced.
		ContentConfig: rest.ContentConfig{ContentType: "application/json", AcceptContentTypes: "application/json"},
		WrapTransport: rec.wrap,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(env.Context(), time.Minute)
	defer cancel()
	ns := env.Namespace("protobuf")
	cms := c.Kubernetes.CoreV1().ConfigMaps(ns)
	cmPath := "/api/v1/namespaces/" + ns + "/configmaps"

	// A watch, then a create it sees: the event stream is Protobuf and decodes.
	w, err := cms.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	protobufExchange(t, "watch configmaps", rec.find(t, http.MethodGet, cmPath, "watch=true"))
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "one"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	protobufExchange(t, "create configmap", rec.find(t, http.MethodPost, cmPath, ""))
	select {
	case ev := <-w.ResultChan():
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if ev.Type != watch.Added || !ok || cm.Name != "one" || cm.Data["k"] != "v" {
			t.Fatalf("watch event %s %#v, want ADDED of configmap one", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("no watch event")
	}

	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Data["k"] != "v" {
		t.Fatalf("list: %+v", list.Items)
	}
	protobufExchange(t, "list configmaps", rec.find(t, http.MethodGet, cmPath, ""))

	cm := list.Items[0].DeepCopy()
	cm.Data["k"] = "w"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	protobufExchange(t, "update configmap", rec.find(t, http.MethodPut, cmPath+"/one", ""))
	if _, err := cms.Patch(ctx, "one", types.MergePatchType, []byte(`{"data":{"k":"x"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := rec.find(t, http.MethodPatch, cmPath+"/one", "")
	protobufExchange(t, "patch configmap", patch)
	if patch.contentType != string(types.MergePatchType) {
		t.Errorf("patch sent in %q, want %s", patch.contentType, types.MergePatchType)
	}
	if err := cms.Delete(ctx, "one", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	protobufExchange(t, "delete configmap", rec.find(t, http.MethodDelete, cmPath+"/one", ""))

	// A status update (ResourceQuota, as the resource quota controller does).
	rq, err := c.Kubernetes.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rq.Status.Hard = corev1.ResourceList{}
	if _, err := c.Kubernetes.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, rq, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	protobufExchange(t, "update resourcequota status", rec.find(t, http.MethodPut, "/api/v1/namespaces/"+ns+"/resourcequotas/q/status", ""))

	// The renamed groups, through the clientset as the controllers reach them.
	sar, err := c.Kubernetes.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "someone", Groups: []string{"system:masters"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "configmaps", Namespace: ns},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !sar.Status.Allowed {
		t.Errorf("SubjectAccessReview status %+v, want allowed", sar.Status)
	}
	protobufExchange(t, "create subjectaccessreview", rec.find(t, http.MethodPost, "/apis/"+apiclient.AuthorizationGroupVersion.String()+"/subjectaccessreviews", ""))

	leases := c.Kubernetes.CoordinationV1().Leases(ns)
	holder := "me"
	if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	leasePath := "/apis/" + apiclient.CoordinationGroupVersion.String() + "/namespaces/" + ns + "/leases"
	protobufExchange(t, "create lease", rec.find(t, http.MethodPost, leasePath, ""))
	if l, err := leases.Get(ctx, "l", metav1.GetOptions{}); err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != holder {
		t.Fatalf("get lease: %v %+v", err, l)
	}
	protobufExchange(t, "get lease", rec.find(t, http.MethodGet, leasePath+"/l", ""))
	if err := leases.Delete(ctx, "l", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	protobufExchange(t, "delete lease", rec.find(t, http.MethodDelete, leasePath+"/l", ""))

	crName := "protobuf-" + ns
	cfg := rbacv1ac.ClusterRole(crName).WithAPIVersion(apiclient.RBACGroupVersion.String()).
		WithRules(rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("configmaps").WithVerbs("get"))
	if _, err := c.Kubernetes.RbacV1().ClusterRoles().Apply(ctx, cfg, metav1.ApplyOptions{FieldManager: "test", Force: true}); err != nil {
		t.Fatal(err)
	}
	crPath := "/apis/" + apiclient.RBACGroupVersion.String() + "/clusterroles"
	apply := rec.find(t, http.MethodPatch, crPath+"/"+crName, "")
	protobufExchange(t, "apply clusterrole", apply)
	if apply.contentType != string(types.ApplyPatchType) {
		t.Errorf("apply sent in %q, want %s", apply.contentType, types.ApplyPatchType)
	}
	roles, err := c.Kubernetes.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	protobufExchange(t, "list clusterroles", rec.find(t, http.MethodGet, crPath, ""))
	found := false
	for _, r := range roles.Items {
		found = found || (r.Name == crName && len(r.Rules) == 1 && r.Rules[0].Verbs[0] == "get")
	}
	if !found {
		t.Errorf("clusterrole %s not listed with its rule", crName)
	}
	if err := c.RBAC.ClusterRoles().Delete(ctx, crName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	protobufExchange(t, "delete clusterrole", rec.find(t, http.MethodDelete, crPath+"/"+crName, ""))

	if _, err := c.Kubernetes.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	protobufExchange(t, "list certificatesigningrequests", rec.find(t, http.MethodGet, "/apis/"+apiclient.CertificatesGroupVersion.String()+"/certificatesigningrequests", ""))

	// An informer of a renamed kind (list, then watch) syncs over Protobuf.
	f := informers.NewSharedInformerFactoryWithOptions(c.Kubernetes, 0, informers.WithNamespace(ns))
	inf := f.Rbac().V1().Roles().Informer()
	if _, err := c.RBAC.Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	f.Start(stop)
	defer f.Shutdown()
	defer close(stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("roles informer did not sync")
	}
	rolePath := "/apis/" + apiclient.RBACGroupVersion.String() + "/namespaces/" + ns + "/roles"
	protobufExchange(t, "informer list roles", rec.find(t, http.MethodGet, rolePath, ""))
	if _, ok, _ := inf.GetStore().GetByKey(ns + "/r"); !ok {
		t.Errorf("the roles informer did not cache %s/r", ns)
	}
	testenv.Eventually(t, 10*time.Second, "the roles informer's watch", func() (bool, string) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, ex := range rec.log {
			if ex.path == rolePath && strings.Contains(ex.query, "watch=true") {
				return true, ""
			}
		}
		return false, "no watch of roles yet"
	})
	protobufExchange(t, "informer watch roles", rec.find(t, http.MethodGet, rolePath, "watch=true"))

	// The dynamic client and discovery stay JSON.
	if _, err := c.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := rec.find(t, http.MethodGet, cmPath, "")
	if dyn.accept != apiclient.JSONContentType || baseType(t, dyn.respContentType) != apiclient.JSONContentType {
		t.Errorf("dynamic list: Accept %q, answered in %q; want JSON", dyn.accept, dyn.respContentType)
	}
	if _, err := c.Discovery.ServerResourcesForGroupVersion("v1"); err != nil {
		t.Fatal(err)
	}
	disc := rec.find(t, http.MethodGet, "/api/v1", "")
	if baseType(t, disc.respContentType) != apiclient.JSONContentType {
		t.Errorf("discovery: Accept %q, answered in %q; want JSON", disc.accept, disc.respContentType)
	}
}
