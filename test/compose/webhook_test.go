package compose

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"platform.io/libs/pki"
)

// webhookDenial is the start of test/compose/webhookserver's message for a denied object.
const webhookDenial = "compose-webhook says no"

// checkWebhook runs a real HTTPS validating webhook (test/compose/webhookserver, a static binary
// mounted into the platform image) as a container on the stack's network under the name
// `webhook`, with a serving certificate of a CA of its own, registers it through the API with
// that CA as caBundle for ConfigMaps carrying the compose-webhook label, and checks that the
// admission container calls it: an object labelled deny is refused with the webhook's message
// (create and update), one labelled allow is stored, and the webhook logged both reviews.
func checkWebhook(t *testing.T, p *project, cfg *rest.Config) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The server: built for the image's platform (static), readable by the image's user 65532.
	dir := filepath.Join(t.TempDir(), "hook")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(dir, "webhook"), "./test/compose/webhookserver")
	build.Dir = p.root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./test/compose/webhookserver: %v\n%s", err, out)
	}
	ca, err := pki.NewCA("compose-webhook-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServing("webhook", []string{"webhook"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	container := p.name + "-webhook"
	mustDocker(t, time.Minute, "run", "-d", "--name", container, "--network", p.name+"_platform", "--network-alias", "webhook",
		"--user", "65532:65532", "-v", dir+":/hook:ro", "--entrypoint", "/hook/webhook", "platform/platform:"+imageTag,
		"--listen=:8443", "--cert-file=/hook/tls.crt", "--key-file=/hook/tls.key")
	t.Cleanup(func() { _, _, _ = docker(time.Minute, "rm", "-f", container) })

	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := "compose-webhook-" + randomSuffix(t)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) }()
	hooks := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	config := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "compose.webhook.test.platform.io",
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
			// Only this check's objects: the label, in this check's namespace.
			ObjectSelector:          &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "compose-webhook", Operator: metav1.LabelSelectorOpExists}}},
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://webhook:8443/validate"), CABundle: ca.CertPEM},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To(int32(5)),
		}},
	}
	if _, err := hooks.Create(ctx, config, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the ValidatingWebhookConfiguration: %v", err)
	}
	defer func() { _ = hooks.Delete(context.Background(), ns, metav1.DeleteOptions{}) }()

	cms := kube.CoreV1().ConfigMaps(ns)
	labelled := func(name, verdict string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"compose-webhook": verdict}}, Data: map[string]string{"k": "v"}}
	}
	// The admission service sees the configuration through its watch, and the container needs a
	// moment to listen: until the webhook's own denial comes back, try again with a new name
	// (bounded). Anything stored meanwhile was created before the webhook took effect.
	var denied string
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for i := 0; denied == ""; i++ {
		name := fmt.Sprintf("denied-%d", i)
		_, err := cms.Create(ctx, labelled(name, "deny"), metav1.CreateOptions{})
		switch {
		case err != nil && strings.Contains(err.Error(), webhookDenial):
			if !apierrors.IsForbidden(err) {
				t.Errorf("the webhook's denial: %v, want 403 Forbidden", err)
			}
			denied = name
		case time.Now().After(deadline):
			t.Fatalf("the webhook did not deny within 60s; last answer: %v", err)
		default:
			last = err
			time.Sleep(200 * time.Millisecond)
		}
	}
	if last != nil {
		t.Logf("before the webhook took effect: %v", last)
	}
	if _, err := cms.Get(ctx, denied, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the denied ConfigMap %s: %v, want NotFound", denied, err)
	}
	allowed, err := cms.Create(ctx, labelled("allowed", "allow"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a ConfigMap the webhook allows: %v", err)
	}
	// An update the webhook denies leaves the stored object as it was.
	allowed.Labels["compose-webhook"] = "deny"
	allowed.Data["k"] = "changed"
	if _, err := cms.Update(ctx, allowed, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), webhookDenial) {
		t.Errorf("an update the webhook denies: %v, want its denial", err)
	}
	if got, err := cms.Get(ctx, "allowed", metav1.GetOptions{}); err != nil || got.Data["k"] != "v" {
		t.Errorf("after the denied update: %v, data %v; want k=v", err, got.Data)
	}

	// The webhook saw each review (its log, one line per call).
	logs := mustDocker(t, 30*time.Second, "logs", container)
	for _, want := range []string{
		"review CREATE " + ns + "/" + denied + " denied",
		"review CREATE " + ns + "/allowed allowed",
		"review UPDATE " + ns + "/allowed denied",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the webhook's log lacks %q:\n%s", want, logs)
		}
	}
}
