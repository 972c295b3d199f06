package e2e

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"platform.io/libs/naming"
)

// platformProtobuf is the binary media type of the spec (upstream's is
// application/vnd.kubernetes.protobuf, the same in the kubernetes naming profile).
var platformProtobuf = naming.ProtobufMediaType

// platformCodecs is client-go's codec factory with its Protobuf serializer relabelled as the
// platform media type: the envelope (0x6b 0x38 0x73 0x00, then runtime.Unknown) is the same.
type platformCodecs struct {
	runtime.NegotiatedSerializer
}

func (c platformCodecs) SupportedMediaTypes() []runtime.SerializerInfo {
	var out []runtime.SerializerInfo
	for _, info := range c.NegotiatedSerializer.SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeProtobuf {
			info.MediaType = platformProtobuf
			info.MediaTypeType, info.MediaTypeSubType, _ = strings.Cut(platformProtobuf, "/")
		}
		out = append(out, info)
	}
	return out
}

// exchange is one request the recorder saw.
type exchange struct {
	method, path, query       string
	requestType, responseType string
	status                    int
	bodyPrefix                []byte // the response body's first bytes
}

// recorder is a RoundTripper that records the content types of every exchange.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	log  []*exchange
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	ex := &exchange{method: req.Method, path: req.URL.Path, query: req.URL.RawQuery, requestType: req.Header.Get("Content-Type"),
		responseType: resp.Header.Get("Content-Type"), status: resp.StatusCode}
	r.mu.Lock()
	r.log = append(r.log, ex)
	r.mu.Unlock()
	resp.Body = &prefixRecorder{ReadCloser: resp.Body, ex: ex, mu: &r.mu}
	return resp, nil
}

// last is the latest exchange for method (with "watch" in the query when watch is set).
func (r *recorder) last(t *testing.T, method string, watch bool) exchange {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.log) - 1; i >= 0; i-- {
		if ex := r.log[i]; ex.method == method && strings.Contains(ex.query, "watch=") == watch {
			return *ex
		}
	}
	t.Fatalf("no %s request recorded", method)
	return exchange{}
}

// prefixRecorder keeps the first four bytes read from a body.
type prefixRecorder struct {
	io.ReadCloser
	ex *exchange
	mu *sync.Mutex
}

func (p *prefixRecorder) Read(b []byte) (int, error) {
	n, err := p.ReadCloser.Read(b)
	p.mu.Lock()
	if k := 4 - len(p.ex.bodyPrefix); k > 0 && n > 0 {
		p.ex.bodyPrefix = append(p.ex.bodyPrefix, b[:min(k, n)]...)
	}
	p.mu.Unlock()
	return n, err
}

// Spec 000 "Content negotiation" (Binary) and "Binary (Protobuf) envelope": client-go's typed
// CoreV1 client over a REST client that sends and accepts application/vnd.platform.protobuf
// creates, gets, updates, lists and deletes ConfigMaps; every response is Protobuf (Content-Type
// and the 0x6b 0x38 0x73 0x00 prefix). Errors still decode (404 NotFound), and a watch of a client
// that prefers Protobuf with a JSON fallback works.
func TestProtobufClient(t *testing.T) {
	s := useShared(t)
	ns := createNamespace(t, dynamicClient(t, s), "e2e-protobuf-")
	ctx := ctxFor(t, 60*time.Second)

	rec := &recorder{}
	cfg := restConfig(t, s, "e2e-protobuf")
	cfg.APIPath = "/api"
	cfg.GroupVersion = &corev1.SchemeGroupVersion
	cfg.ContentType = platformProtobuf
	cfg.AcceptContentTypes = platformProtobuf
	cfg.NegotiatedSerializer = platformCodecs{scheme.Codecs.WithoutConversion()}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec }
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	core := corev1client.New(rc)
	cms := core.ConfigMaps(ns)

	checkProtobuf := func(what, method string, wantBody bool) {
		t.Helper()
		ex := rec.last(t, method, false)
		if ex.responseType != platformProtobuf {
			t.Errorf("%s: response Content-Type %q, want %s", what, ex.responseType, platformProtobuf)
		}
		if wantBody && ex.requestType != platformProtobuf {
			t.Errorf("%s: request Content-Type %q, want %s", what, ex.requestType, platformProtobuf)
		}
		if !bytes.Equal(ex.bodyPrefix, []byte{0x6b, 0x38, 0x73, 0x00}) {
			t.Errorf("%s: response starts with % x, want 6b 38 73 00", what, ex.bodyPrefix)
		}
	}

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "binary", Labels: map[string]string{"enc": "proto"}},
		Data:       map[string]string{"text": "hello"},
		BinaryData: map[string][]byte{"raw": {0, 1, 2, 0xff}},
	}
	created, err := cms.Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkProtobuf("create", "POST", true)
	if created.UID == "" || created.ResourceVersion == "" || created.Data["text"] != "hello" || !bytes.Equal(created.BinaryData["raw"], []byte{0, 1, 2, 0xff}) {
		t.Errorf("created %+v", created)
	}

	got, err := cms.Get(ctx, "binary", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkProtobuf("get", "GET", false)
	if got.UID != created.UID || got.ResourceVersion != created.ResourceVersion || got.Labels["enc"] != "proto" {
		t.Errorf("got %+v", got)
	}

	got.Data["text"] = "world"
	updated, err := cms.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkProtobuf("update", "PUT", true)
	if updated.Data["text"] != "world" || updated.ResourceVersion == got.ResourceVersion {
		t.Errorf("updated %+v", updated)
	}

	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "second"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkProtobuf("list", "GET", false)
	if len(list.Items) != 2 || list.ResourceVersion == "" || list.Items[0].Name != "binary" || list.Items[0].Data["text"] != "world" {
		t.Errorf("list %+v", list)
	}

	if _, err := cms.Get(ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get of a missing object: %v, want NotFound", err)
	}

	// client-go sends the DeleteOptions body in the client's content type (Protobuf here).
	if err := cms.Delete(ctx, "binary", metav1.DeleteOptions{}); err != nil {
		ex := rec.last(t, "DELETE", false)
		t.Errorf("delete with a Protobuf DeleteOptions body (Content-Type %q): %v", ex.requestType, err)
		// Go on with a JSON body.
		if err := dynamicClient(t, s).Resource(configMapsGVR).Namespace(ns).Delete(ctx, "binary", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cms.Get(ctx, "binary", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after delete: %v, want NotFound", err)
	}

	// Watch, the way upstream's own components ask: Protobuf preferred, JSON accepted.
	wcfg := rest.CopyConfig(cfg)
	wcfg.AcceptContentTypes = platformProtobuf + ", application/json"
	wrc, err := rest.RESTClientFor(wcfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := corev1client.New(wrc).ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "watched"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var seen []string
	timeout := time.After(10 * time.Second)
	for len(seen) == 0 || seen[len(seen)-1] != "ADDED watched" {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch ended after %v", seen)
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch error: %v", apierrors.FromObject(ev.Object))
			}
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
				seen = append(seen, string(ev.Type)+" "+cm.Name)
			}
		case <-timeout:
			t.Fatalf("no ADDED event for the new ConfigMap in 10s; saw %v", seen)
		}
	}
	if got := strings.Join(seen, ", "); got != "DELETED binary, ADDED watched" {
		t.Errorf("watch events %s, want DELETED binary, ADDED watched", got)
	}
	t.Logf("a watch accepting %q is answered with %q", wcfg.AcceptContentTypes, rec.last(t, "GET", true).responseType)
}

// Spec README ("match what kubectl and client-go expect"): client-go's generated clientset with
// its default configuration, which since v0.32 sends built-in types as upstream's Protobuf
// (Content-Type application/vnd.kubernetes.protobuf, Accept
// application/vnd.kubernetes.protobuf,application/json), creates, gets, updates, lists, watches
// and deletes ConfigMaps and Deployments.
func TestDefaultClientset(t *testing.T) {
	s := useShared(t)
	ns := createNamespace(t, dynamicClient(t, s), "e2e-clientset-")
	ctx := ctxFor(t, 60*time.Second)
	rec := &recorder{}
	cfg := restConfig(t, s, "e2e-clientset")
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec }
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cms := cs.CoreV1().ConfigMaps(ns)
	created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "typed"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ex := rec.last(t, "POST", false)
	t.Logf("create: request %q, response %q", ex.requestType, ex.responseType)
	created.Data["k"] = "w"
	if _, err := cms.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := cms.Get(ctx, "typed", metav1.GetOptions{})
	if err != nil || got.Data["k"] != "w" {
		t.Fatalf("get: %v %+v", err, got)
	}
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list: %v %+v", err, list)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	deps := cs.AppsV1().Deployments(ns)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "typed"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "typed"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "typed"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
	if _, err := deps.Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if d, err := deps.Get(ctx, "typed", metav1.GetOptions{}); err != nil || *d.Spec.Replicas != 1 {
		t.Fatalf("get deployment: %v", err)
	}
	if err := deps.Delete(ctx, "typed", metav1.DeleteOptions{}); err != nil {
		ex := rec.last(t, "DELETE", false)
		t.Errorf("delete with the clientset's DeleteOptions body (Content-Type %q): %v", ex.requestType, err)
	}
	if err := cms.Delete(ctx, "typed", metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete of a ConfigMap with the clientset: %v", err)
		if err := dynamicClient(t, s).Resource(configMapsGVR).Namespace(ns).Delete(ctx, "typed", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended")
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch error: %v", apierrors.FromObject(ev.Object))
			}
			if ev.Type == watch.Deleted {
				return
			}
		case <-timeout:
			t.Fatal("no DELETED event in 10s")
		}
	}
}
