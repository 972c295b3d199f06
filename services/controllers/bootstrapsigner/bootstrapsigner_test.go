package bootstrapsigner_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/clientcmd"

	"platform.io/libs/naming"
	"platform.io/services/controllers/bootstrapsigner"
	"platform.io/services/controllers/bootstraptoken"
	"platform.io/services/controllers/internal/testenv"
)

const bound = 20 * time.Second

const server = "https://platform.example:6443"

// start runs the signer with informers selected as the manager selects them.
func start(t *testing.T) (*testenv.Env, []byte) {
	env := testenv.Start(t)
	ca, err := os.ReadFile(env.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	kube := env.Clients.Kubernetes
	secrets := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(naming.SystemNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("type", naming.SecretTypeBootstrapToken).String()
		}))
	cms := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(naming.PublicNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", bootstraptoken.ConfigMapClusterInfo).String()
		}))
	c, err := bootstrapsigner.New(kube, secrets.Core().V1().Secrets(), cms.Core().V1().ConfigMaps(), bootstrapsigner.Options{Server: server, RootCA: ca})
	if err != nil {
		t.Fatal(err)
	}
	env.Run(func(ctx context.Context) { c.Run(ctx, 1) }, secrets, cms)
	return env, ca
}

func signingToken(id, secret string, extra map[string]string) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: bootstraptoken.SecretPrefix + id, Namespace: naming.SystemNamespace},
		Type:       corev1.SecretType(naming.SecretTypeBootstrapToken),
		Data: map[string][]byte{
			bootstraptoken.IDKey: []byte(id), bootstraptoken.SecretKey: []byte(secret), bootstraptoken.UsageSigningKey: []byte("true"),
		},
	}
	for k, v := range extra {
		s.Data[k] = []byte(v)
	}
	return s
}

// verify checks a detached JWS the way a joining client does (spec: payload base64url without
// padding between the dots, HS256 with the full token, the verifier insists on HS256).
func verify(sig, content, id, secret string) error {
	header, mac, ok := strings.Cut(sig, "..")
	if !ok {
		return fmt.Errorf("not detached: %q", sig)
	}
	enc := base64.RawURLEncoding
	raw, err := enc.DecodeString(header)
	if err != nil {
		return err
	}
	var h struct{ Alg, Kid string }
	if err := json.Unmarshal(raw, &h); err != nil {
		return err
	}
	if h.Alg != "HS256" || h.Kid != id {
		return fmt.Errorf("header %s", raw)
	}
	m := hmac.New(sha256.New, []byte(id+"."+secret))
	m.Write([]byte(header + "." + enc.EncodeToString([]byte(content))))
	got, err := enc.DecodeString(mac)
	if err != nil {
		return err
	}
	if !hmac.Equal(got, m.Sum(nil)) {
		return fmt.Errorf("HS256 signature does not verify")
	}
	return nil
}

func signatures(cm *corev1.ConfigMap) []string {
	var ids []string
	for k := range cm.Data {
		if id, ok := strings.CutPrefix(k, bootstraptoken.JWSSignaturePrefix); ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

func TestBootstrapSigner(t *testing.T) {
	env, ca := start(t)
	ctx := context.Background()
	cms := env.Admin.Kubernetes.CoreV1().ConfigMaps(naming.PublicNamespace)
	secrets := env.Admin.Kubernetes.CoreV1().Secrets(naming.SystemNamespace)
	clusterInfo := func() (*corev1.ConfigMap, error) {
		return cms.Get(ctx, bootstraptoken.ConfigMapClusterInfo, metav1.GetOptions{})
	}
	// signedBy waits until exactly these tokens sign cluster-info, each signature verifying.
	signedBy := func(what string, tokens map[string]string) {
		t.Helper()
		testenv.Eventually(t, bound, what, func() (bool, string) {
			cm, err := clusterInfo()
			if err != nil {
				return false, testenv.Short(err)
			}
			ids := signatures(cm)
			if len(ids) != len(tokens) {
				return false, fmt.Sprint("signed by ", ids)
			}
			for id, secret := range tokens {
				if err := verify(cm.Data[bootstraptoken.JWSSignaturePrefix+id], cm.Data[bootstraptoken.KubeConfigKey], id, secret); err != nil {
					return false, id + ": " + err.Error()
				}
			}
			return true, ""
		})
	}

	// Created when missing: a kubeconfig with only the cluster.
	var cm *corev1.ConfigMap
	testenv.Eventually(t, bound, "cluster-info created", func() (bool, string) {
		var err error
		cm, err = clusterInfo()
		return err == nil, testenv.Short(err)
	})
	kc, err := clientcmd.Load([]byte(cm.Data[bootstraptoken.KubeConfigKey]))
	if err != nil {
		t.Fatalf("the kubeconfig of cluster-info: %v", err)
	}
	if len(kc.Clusters) != 1 || len(kc.AuthInfos) != 0 {
		t.Fatalf("cluster-info holds %d clusters and %d users, want the cluster only", len(kc.Clusters), len(kc.AuthInfos))
	}
	for _, cl := range kc.Clusters {
		if cl.Server != server || !bytes.Equal(cl.CertificateAuthorityData, ca) {
			t.Fatalf("cluster = %s with CA %d bytes; want %s with the root CA", cl.Server, len(cl.CertificateAuthorityData), server)
		}
	}

	// A signing token signs; tokens that may not sign do not.
	mustCreate := func(s *corev1.Secret) {
		t.Helper()
		if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mustCreate(signingToken("abcdef", "0123456789abcdef", nil))
	mustCreate(signingToken("nosign", "0123456789abcdef", map[string]string{bootstraptoken.UsageSigningKey: "false"}))
	mustCreate(signingToken("expird", "0123456789abcdef", map[string]string{bootstraptoken.ExpirationKey: time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)}))
	mustCreate(signingToken("badexp", "0123456789abcdef", map[string]string{bootstraptoken.ExpirationKey: "soon"}))
	signedBy("signed by the signing token only", map[string]string{"abcdef": "0123456789abcdef"})

	// A second token; then one that expires shortly: its signature goes when it expires.
	mustCreate(signingToken("ghijkl", "fedcba9876543210", nil))
	mustCreate(signingToken("short1", "aaaaaaaaaaaaaaaa", map[string]string{bootstraptoken.ExpirationKey: time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339)}))
	signedBy("signed by three tokens", map[string]string{"abcdef": "0123456789abcdef", "ghijkl": "fedcba9876543210", "short1": "aaaaaaaaaaaaaaaa"})
	signedBy("the expiring token's signature removed", map[string]string{"abcdef": "0123456789abcdef", "ghijkl": "fedcba9876543210"})

	// A token deleted: its signature goes.
	if err := secrets.Delete(ctx, "bootstrap-token-abcdef", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	signedBy("a deleted token's signature removed", map[string]string{"ghijkl": "fedcba9876543210"})

	// The kubeconfig changes: the signatures follow it; a stray signature is removed.
	cm, err = clusterInfo()
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[bootstraptoken.KubeConfigKey] += "# rotated\n"
	cm.Data[bootstraptoken.JWSSignaturePrefix+"stray1"] = "forged..signature"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	signedBy("signatures of the new kubeconfig", map[string]string{"ghijkl": "fedcba9876543210"})

	// Deleted: created again.
	if err := cms.Delete(ctx, bootstraptoken.ConfigMapClusterInfo, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	signedBy("cluster-info recreated and signed", map[string]string{"ghijkl": "fedcba9876543210"})
}
