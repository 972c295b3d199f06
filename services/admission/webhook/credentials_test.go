package webhook

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/admission/admissiontest"
)

// The plugins' configuration: WebhookAdmissionConfiguration in apiserver.config.platform.io/v1,
// the deprecated v1alpha1, upstream's group names, an absolute kubeConfigFile.
func TestParseConfig(t *testing.T) {
	v1 := naming.Group("apiserver.config.k8s.io") + "/v1"
	for _, tc := range []struct {
		name, config, wantFile, wantErr string
		deprecated                      bool
	}{
		{"absent", "", "", "", false},
		{"v1", `{"apiVersion":"` + v1 + `","kind":"WebhookAdmissionConfiguration","kubeConfigFile":"/etc/kc"}`, "/etc/kc", "", false},
		{"upstream's group name", `{"apiVersion":"apiserver.config.k8s.io/v1","kind":"WebhookAdmissionConfiguration","kubeConfigFile":"/etc/kc"}`, "/etc/kc", "", false},
		{"kind WebhookAdmission", `{"apiVersion":"` + v1 + `","kind":"WebhookAdmission"}`, "", "", false},
		{"deprecated v1alpha1", `{"apiVersion":"apiserver.k8s.io/v1alpha1","kind":"WebhookAdmission","kubeConfigFile":"/kc"}`, "/kc", "", true},
		{"relative kubeConfigFile", `{"apiVersion":"` + v1 + `","kind":"WebhookAdmissionConfiguration","kubeConfigFile":"kc"}`, "", "must be an absolute file path", false},
		{"wrong kind", `{"apiVersion":"` + v1 + `","kind":"AdmissionConfiguration"}`, "", "kind must be WebhookAdmissionConfiguration", false},
		{"wrong version", `{"apiVersion":"` + naming.Group("apiserver.config.k8s.io") + `/v2","kind":"WebhookAdmissionConfiguration"}`, "", "apiVersion must be", false},
		{"not JSON", `{`, "", "reading the plugin configuration", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file, deprecated, err := parseConfig([]byte(tc.config))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || file != tc.wantFile || deprecated != tc.deprecated {
				t.Fatalf("got %q %v %v", file, deprecated, err)
			}
		})
	}
	// A factory refuses a bad configuration, naming the plugin.
	reg := admission.NewRegistry()
	Register(reg)
	f, _ := reg.Factory(admission.ValidatingAdmissionWebhook)
	if _, err := f(admissiontest.Deps(&admissiontest.Objects{}, nil), []byte(`{"kind":"x"}`)); err == nil || !strings.Contains(err.Error(), admission.ValidatingAdmissionWebhook) {
		t.Errorf("bad configuration: %v", err)
	}
}

// The spec's credential matching: exact name, "*." wildcard segments (longest suffix first),
// the same without :443, "*" as default, then the current context's user.
func TestCredentialLookup(t *testing.T) {
	c := &credentials{users: map[string]*credential{
		"hook.ns.svc:8443":    {token: "svc-8443"},
		"hook.ns.svc":         {token: "svc-443"},
		"*.ns.svc":            {token: "wild-ns"},
		"*.svc":               {token: "wild-svc"},
		"example.com:9443":    {token: "url-port"},
		"*.webhooks.example":  {token: "wild-url"},
		"*":                   {token: "default"},
		"current-context-usr": {token: "current"},
	}, currentUser: "current-context-usr"}
	for _, tc := range []struct{ target, want string }{
		{"hook.ns.svc:8443", "svc-8443"},
		{"hook.ns.svc:443", "svc-443"},
		{"other.ns.svc:443", "wild-ns"},
		{"other.other.svc:443", "wild-svc"},
		{"other.ns.svc:8443", "default"}, // "*.ns.svc" names port 443 only
		{"example.com:9443", "url-port"},
		{"a.webhooks.example:443", "wild-url"},
		{"unknown.example:443", "default"},
	} {
		got := c.lookup(tc.target)
		if got == nil || got.token != tc.want {
			t.Errorf("lookup(%s) = %+v, want %s", tc.target, got, tc.want)
		}
	}
	noDefault := &credentials{users: map[string]*credential{"x": {token: "x"}}, currentUser: "x"}
	if got := noDefault.lookup("y:443"); got == nil || got.token != "x" {
		t.Errorf("the current context's user is the last resort: %+v", got)
	}
	if got := (&credentials{users: map[string]*credential{"x": {}}}).lookup("y:443"); got != nil {
		t.Errorf("no match: %+v, want none", got)
	}
}

func writeKubeconfig(t *testing.T, users map[string]map[string]any) string {
	t.Helper()
	var list []map[string]any
	for name, u := range users {
		list = append(list, map[string]any{"name": name, "user": u})
	}
	data, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "Config", "users": list})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func webhookConfig(path string) []byte {
	return []byte(fmt.Sprintf(`{"apiVersion":"%s/v1","kind":"WebhookAdmissionConfiguration","kubeConfigFile":%q}`, naming.Group("apiserver.config.k8s.io"), path))
}

// kubeConfigFile credentials: a webhook that requires a client certificate gets the one the
// kubeconfig names for its host; a token and basic credentials reach the webhook as headers.
func TestKubeconfigCredentials(t *testing.T) {
	ca, _ := cas(t)
	certPEM, keyPEM, err := ca.IssueClient("apiserver", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	mtls := newHookServer(t, []string{"127.0.0.1"}, allow, requireClientCert(ca))
	svcHook := newHookServer(t, []string{"hooks.webhooks.svc"}, allow)
	hostPort := strings.TrimPrefix(mtls.URL, "https://")

	t.Run("no credentials: the handshake fails", func(t *testing.T) {
		e := newEnv(t)
		e.addValidating("cfg", hookSpec{name: "mtls.example.com", url: mtls.url()})
		if err := e.run(createPod(newPod("p", nil))); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("client certificate for host:port (files)", func(t *testing.T) {
		e := newEnv(t)
		e.config = webhookConfig(writeKubeconfig(t, map[string]map[string]any{hostPort: {"client-certificate": certFile, "client-key": keyFile}}))
		e.addValidating("cfg", hookSpec{name: "mtls.example.com", url: mtls.url()})
		before := mtls.calls.Load()
		if err := e.run(createPod(newPod("p", nil))); err != nil || mtls.calls.Load() != before+1 {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("client certificate as data under *", func(t *testing.T) {
		e := newEnv(t)
		e.config = webhookConfig(writeKubeconfig(t, map[string]map[string]any{"*": {"client-certificate-data": certPEM, "client-key-data": keyPEM}}))
		e.addMutating("cfg", hookSpec{name: "mtls.example.com", url: mtls.url()})
		if err := e.run(createPod(newPod("p", nil))); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("token for a service webhook by <service>.<namespace>.svc:<port>", func(t *testing.T) {
		e := newEnv(t)
		e.config = webhookConfig(writeKubeconfig(t, map[string]map[string]any{
			fmt.Sprintf("hooks.webhooks.svc:%d", svcHook.port()): {"token": "s3cret"},
			"*": {"username": "u", "password": "p"},
		}))
		svc := &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "127.0.0.1", Ports: []corev1.ServicePort{{Port: svcHook.port()}}}}
		svc.Name, svc.Namespace = "hooks", "webhooks"
		e.objects.ServiceList.Add(svc)
		e.addValidating("cfg", hookSpec{name: "svc.example.com", service: &admissionregistrationv1.ServiceReference{Namespace: "webhooks", Name: "hooks", Port: ptr(svcHook.port())}})
		if err := e.run(createPod(newPod("p", nil))); err != nil {
			t.Fatal(err)
		}
		svcHook.mu.Lock()
		defer svcHook.mu.Unlock()
		if got := svcHook.headers[len(svcHook.headers)-1].Get("Authorization"); got != "Bearer s3cret" {
			t.Errorf("Authorization = %q, want the service's token", got)
		}
	})
	t.Run("basic auth", func(t *testing.T) {
		basic := newRawServer(t, []string{"127.0.0.1"}, func(w http.ResponseWriter, review *admissionv1.AdmissionReview) {
			w.WriteHeader(http.StatusUnauthorized)
		})
		e := newEnv(t)
		e.config = webhookConfig(writeKubeconfig(t, map[string]map[string]any{"*": {"username": "u", "password": "p"}}))
		e.addValidating("cfg", hookSpec{name: "basic.example.com", url: basic.url(), failure: admissionregistrationv1.Ignore})
		if err := e.run(createPod(newPod("p", nil))); err != nil {
			t.Fatal(err)
		}
		basic.mu.Lock()
		defer basic.mu.Unlock()
		r := &http.Request{Header: basic.headers[0]}
		if u, p, ok := r.BasicAuth(); !ok || u != "u" || p != "p" {
			t.Errorf("basic auth = %q %q %v", u, p, ok)
		}
	})
	t.Run("bad kubeconfig refuses to start", func(t *testing.T) {
		for _, users := range []map[string]map[string]any{
			{"x": {"client-certificate": filepath.Join(dir, "missing.crt"), "client-key": keyFile}},
			{"x": {"exec": map[string]any{"command": "foo"}}},
			{"x": {"auth-provider": map[string]any{"name": "gcp"}}},
		} {
			reg := admission.NewRegistry()
			Register(reg)
			f, _ := reg.Factory(admission.MutatingAdmissionWebhook)
			if _, err := f(admissiontest.Deps(&admissiontest.Objects{}, nil), webhookConfig(writeKubeconfig(t, users))); err == nil {
				t.Errorf("kubeconfig %v accepted", users)
			}
		}
	})
}
