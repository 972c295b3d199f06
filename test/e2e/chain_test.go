package e2e

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"

	"platform.io/libs/naming"
	"platform.io/test/stack"
)

// rawDo sends one request and returns its code and body.
func rawDo(t *testing.T, c *http.Client, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// anonymousClient presents no credentials; bearerTokenClient presents token.
func anonymousClient(s *stack.Stack) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool(s), MinVersion: tls.VersionTLS12}}, Timeout: 30 * time.Second}
}

// The handler chain wraps every path (access control before routing), as upstream's: a path
// nothing serves is 403 to the anonymous user and to a user without grants, 404 only to someone
// allowed to ask; a presented credential that fails is 401 on every path, health included, while
// requests without credentials read health as system:anonymous (system:public-info-viewer).
func TestEveryPathIsAuthorizedFirst(t *testing.T) {
	s := useShared(t)
	anon := anonymousClient(s)
	bad := bearerClient(s, "not-a-valid-token")
	nobody, err := s.HTTPClient("e2e-nobody")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := s.HTTPClient("e2e-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/livez", "/readyz", "/healthz"} {
		if code, body := rawDo(t, anon, "GET", s.URL+p); code != http.StatusOK || body != "ok" {
			t.Errorf("anonymous GET %s: %d %q", p, code, body)
		}
		if code, body := rawDo(t, bad, "GET", s.URL+p); code != http.StatusUnauthorized || !strings.Contains(body, `"reason":"Unauthorized"`) {
			t.Errorf("GET %s with an invalid bearer token: %d %q, want 401", p, code, body)
		}
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/some-unknown-path"}, {"POST", "/other-path"}, {"GET", "/apis/nosuch.example.com/v1/things"},
	} {
		for name, client := range map[string]*http.Client{"anonymous": anon, "a user without grants": nobody} {
			if code, body := rawDo(t, client, c.method, s.URL+c.path); code != http.StatusForbidden || !strings.Contains(body, `"reason":"Forbidden"`) {
				t.Errorf("%s %s as %s: %d %s, want 403", c.method, c.path, name, code, body)
			}
		}
		if code, body := rawDo(t, bad, c.method, s.URL+c.path); code != http.StatusUnauthorized {
			t.Errorf("%s %s with an invalid bearer token: %d %s, want 401", c.method, c.path, code, body)
		}
		if code, body := rawDo(t, admin, c.method, s.URL+c.path); code != http.StatusNotFound {
			t.Errorf("%s %s as an admin: %d %s, want 404", c.method, c.path, code, body)
		}
	}
	// TokenReview is served in v1 only (upstream stopped serving v1beta1 in 1.22); v1beta1 keeps
	// SelfSubjectReview.
	v1beta1 := s.URL + "/apis/" + naming.Group("authentication.k8s.io") + "/v1beta1"
	if code, body := rawDo(t, admin, "POST", v1beta1+"/tokenreviews"); code != http.StatusNotFound {
		t.Errorf("POST v1beta1 tokenreviews: %d %s, want 404", code, body)
	}
	if code, body := rawDo(t, admin, "GET", v1beta1); code != http.StatusOK || strings.Contains(body, `"tokenreviews"`) || !strings.Contains(body, `"selfsubjectreviews"`) {
		t.Errorf("v1beta1 discovery: %d %s", code, body)
	}
}

// A write that creates is authorized as a create, as upstream's: a user granted get, patch and
// update on ConfigMaps (but not create) cannot create one with server-side apply or with a PUT
// of a missing object (dry-run or not), yet applies to an existing one; granted create, the apply
// creates it.
func TestApplyThatCreatesNeedsCreate(t *testing.T) {
	s := useShared(t)
	ctx := ctxFor(t, 2*time.Minute)
	ns := createNamespace(t, dynamicClient(t, s), "e2e-applycreate-")
	admin, err := kubernetes.NewForConfig(restConfig(t, s, "e2e-admin"))
	if err != nil {
		t.Fatal(err)
	}
	grant := func(name string, verbs ...string) {
		t.Helper()
		if _, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{{Verbs: verbs, APIGroups: []string{""}, Resources: []string{"configmaps"}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "e2e-patcher"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	grant("patcher", "get", "patch", "update")
	patcher, err := kubernetes.NewForConfig(restConfig(t, s, "e2e-patcher", "e2e-patchers"))
	if err != nil {
		t.Fatal(err)
	}
	cms := patcher.CoreV1().ConfigMaps(ns)
	apply := func(name string, dryRun bool) error {
		opts := metav1.ApplyOptions{FieldManager: "e2e-patcher"}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err := cms.Apply(ctx, corev1ac.ConfigMap(name, ns).WithData(map[string]string{"a": "1"}), opts)
		return err
	}
	// The grant is in force once the patcher may read.
	stack.Eventually(t, 10*time.Second, "the patcher's grant", func() error {
		if _, err := cms.Get(ctx, "none", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
	for _, dry := range []bool{true, false} {
		err := apply("applied", dry)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `cannot create resource "configmaps"`) {
			t.Errorf("an apply that creates (dry-run %v) without create: %v, want 403 naming create", dry, err)
		}
		put := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "put"}, Data: map[string]string{"a": "1"}}
		opts := metav1.UpdateOptions{}
		if dry {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		if _, err := cms.Update(ctx, put, opts); !apierrors.IsForbidden(err) {
			t.Errorf("a PUT that creates (dry-run %v) without create: %v, want 403", dry, err)
		}
	}
	for _, name := range []string{"applied", "put"} {
		if _, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s after refused creates: %v, want NotFound", name, err)
		}
	}
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "existing"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := apply("existing", false); err != nil {
		t.Errorf("an apply to an existing object with patch granted: %v", err)
	}
	grant("creator", "create")
	stack.Eventually(t, 10*time.Second, "an apply that creates once create is granted", func() error { return apply("applied", false) })
	if got, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, "applied", metav1.GetOptions{}); err != nil || got.Data["a"] != "1" {
		t.Errorf("the applied ConfigMap: %v %v", got, err)
	}
}
