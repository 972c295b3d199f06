package pods

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/services/admission/admission"
)

// alwaysPullImages is AlwaysPullImages: every container of a new pod, and of an update that
// brings an image the pod did not have, pulls its image always, so a pod cannot use an image
// some other tenant pulled onto the node without having the credentials for it. The mutating
// half sets imagePullPolicy Always; the validating half rejects pods a later mutation (a webhook)
// set otherwise. Subresources (ephemeral containers included) are left alone, as upstream does.
type alwaysPullImages struct{}

func newAlwaysPullImages(admission.Deps, []byte) (admission.Plugin, error) {
	return alwaysPullImages{}, nil
}

func (alwaysPullImages) Name() string { return admission.AlwaysPullImages }

// Interests: pod creates and updates (updates that bring no new image are skipped inside).
func (alwaysPullImages) Interests() []admission.Interest {
	return []admission.Interest{podInterest(admission.Create, admission.Update)}
}

func (p alwaysPullImages) Admit(_ context.Context, a *admission.Attributes) error {
	if p.ignore(a) {
		return nil
	}
	pod, err := podOf(a)
	if err != nil {
		return err
	}
	visitContainers(&pod.Spec, func(c *corev1.Container, _ *field.Path) bool {
		c.ImagePullPolicy = corev1.PullAlways
		return true
	})
	return nil
}

func (p alwaysPullImages) Validate(_ context.Context, a *admission.Attributes) error {
	if p.ignore(a) {
		return nil
	}
	pod, err := podOf(a)
	if err != nil {
		return err
	}
	var errs []error
	visitContainers(&pod.Spec, func(c *corev1.Container, path *field.Path) bool {
		if c.ImagePullPolicy != corev1.PullAlways {
			errs = append(errs, forbidden(a, field.NotSupported(path.Child("imagePullPolicy"), c.ImagePullPolicy, []string{string(corev1.PullAlways)})))
		}
		return true
	})
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	// Upstream aggregates the per-container rejections (an error that is not a Status, which
	// its API server answers as a 500); Platform keeps the aggregate's text under the 403 each
	// part is.
	return forbiddenWithMessage(a, aggregate(errs).Error())
}

// ignore skips everything but the pods resource itself, and updates that bring no new image.
func (alwaysPullImages) ignore(a *admission.Attributes) bool {
	if !isPodWrite(a) {
		return true
	}
	if a.Operation != admission.Update {
		return false
	}
	pod, ok := a.Object.(*corev1.Pod)
	old := oldPodOf(a)
	if !ok || pod == nil || old == nil {
		return false
	}
	oldImages := map[string]bool{}
	visitContainers(&old.Spec, func(c *corev1.Container, _ *field.Path) bool {
		oldImages[c.Image] = true
		return true
	})
	newImage := false
	visitContainers(&pod.Spec, func(c *corev1.Container, _ *field.Path) bool {
		newImage = !oldImages[c.Image]
		return !newImage
	})
	return !newImage
}
