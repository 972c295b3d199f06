package pods

import (
	"context"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/admission/admissiontest"
)

// countingStore counts service account reads and can create the account after some reads, as
// the account controller would while the plugin waits.
type countingStore struct {
	*admissiontest.Store
	reads     atomic.Int32
	appearAt  int32
	appearing *corev1.ServiceAccount
}

func (s *countingStore) GetServiceAccount(ctx context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	if n := s.reads.Add(1); s.appearing != nil && n == s.appearAt {
		s.Objects.ServiceAccountList.Add(s.appearing)
	}
	return s.Store.GetServiceAccount(ctx, ns, name)
}

func newSAPlugin(t *testing.T, objects *admissiontest.Objects, store admission.Store) *serviceAccount {
	t.Helper()
	deps := admissiontest.Deps(objects, nil)
	if store != nil {
		deps.Store = store
	}
	p, err := newServiceAccount(deps, nil)
	if err != nil {
		t.Fatal(err)
	}
	sa := p.(*serviceAccount)
	sa.retryInterval = func() time.Duration { return time.Millisecond }
	sa.generateName = func(base string) string { return base + "abcde" }
	return sa
}

func account(name string, mod func(*corev1.ServiceAccount)) *corev1.ServiceAccount {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
	if mod != nil {
		mod(sa)
	}
	return sa
}

func TestServiceAccountMutation(t *testing.T) {
	f := false
	tr := true
	objects := &admissiontest.Objects{}
	objects.ServiceAccountList.Add(
		account("default", func(sa *corev1.ServiceAccount) {
			sa.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
		}),
		account("quiet", func(sa *corev1.ServiceAccount) { sa.AutomountServiceAccountToken = &f }),
	)
	p := newSAPlugin(t, objects, nil)
	tokenMount := corev1.VolumeMount{Name: naming.ServiceAccountTokenVolumePrefix + "abcde", ReadOnly: true, MountPath: naming.ServiceAccountTokenMountPath}

	t.Run("spec: default account, projected token volume mounted in init and regular containers, pull secrets copied", func(t *testing.T) {
		pd := pod("p", "a", "b")
		pd.Spec.InitContainers = []corev1.Container{{Name: "init"}}
		pd.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "dbg"}}}
		if err := admit(p, podReq(admission.Create, "", pd, nil)); err != nil {
			t.Fatal(err)
		}
		if pd.Spec.ServiceAccountName != "default" {
			t.Errorf("account %q", pd.Spec.ServiceAccountName)
		}
		if len(pd.Spec.Volumes) != 1 || pd.Spec.Volumes[0].Name != naming.ServiceAccountTokenVolumePrefix+"abcde" {
			t.Fatalf("volumes %+v", pd.Spec.Volumes)
		}
		if !reflect.DeepEqual(pd.Spec.Volumes[0].Projected, TokenVolumeSource()) {
			t.Errorf("projection %+v", pd.Spec.Volumes[0].Projected)
		}
		src := pd.Spec.Volumes[0].Projected
		if *src.DefaultMode != 0o644 || src.Sources[0].ServiceAccountToken.Path != "token" || *src.Sources[0].ServiceAccountToken.ExpirationSeconds != 3607 ||
			src.Sources[1].ConfigMap.Name != naming.RootCAConfigMap || src.Sources[1].ConfigMap.Items[0].Key != "ca.crt" ||
			src.Sources[2].DownwardAPI.Items[0].FieldRef.FieldPath != "metadata.namespace" {
			t.Errorf("upstream's three sources: %+v", src)
		}
		for _, c := range append(pd.Spec.InitContainers, pd.Spec.Containers...) {
			if !reflect.DeepEqual(c.VolumeMounts, []corev1.VolumeMount{tokenMount}) {
				t.Errorf("container %s mounts %+v", c.Name, c.VolumeMounts)
			}
		}
		if len(pd.Spec.EphemeralContainers[0].VolumeMounts) != 0 {
			t.Error("ephemeral containers are not given the token")
		}
		if !reflect.DeepEqual(pd.Spec.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "registry"}}) {
			t.Errorf("pull secrets %+v", pd.Spec.ImagePullSecrets)
		}
	})
	t.Run("spec: a container already mounting the path is skipped; an existing token volume is reused", func(t *testing.T) {
		pd := pod("p", "a", "b")
		pd.Spec.Volumes = []corev1.Volume{{Name: naming.ServiceAccountTokenVolumePrefix + "mine"}}
		pd.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "own", MountPath: naming.ServiceAccountTokenMountPath}}
		pd.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "mine"}}
		if err := admit(p, podReq(admission.Create, "", pd, nil)); err != nil {
			t.Fatal(err)
		}
		if len(pd.Spec.Volumes) != 1 || len(pd.Spec.Containers[0].VolumeMounts) != 1 || pd.Spec.Containers[1].VolumeMounts[0].Name != naming.ServiceAccountTokenVolumePrefix+"mine" {
			t.Errorf("volumes %+v mounts %+v %+v", pd.Spec.Volumes, pd.Spec.Containers[0].VolumeMounts, pd.Spec.Containers[1].VolumeMounts)
		}
		if !reflect.DeepEqual(pd.Spec.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "mine"}}) {
			t.Error("the pod's own pull secrets are kept")
		}
	})
	for _, c := range []struct {
		name        string
		account     string
		podOpt      *bool
		wantMounted bool
	}{
		{"spec: automount false on the account", "quiet", nil, false},
		{"spec: automount false on the pod", "default", &f, false},
		{"upstream: the pod's choice wins over the account's", "quiet", &tr, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			pd := pod("p", "a")
			pd.Spec.ServiceAccountName = c.account
			pd.Spec.AutomountServiceAccountToken = c.podOpt
			if err := admit(p, podReq(admission.Create, "", pd, nil)); err != nil {
				t.Fatal(err)
			}
			if got := len(pd.Spec.Volumes) == 1; got != c.wantMounted {
				t.Errorf("mounted = %v", got)
			}
		})
	}
}

func TestServiceAccountLookup(t *testing.T) {
	t.Run("spec: a missing account rejects the pod", func(t *testing.T) {
		p := newSAPlugin(t, &admissiontest.Objects{}, nil)
		pd := pod("p", "a")
		pd.Spec.ServiceAccountName = "ghost"
		wantStatus(t, admit(p, podReq(admission.Create, "", pd, nil)), 403, `pods "p" is forbidden: error looking up service account ns/ghost: serviceaccount "ghost" not found`)
	})
	t.Run("an account the lister has not seen yet is read from storage", func(t *testing.T) {
		storeObjects := &admissiontest.Objects{}
		storeObjects.ServiceAccountList.Add(account("fresh", nil))
		store := &countingStore{Store: &admissiontest.Store{Objects: storeObjects}}
		p := newSAPlugin(t, &admissiontest.Objects{}, store)
		pd := pod("p", "a")
		pd.Spec.ServiceAccountName = "fresh"
		if err := admit(p, podReq(admission.Create, "", pd, nil)); err != nil {
			t.Fatal(err)
		}
		if n := store.reads.Load(); n != 3 { // Admit, the validation Admit ends with (as upstream), the validating phase
			t.Errorf("storage read %d times", n)
		}
	})
	t.Run("upstream: the default account is waited for (up to 10 reads)", func(t *testing.T) {
		store := &countingStore{Store: &admissiontest.Store{Objects: &admissiontest.Objects{}}, appearAt: 4, appearing: account("default", nil)}
		p := newSAPlugin(t, &admissiontest.Objects{}, store)
		if err := admit(p, podReq(admission.Create, "", pod("p", "a"), nil)); err != nil {
			t.Fatal(err)
		}
		missing := &countingStore{Store: &admissiontest.Store{Objects: &admissiontest.Objects{}}}
		p = newSAPlugin(t, &admissiontest.Objects{}, missing)
		wantStatus(t, admit(p, podReq(admission.Create, "", pod("p", "a"), nil)), 403, `pods "p" is forbidden: error looking up service account ns/default: serviceaccount "default" not found`)
		if n := missing.reads.Load(); n != 10 {
			t.Errorf("default account read %d times, want 10", n)
		}
	})
}

func TestServiceAccountMirrorPods(t *testing.T) {
	objects := &admissiontest.Objects{}
	objects.ServiceAccountList.Add(account("default", nil))
	p := newSAPlugin(t, objects, nil)
	mirror := func(mod func(*corev1.Pod)) *corev1.Pod {
		pd := pod("static-node1", "a")
		pd.Annotations = map[string]string{naming.MirrorPodAnnotation: "hash"}
		mod(pd)
		return pd
	}
	cases := []struct {
		name string
		pod  *corev1.Pod
		msg  string
	}{
		{"upstream: a mirror pod is admitted unchanged", mirror(func(*corev1.Pod) {}), ""},
		{"upstream: a mirror pod may not name a service account", mirror(func(p *corev1.Pod) { p.Spec.ServiceAccountName = "default" }), "a mirror pod may not reference service accounts"},
		{"upstream: a mirror pod may not use secrets (volumes)", mirror(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "x"}}}}
		}), "a mirror pod may not reference secrets"},
		{"upstream: a mirror pod may not use secrets (env)", mirror(func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "E", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}}}}}
		}), "a mirror pod may not reference secrets"},
		{"upstream: a mirror pod may not project tokens", mirror(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "t", VolumeSource: corev1.VolumeSource{Projected: TokenVolumeSource()}}}
		}), "a mirror pod may not use ServiceAccountToken volume projections"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := c.pod.DeepCopy()
			err := admit(p, podReq(admission.Create, "", c.pod, nil))
			if c.msg == "" {
				wantStatus(t, err, 0, "")
				if !reflect.DeepEqual(before, c.pod) {
					t.Errorf("mirror pod changed: %+v", c.pod.Spec)
				}
				return
			}
			wantStatus(t, err, 403, `pods "static-node1" is forbidden: `+c.msg)
		})
	}
}

func TestServiceAccountMountableSecrets(t *testing.T) {
	objects := &admissiontest.Objects{}
	objects.ServiceAccountList.Add(account("strict", func(sa *corev1.ServiceAccount) {
		sa.Annotations = map[string]string{naming.EnforceMountableSecretsAnnotation: "true"}
		sa.Secrets = []corev1.ObjectReference{{Name: "allowed"}}
		sa.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}}
	}))
	p := newSAPlugin(t, objects, nil)
	secretEnv := func(secret string) []corev1.EnvVar {
		return []corev1.EnvVar{{Name: "E", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}}}}}
	}
	cases := []struct {
		name string
		mod  func(*corev1.Pod)
		msg  string
	}{
		{"upstream: listed secrets are allowed", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "allowed"}}}}
			p.Spec.Containers[0].Env = secretEnv("allowed")
			p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}}
		}, ""},
		{"upstream: an unlisted secret volume", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "other"}}}}
		}, `volume with secret.secretName="other" is not allowed because service account strict does not reference that secret`},
		{"upstream: an unlisted secret in an init container's env", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Env: secretEnv("other")}}
		}, `init container init with envVar E referencing secret.secretName="other" is not allowed because service account strict does not reference that secret`},
		{"upstream: an unlisted secret in envFrom", func(p *corev1.Pod) {
			p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "other"}}}}
		}, `container c0 with envFrom referencing secret.secretName="other" is not allowed because service account strict does not reference that secret`},
		{"upstream: an unlisted pull secret", func(p *corev1.Pod) {
			p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}, {Name: "other"}}
		}, `imagePullSecrets[1].name="other" is not allowed because service account strict does not reference that imagePullSecret`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pd := pod("p", "a")
			pd.Spec.ServiceAccountName = "strict"
			c.mod(pd)
			err := admit(p, podReq(admission.Create, "", pd, nil))
			if c.msg == "" {
				wantStatus(t, err, 0, "")
				return
			}
			wantStatus(t, err, 403, `pods "p" is forbidden: `+c.msg)
		})
	}
	t.Run("upstream: ephemeral containers added later are held to the account's secrets", func(t *testing.T) {
		old := pod("p", "a")
		old.Spec.ServiceAccountName = "strict"
		pd := old.DeepCopy()
		pd.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "dbg", Env: secretEnv("other")}}}
		err := admit(p, podReq(admission.Update, ephemeralContainers, pd, old))
		wantStatus(t, err, 500, `ephemeral container dbg with envVar E referencing secret.secretName="other" is not allowed because service account strict does not reference that secret`)
		pd.Spec.EphemeralContainers[0].Env = secretEnv("allowed")
		wantStatus(t, admit(p, podReq(admission.Update, ephemeralContainers, pd, old)), 0, "")
		pd.Spec.ServiceAccountName = ""
		err = admit(p, podReq(admission.Update, ephemeralContainers, pd, old))
		if err == nil || !strings.Contains(err.Error(), "no service account specified for pod ns/p") {
			t.Fatalf("err = %v", err)
		}
	})
}
