package serviceaccounttoken_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"

	"platform.io/libs/naming"
	"platform.io/services/controllers/internal/testenv"
	"platform.io/services/controllers/metrics"
	"platform.io/services/controllers/serviceaccounttoken"
)

const bound = 20 * time.Second

// signer is the test's token generator: real RS256 JWTs with the legacy claims, signed with a
// fresh RSA key (the issuer of libs/serviceaccount does the same in production).
type signer struct {
	key  *rsa.PrivateKey
	sign jose.Signer
}

func newSigner(t *testing.T) *signer {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	return &signer{key: key, sign: s}
}

func (s *signer) GenerateToken(sa *corev1.ServiceAccount, secret *corev1.Secret) (string, error) {
	p := naming.LegacyServiceAccountClaimPrefix
	claims, err := json.Marshal(map[string]string{
		"iss":                      naming.LegacyServiceAccountIssuer,
		"sub":                      "system:serviceaccount:" + sa.Namespace + ":" + sa.Name,
		p + "namespace":            sa.Namespace,
		p + "secret.name":          secret.Name,
		p + "service-account.name": sa.Name,
		p + "service-account.uid":  string(sa.UID),
	})
	if err != nil {
		return "", err
	}
	jws, err := s.sign.Sign(claims)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// verify checks a token's RS256 signature with the public key and returns its claims.
func (s *signer) verify(token string) (map[string]string, error) {
	jws, err := jose.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		return nil, err
	}
	payload, err := jws.Verify(&s.key.PublicKey)
	if err != nil {
		return nil, err
	}
	claims := map[string]string{}
	return claims, json.Unmarshal(payload, &claims)
}

type fixture struct {
	env     *testenv.Env
	signer  *signer
	rootCA  []byte
	metrics *metrics.Metrics
}

// start runs the controller with informers set up as the manager sets them up (token Secrets
// selected by type).
func start(t *testing.T) *fixture {
	env := testenv.Start(t)
	ca, err := os.ReadFile(env.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{env: env, signer: newSigner(t), rootCA: ca, metrics: metrics.New(prometheus.NewRegistry())}
	shared := env.Informers()
	tokens := informers.NewSharedInformerFactoryWithOptions(env.Clients.Kubernetes, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("type", naming.SecretTypeServiceAccountToken).String()
	}))
	c, err := serviceaccounttoken.New(env.Clients.Kubernetes, shared.Core().V1().ServiceAccounts(), tokens.Core().V1().Secrets(),
		serviceaccounttoken.Options{Generator: fx.signer, RootCA: ca, Metrics: fx.metrics})
	if err != nil {
		t.Fatal(err)
	}
	env.Run(func(ctx context.Context) { c.Run(ctx, 2) }, shared, tokens)
	return fx
}

func tokenSecret(name, account string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{naming.ServiceAccountNameAnnotation: account}},
		Type:       corev1.SecretType(naming.SecretTypeServiceAccountToken),
	}
}

func (fx *fixture) gone(ns, name string) func() (bool, string) {
	return func() (bool, string) {
		_, err := fx.env.Admin.Kubernetes.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", testenv.Short(err))
	}
}

// Upstream rule: a token Secret naming an existing account gets token, ca.crt and namespace and
// the account's uid annotation; the token is signed for that account; when the account is
// deleted the Secret goes with it.
func TestTokenSecretFilledAndRemovedWithAccount(t *testing.T) {
	fx := start(t)
	ctx := context.Background()
	ns := fx.env.Namespace("tok")
	core := fx.env.Admin.Kubernetes.CoreV1()
	sa, err := core.ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := core.Secrets(ns).Create(ctx, tokenSecret("builder-token", "builder"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var filled *corev1.Secret
	testenv.Eventually(t, bound, "the token secret filled", func() (bool, string) {
		s, err := core.Secrets(ns).Get(ctx, "builder-token", metav1.GetOptions{})
		if err != nil {
			return false, testenv.Short(err)
		}
		filled = s
		return len(s.Data[corev1.ServiceAccountTokenKey]) > 0, fmt.Sprintf("data keys %d", len(s.Data))
	})
	if got := filled.Annotations[naming.ServiceAccountUIDAnnotation]; got != string(sa.UID) {
		t.Errorf("uid annotation = %q, want %q", got, sa.UID)
	}
	if !bytes.Equal(filled.Data[corev1.ServiceAccountRootCAKey], fx.rootCA) {
		t.Errorf("ca.crt is not the root CA")
	}
	if got := string(filled.Data[corev1.ServiceAccountNamespaceKey]); got != ns {
		t.Errorf("namespace = %q, want %q", got, ns)
	}
	claims, err := fx.signer.verify(string(filled.Data[corev1.ServiceAccountTokenKey]))
	if err != nil {
		t.Fatalf("the token does not verify: %v", err)
	}
	p := naming.LegacyServiceAccountClaimPrefix
	if claims["sub"] != "system:serviceaccount:"+ns+":builder" || claims[p+"service-account.uid"] != string(sa.UID) || claims[p+"secret.name"] != "builder-token" {
		t.Errorf("token claims = %v", claims)
	}

	// A filled Secret is left alone: the token is not signed again.
	token := string(filled.Data[corev1.ServiceAccountTokenKey])
	syncs := testutil.ToFloat64(fx.metrics.Syncs.WithLabelValues(serviceaccounttoken.Name))
	filled.Labels = map[string]string{"touched": "yes"}
	if _, err := core.Secrets(ns).Update(ctx, filled, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "the update synced", func() (bool, string) {
		return testutil.ToFloat64(fx.metrics.Syncs.WithLabelValues(serviceaccounttoken.Name)) > syncs, "no sync"
	})
	if s, err := core.Secrets(ns).Get(ctx, "builder-token", metav1.GetOptions{}); err != nil || string(s.Data[corev1.ServiceAccountTokenKey]) != token {
		t.Fatalf("the token changed on an unrelated update (err %v)", err)
	}

	if err := core.ServiceAccounts(ns).Delete(ctx, "builder", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "the token secret deleted with its account", fx.gone(ns, "builder-token"))
}

// Upstream rule: a token Secret whose account does not exist, or whose uid annotation names
// another incarnation of the account, is deleted (never filled).
func TestTokenSecretsOfMissingOrReplacedAccounts(t *testing.T) {
	fx := start(t)
	ctx := context.Background()
	ns := fx.env.Namespace("tok-bad")
	core := fx.env.Admin.Kubernetes.CoreV1()
	if _, err := core.Secrets(ns).Create(ctx, tokenSecret("ghost-token", "ghost"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "the secret of a missing account deleted", fx.gone(ns, "ghost-token"))

	if _, err := core.ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stale := tokenSecret("app-token", "app")
	stale.Annotations[naming.ServiceAccountUIDAnnotation] = "00000000-0000-0000-0000-000000000000"
	if _, err := core.Secrets(ns).Create(ctx, stale, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "the secret of a replaced account deleted", fx.gone(ns, "app-token"))

	// A Secret of another type with the same annotation is not the controller's.
	opaque := tokenSecret("not-a-token", "ghost")
	opaque.Type = corev1.SecretTypeOpaque
	if _, err := core.Secrets(ns).Create(ctx, opaque, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Served after the opaque Secret (if it were seen at all): a fresh token Secret of "app".
	if _, err := core.Secrets(ns).Create(ctx, tokenSecret("app-token-2", "app"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "a later token secret filled", func() (bool, string) {
		s, err := core.Secrets(ns).Get(ctx, "app-token-2", metav1.GetOptions{})
		return err == nil && len(s.Data[corev1.ServiceAccountTokenKey]) > 0, testenv.Short(err)
	})
	if s, err := core.Secrets(ns).Get(ctx, "not-a-token", metav1.GetOptions{}); err != nil || len(s.Data) != 0 {
		t.Fatalf("an opaque secret was touched: %v %v", err, s)
	}
}

// Upstream rule (1.24+): no token Secret is created for an account; and a deleted token Secret is
// dropped from its account's secrets list.
func TestNoAutoCreatedTokensAndReferenceRemoval(t *testing.T) {
	fx := start(t)
	ctx := context.Background()
	ns := fx.env.Namespace("tok-ref")
	core := fx.env.Admin.Kubernetes.CoreV1()
	syncs := testutil.ToFloat64(fx.metrics.Syncs.WithLabelValues(serviceaccounttoken.Name))
	sa := &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: "worker"},
		Secrets:    []corev1.ObjectReference{{Name: "worker-token"}, {Name: "worker-pull"}},
	}
	if _, err := core.ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := core.Secrets(ns).Create(ctx, tokenSecret("worker-token", "worker"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "the token secret filled", func() (bool, string) {
		s, err := core.Secrets(ns).Get(ctx, "worker-token", metav1.GetOptions{})
		return err == nil && len(s.Data[corev1.ServiceAccountTokenKey]) > 0, testenv.Short(err)
	})
	if testutil.ToFloat64(fx.metrics.Syncs.WithLabelValues(serviceaccounttoken.Name)) <= syncs {
		t.Fatal("no sync counted")
	}
	list, err := core.Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("want only the secret the test created, got %d secrets", len(list.Items))
	}

	if err := core.Secrets(ns).Delete(ctx, "worker-token", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, bound, "the deleted secret dropped from the account", func() (bool, string) {
		sa, err := core.ServiceAccounts(ns).Get(ctx, "worker", metav1.GetOptions{})
		if err != nil {
			return false, testenv.Short(err)
		}
		return len(sa.Secrets) == 1 && sa.Secrets[0].Name == "worker-pull", fmt.Sprint(sa.Secrets)
	})
}
