package certs

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// In a Kubernetes cluster (the Helm chart's pre-install hook) the PKI lives in Secrets instead
// of a volume: --secret holds what the services mount (everything but the administrator's
// credentials) and --admin-secret the admin kubeconfig. A run first restores the files from
// the Secrets that exist, so Ensure keeps what is still valid (the CA above all) exactly as it
// does with a persistent directory, then writes the Secrets back when something changed.

// adminFiles are the administrator's credentials: never in --secret.
var adminFiles = map[string]bool{AdminCert: true, AdminKey: true, AdminKubeconfig: true}

// SecretManagedBy is the app.kubernetes.io/managed-by label of the Secrets the command writes.
const SecretManagedBy = "platform-certs"

// secretRef is a namespace/name.
type secretRef struct{ namespace, name string }

func parseSecretRef(flag, s string) (secretRef, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return secretRef{}, fmt.Errorf("%s %q must be <namespace>/<name>", flag, s)
	}
	return secretRef{ns, name}, nil
}

// kubeClient is the Kubernetes API that holds the Secrets: --kubeconfig, or the pod's service
// account.
func (o *Options) kubeClient() (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	if o.Kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("the Kubernetes API for --secret/--admin-secret: %w", err)
	}
	cfg.UserAgent = "platform-certs"
	return kubernetes.NewForConfig(cfg)
}

// EnsureWithSecrets is Ensure between a restore from and a write to the Secrets of --secret and
// --admin-secret (either may be empty). The Result also says, per Secret ("secret/<ns>/<name>"),
// whether it was created, updated or kept.
func EnsureWithSecrets(ctx context.Context, o Options, client kubernetes.Interface) (Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.KubeconfigDir == "" {
		o.KubeconfigDir = o.Dir
	}
	var svc, admin *secretRef
	if o.Secret != "" {
		r, _ := parseSecretRef("--secret", o.Secret)
		svc = &r
	}
	if o.AdminSecret != "" {
		r, _ := parseSecretRef("--admin-secret", o.AdminSecret)
		admin = &r
	}
	for _, dir := range []string{o.Dir, o.KubeconfigDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	// Restore: the service files into Dir; the administrator's pair into Dir and the admin
	// kubeconfig into KubeconfigDir, where Ensure looks for them.
	old := map[secretRef]*corev1.Secret{}
	for _, ref := range []*secretRef{svc, admin} {
		if ref == nil {
			continue
		}
		s, err := client.CoreV1().Secrets(ref.namespace).Get(ctx, ref.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading Secret %s/%s: %w", ref.namespace, ref.name, err)
		}
		old[*ref] = s
		for name, data := range s.Data {
			if name != filepath.Base(name) || strings.HasPrefix(name, ".") {
				continue
			}
			if ref == svc && adminFiles[name] {
				continue
			}
			dir := o.Dir
			if ref == admin && !adminFiles[name] {
				// ca.crt: its copy beside the admin kubeconfig (Ensure writes Dir's from the CA).
				if name != CACert || o.KubeconfigDir == o.Dir {
					continue
				}
				dir = o.KubeconfigDir
			}
			if name == AdminKubeconfig {
				dir = o.KubeconfigDir
			}
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				return nil, err
			}
		}
	}
	res, err := Ensure(o)
	if err != nil {
		return nil, err
	}
	// Write back.
	if svc != nil {
		data, err := readFiles(o.Dir, func(name string) bool { return !adminFiles[name] })
		if err != nil {
			return nil, err
		}
		if err := writeSecret(ctx, client, *svc, old[*svc], data, res); err != nil {
			return nil, err
		}
	}
	if admin != nil {
		data := map[string][]byte{}
		for _, f := range []struct{ dir, name string }{{o.Dir, AdminCert}, {o.Dir, AdminKey}, {o.KubeconfigDir, AdminKubeconfig}, {o.Dir, CACert}} {
			b, err := os.ReadFile(filepath.Join(f.dir, f.name))
			if err != nil {
				return nil, err
			}
			data[f.name] = b
		}
		if err := writeSecret(ctx, client, *admin, old[*admin], data, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// readFiles reads the regular files of dir whose names keep accepts (hidden files aside).
func readFiles(dir string, keep func(string) bool) (map[string][]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{}
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") || !keep(e.Name()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		data[e.Name()] = b
	}
	return data, nil
}

// writeSecret creates the Secret or updates it (compare-and-swap on the resourceVersion read at
// the start) when its data differ.
func writeSecret(ctx context.Context, client kubernetes.Interface, ref secretRef, old *corev1.Secret, data map[string][]byte, res Result) error {
	key := "secret/" + ref.namespace + "/" + ref.name
	if old == nil {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: ref.name, Namespace: ref.namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": SecretManagedBy}},
			Type: corev1.SecretTypeOpaque,
			Data: data,
		}
		if _, err := client.CoreV1().Secrets(ref.namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Secret %s/%s: %w", ref.namespace, ref.name, err)
		}
		res[key] = "created"
		return nil
	}
	if maps.EqualFunc(old.Data, data, bytes.Equal) {
		res[key] = "kept"
		return nil
	}
	s := old.DeepCopy()
	s.Data = data
	if _, err := client.CoreV1().Secrets(ref.namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("updating Secret %s/%s: it changed meanwhile (another run?); run again: %w", ref.namespace, ref.name, err)
		}
		return fmt.Errorf("updating Secret %s/%s: %w", ref.namespace, ref.name, err)
	}
	res[key] = "renewed"
	return nil
}
