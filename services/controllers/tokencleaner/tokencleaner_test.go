package tokencleaner_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
	"platform.io/services/controllers/bootstraptoken"
	"platform.io/services/controllers/internal/testenv"
	"platform.io/services/controllers/metrics"
	"platform.io/services/controllers/tokencleaner"
)

const bound = 20 * time.Second

func bootstrapToken(namespace, id, expiration string) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: bootstraptoken.SecretPrefix + id, Namespace: namespace},
		Type:       corev1.SecretType(naming.SecretTypeBootstrapToken),
		Data: map[string][]byte{
			bootstraptoken.IDKey: []byte(id), bootstraptoken.SecretKey: []byte("0123456789abcdef"),
			"usage-bootstrap-authentication": []byte("true"),
		},
	}
	if expiration != "" {
		s.Data[bootstraptoken.ExpirationKey] = []byte(expiration)
	}
	return s
}

// The controller sees every Secret here (an informer of all namespaces, not the manager's
// selection), so its own filter is what keeps other Secrets safe.
func TestTokenCleaner(t *testing.T) {
	env := testenv.Start(t)
	m := metrics.New(prometheus.NewRegistry())
	f := env.Informers()
	c, err := tokencleaner.New(env.Clients.Kubernetes, f.Core().V1().Secrets(), tokencleaner.Options{Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	env.Run(func(ctx context.Context) { c.Run(ctx, 1) }, f)
	ctx := context.Background()
	create := func(s *corev1.Secret) {
		t.Helper()
		if _, err := env.Admin.Kubernetes.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(ns, name string) func() (bool, string) {
		return func() (bool, string) {
			_, err := env.Admin.Kubernetes.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), testenv.Short(err)
		}
	}
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	soon := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339)
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)

	// Kept: no expiration, a later one, an expired token of another namespace, an expired
	// Secret of another type.
	create(bootstrapToken(naming.SystemNamespace, "forevr", ""))
	create(bootstrapToken(naming.SystemNamespace, "later1", later))
	create(bootstrapToken(metav1.NamespaceDefault, "elsewh", past))
	opaque := bootstrapToken(naming.SystemNamespace, "opaque", past)
	opaque.Type = corev1.SecretTypeOpaque
	create(opaque)

	// Spec rule: expired tokens are deleted.
	create(bootstrapToken(naming.SystemNamespace, "expird", past))
	testenv.Eventually(t, bound, "an expired token deleted", gone(naming.SystemNamespace, "bootstrap-token-expird"))
	// Upstream rule: an expiration that cannot be parsed counts as passed.
	create(bootstrapToken(naming.SystemNamespace, "badexp", "next tuesday"))
	testenv.Eventually(t, bound, "a token with a malformed expiration deleted", gone(naming.SystemNamespace, "bootstrap-token-badexp"))
	// Upstream rule: a token is looked at again when it expires.
	create(bootstrapToken(naming.SystemNamespace, "soon01", soon))
	testenv.Eventually(t, bound, "a token deleted when it expires", gone(naming.SystemNamespace, "bootstrap-token-soon01"))

	for _, k := range []struct{ ns, name string }{
		{naming.SystemNamespace, "bootstrap-token-forevr"},
		{naming.SystemNamespace, "bootstrap-token-later1"},
		{metav1.NamespaceDefault, "bootstrap-token-elsewh"},
		{naming.SystemNamespace, "bootstrap-token-opaque"},
	} {
		if _, err := env.Admin.Kubernetes.CoreV1().Secrets(k.ns).Get(ctx, k.name, metav1.GetOptions{}); err != nil {
			t.Errorf("%s/%s should be kept: %v", k.ns, k.name, err)
		}
	}
	if testutil.ToFloat64(m.Errors.WithLabelValues(tokencleaner.Name)) != 0 {
		t.Errorf("sync errors counted")
	}
}
