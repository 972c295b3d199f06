package pods

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// serviceAccount is ServiceAccount: a new pod runs as a service account that exists (default
// when it names none), gets the account's image pull secrets when it has none, and, unless the
// pod or the account opts out of automounting, a projected volume with a bound token, the
// cluster CA bundle and its namespace, mounted read-only in every container at the service
// account path. Mirror pods (the API copies of static pods a node runs) are not changed and
// may not reference service accounts, Secrets or token projections, since the node that creates
// them must not gain access to those through them. An account annotated to enforce mountable
// secrets limits its pods (and ephemeral containers added later) to the Secrets it lists.
type serviceAccount struct {
	deps admission.Deps
	// retryInterval spaces the storage reads of a default account not yet seen; upstream waits
	// 100-200ms between up to 10 reads, since the account controller creates it with the
	// namespace. Tests shorten it.
	retryInterval func() time.Duration
	// generateName names new token volumes (platform-api-access-<5 random characters>).
	generateName func(base string) string
}

// Names and values of the projected token volume, as upstream's.
var tokenVolumePrefix = naming.ServiceAccountTokenVolumePrefix

const (
	defaultServiceAccountName = "default"
	// tokenExpirationSeconds is upstream's WarnOnlyBoundTokenExpirationSeconds: a lifetime just
	// over an hour that lets the token issuer recognize (and warn about) clients that do not
	// refresh their token.
	tokenExpirationSeconds = int64(3607)
	rootCAKey              = "ca.crt"
)

func newServiceAccount(deps admission.Deps, _ []byte) (admission.Plugin, error) {
	return &serviceAccount{
		deps: deps,
		retryInterval: func() time.Duration {
			return time.Duration(100+rand.IntN(100)) * time.Millisecond
		},
		generateName: func(base string) string { return base + utilrand.String(5) },
	}, nil
}

func (*serviceAccount) Name() string { return admission.ServiceAccount }

// Interests: pod creates, and updates of the ephemeralcontainers subresource (mountable
// secrets of the added containers).
func (*serviceAccount) Interests() []admission.Interest {
	return []admission.Interest{
		podInterest(admission.Create),
		{Operations: []admission.Operation{admission.Update}, APIGroups: []string{coreGroup}, Resources: []string{podsRes + "/" + ephemeralContainers}, Scope: "Namespaced"},
	}
}

// applies returns the pod of a request on pods or pods/ephemeralcontainers.
func (*serviceAccount) applies(a *admission.Attributes) (*corev1.Pod, bool) {
	if !a.Is(coreGroup, podsRes, "") && !a.Is(coreGroup, podsRes, ephemeralContainers) {
		return nil, false
	}
	pod, ok := a.Object.(*corev1.Pod)
	return pod, ok && pod != nil
}

func (s *serviceAccount) Admit(ctx context.Context, a *admission.Attributes) error {
	pod, ok := s.applies(a)
	if !ok || a.Operation != admission.Create {
		return nil
	}
	if _, mirror := pod.Annotations[naming.MirrorPodAnnotation]; mirror {
		// Changing a mirror pod's spec would make its node delete it as not matching.
		return s.Validate(ctx, a)
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = defaultServiceAccountName
	}
	sa, err := s.getServiceAccount(ctx, a.Namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		return forbidden(a, fmt.Errorf("error looking up service account %s/%s: %w", a.Namespace, pod.Spec.ServiceAccountName, err))
	}
	if shouldAutomount(sa, pod) {
		s.mountToken(pod)
	}
	if len(pod.Spec.ImagePullSecrets) == 0 {
		pod.Spec.ImagePullSecrets = make([]corev1.LocalObjectReference, len(sa.ImagePullSecrets))
		for i, ref := range sa.ImagePullSecrets {
			pod.Spec.ImagePullSecrets[i].Name = ref.Name
		}
	}
	return s.Validate(ctx, a)
}

func (s *serviceAccount) Validate(ctx context.Context, a *admission.Attributes) error {
	pod, ok := s.applies(a)
	if !ok {
		return nil
	}
	if a.Operation == admission.Update && a.Subresource == ephemeralContainers {
		return s.limitEphemeralContainerSecrets(ctx, a, pod)
	}
	if a.Operation != admission.Create {
		return nil
	}
	if _, mirror := pod.Annotations[naming.MirrorPodAnnotation]; mirror {
		if pod.Spec.ServiceAccountName != "" {
			return forbidden(a, errors.New("a mirror pod may not reference service accounts"))
		}
		if referencesSecrets(pod) {
			return forbidden(a, errors.New("a mirror pod may not reference secrets"))
		}
		for _, v := range pod.Spec.Volumes {
			if v.Projected == nil {
				continue
			}
			for _, src := range v.Projected.Sources {
				if src.ServiceAccountToken != nil {
					return forbidden(a, errors.New("a mirror pod may not use ServiceAccountToken volume projections"))
				}
			}
		}
		return nil
	}
	if pod.Spec.ServiceAccountName == "" {
		return forbidden(a, fmt.Errorf("no service account specified for pod %s/%s", a.Namespace, pod.Name))
	}
	sa, err := s.getServiceAccount(ctx, a.Namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		return forbidden(a, fmt.Errorf("error looking up service account %s/%s: %v", a.Namespace, pod.Spec.ServiceAccountName, err))
	}
	if enforceMountableSecrets(sa) {
		if err := limitSecretReferences(sa, pod); err != nil {
			return forbidden(a, err)
		}
	}
	return nil
}

// getServiceAccount reads the account from the lister, else from storage (it may be brand new:
// the lister lags writes); the default account, which the account controller creates with the
// namespace, is read up to ten times before it counts as missing.
func (s *serviceAccount) getServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	if sa, ok := s.deps.Objects.ServiceAccounts().Get(namespace, name); ok {
		return sa, nil
	}
	attempts := 1
	if name == defaultServiceAccountName {
		attempts = 10
	}
	interval := s.retryInterval()
	for i := 0; i < attempts; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(interval):
			}
			// The lister may have caught up meanwhile.
			if sa, ok := s.deps.Objects.ServiceAccounts().Get(namespace, name); ok {
				return sa, nil
			}
		}
		sa, err := s.deps.Store.GetServiceAccount(ctx, namespace, name)
		if err == nil {
			return sa, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	return nil, apierrors.NewNotFound(corev1.Resource("serviceaccount"), name)
}

// shouldAutomount: the pod's choice wins, then the account's, else yes.
func shouldAutomount(sa *corev1.ServiceAccount, pod *corev1.Pod) bool {
	if pod.Spec.AutomountServiceAccountToken != nil {
		return *pod.Spec.AutomountServiceAccountToken
	}
	if sa.AutomountServiceAccountToken != nil {
		return *sa.AutomountServiceAccountToken
	}
	return true
}

// enforceMountableSecrets tells whether the account's annotation limits its pods to its Secrets.
func enforceMountableSecrets(sa *corev1.ServiceAccount) bool {
	v, ok := sa.Annotations[naming.EnforceMountableSecretsAnnotation]
	if !ok {
		return false
	}
	b, _ := strconv.ParseBool(v)
	return b
}

// mountToken adds the projected token volume (reusing one the pod already has) and mounts it in
// every init container and container that does not mount something at the path already.
func (s *serviceAccount) mountToken(pod *corev1.Pod) {
	volumeName := ""
	for _, v := range pod.Spec.Volumes {
		if strings.HasPrefix(v.Name, tokenVolumePrefix) {
			volumeName = v.Name
			break
		}
	}
	hasVolume := volumeName != ""
	if !hasVolume {
		volumeName = s.generateName(tokenVolumePrefix)
	}
	mount := corev1.VolumeMount{Name: volumeName, ReadOnly: true, MountPath: naming.ServiceAccountTokenMountPath}
	needsVolume := false
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			mounted := false
			for _, m := range list[i].VolumeMounts {
				if m.MountPath == naming.ServiceAccountTokenMountPath {
					mounted = true
					break
				}
			}
			if !mounted {
				list[i].VolumeMounts = append(list[i].VolumeMounts, mount)
				needsVolume = true
			}
		}
	}
	if !hasVolume && needsVolume {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: volumeName, VolumeSource: corev1.VolumeSource{Projected: TokenVolumeSource()}})
	}
}

// TokenVolumeSource is the projected volume the ServiceAccount plugin gives pods: a bound token
// (path token, 3607 seconds), the cluster CA bundle (ConfigMap naming.RootCAConfigMap, key
// ca.crt) and the pod's namespace (path namespace), with the default mode set explicitly as
// upstream does (so the stored pod equals what clients compute).
func TokenVolumeSource() *corev1.ProjectedVolumeSource {
	mode := corev1.ProjectedVolumeSourceDefaultMode
	expiration := tokenExpirationSeconds
	return &corev1.ProjectedVolumeSource{
		DefaultMode: &mode,
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &expiration}},
			{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: naming.RootCAConfigMap},
				Items:                []corev1.KeyToPath{{Key: rootCAKey, Path: rootCAKey}},
			}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{
				Path:     "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
			}}}},
		},
	}
}

// limitSecretReferences rejects a pod referencing Secrets (volumes, env, envFrom, image pull
// secrets) its account does not list.
func limitSecretReferences(sa *corev1.ServiceAccount, pod *corev1.Pod) error {
	mountable := map[string]bool{}
	for _, ref := range sa.Secrets {
		mountable[ref.Name] = true
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret == nil {
			continue
		}
		if !mountable[v.Secret.SecretName] {
			return fmt.Errorf("volume with secret.secretName=\"%s\" is not allowed because service account %s does not reference that secret", v.Secret.SecretName, sa.Name)
		}
	}
	for _, c := range []struct {
		kind string
		list []corev1.Container
	}{{"init container", pod.Spec.InitContainers}, {"container", pod.Spec.Containers}} {
		for _, container := range c.list {
			if err := containerSecretRefs(c.kind, container.Name, container.Env, container.EnvFrom, mountable, sa.Name); err != nil {
				return err
			}
		}
	}
	pullable := map[string]bool{}
	for _, ref := range sa.ImagePullSecrets {
		pullable[ref.Name] = true
	}
	for i, ref := range pod.Spec.ImagePullSecrets {
		if !pullable[ref.Name] {
			return fmt.Errorf(`imagePullSecrets[%d].name="%s" is not allowed because service account %s does not reference that imagePullSecret`, i, ref.Name, sa.Name)
		}
	}
	return nil
}

// containerSecretRefs rejects a container's env or envFrom referring to a Secret not in
// mountable; kind is "init container", "container" or "ephemeral container" as upstream's
// messages say.
func containerSecretRefs(kind, name string, env []corev1.EnvVar, envFrom []corev1.EnvFromSource, mountable map[string]bool, account string) error {
	for _, e := range env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && !mountable[e.ValueFrom.SecretKeyRef.Name] {
			return fmt.Errorf("%s %s with envVar %s referencing secret.secretName=\"%s\" is not allowed because service account %s does not reference that secret", kind, name, e.Name, e.ValueFrom.SecretKeyRef.Name, account)
		}
	}
	for _, e := range envFrom {
		if e.SecretRef != nil && !mountable[e.SecretRef.Name] {
			return fmt.Errorf("%s %s with envFrom referencing secret.secretName=\"%s\" is not allowed because service account %s does not reference that secret", kind, name, e.SecretRef.Name, account)
		}
	}
	return nil
}

// limitEphemeralContainerSecrets checks the ephemeral containers an update adds against the
// account's mountable secrets.
func (s *serviceAccount) limitEphemeralContainerSecrets(ctx context.Context, a *admission.Attributes, pod *corev1.Pod) error {
	if pod.Spec.ServiceAccountName == "" {
		return forbidden(a, fmt.Errorf("no service account specified for pod %s/%s", a.Namespace, pod.Name))
	}
	sa, err := s.getServiceAccount(ctx, a.Namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		return forbidden(a, fmt.Errorf("error looking up service account %s/%s: %w", a.Namespace, pod.Spec.ServiceAccountName, err))
	}
	if !enforceMountableSecrets(sa) {
		return nil
	}
	mountable := map[string]bool{}
	for _, ref := range sa.Secrets {
		mountable[ref.Name] = true
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if err := containerSecretRefs("ephemeral container", c.Name, c.Env, c.EnvFrom, mountable, sa.Name); err != nil {
			// Upstream returns this one as a plain error: a 500 to the client.
			return unknownError(err.Error())
		}
	}
	return nil
}

// referencesSecrets tells whether the pod names any Secret: image pull secrets, containers' env
// and envFrom (all kinds of containers), and every volume source that takes a Secret.
func referencesSecrets(pod *corev1.Pod) bool {
	if len(pod.Spec.ImagePullSecrets) > 0 {
		return true
	}
	envRefs := func(env []corev1.EnvVar, envFrom []corev1.EnvFromSource) bool {
		for _, e := range envFrom {
			if e.SecretRef != nil {
				return true
			}
		}
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				return true
			}
		}
		return false
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if envRefs(c.Env, c.EnvFrom) {
				return true
			}
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if envRefs(c.Env, c.EnvFrom) {
			return true
		}
	}
	for _, v := range pod.Spec.Volumes {
		src := v.VolumeSource
		switch {
		case src.AzureFile != nil && src.AzureFile.SecretName != "",
			src.CephFS != nil && src.CephFS.SecretRef != nil,
			src.Cinder != nil && src.Cinder.SecretRef != nil,
			src.FlexVolume != nil && src.FlexVolume.SecretRef != nil,
			src.RBD != nil && src.RBD.SecretRef != nil,
			src.Secret != nil,
			src.ScaleIO != nil && src.ScaleIO.SecretRef != nil,
			src.ISCSI != nil && src.ISCSI.SecretRef != nil,
			src.StorageOS != nil && src.StorageOS.SecretRef != nil,
			src.CSI != nil && src.CSI.NodePublishSecretRef != nil:
			return true
		case src.Projected != nil:
			for _, p := range src.Projected.Sources {
				if p.Secret != nil {
					return true
				}
			}
		}
	}
	return false
}
