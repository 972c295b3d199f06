package apiserver

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/services/gateway/registry"
)

// maxAnnotationsBytes is upstream's limit on the total size of an object's annotations.
const maxAnnotationsBytes = 256 * 1024

// generateNameSuffixLength is the length of the random suffix added to generateName, and
// maxGeneratedNameBase the longest prefix kept (upstream's: a generated name fits a 63-character
// DNS label whatever the prefix).
const (
	generateNameSuffixLength = 5
	maxGeneratedNameBase     = 63 - generateNameSuffixLength
)

// generateName makes a name from a generateName prefix, as upstream's name generator: the
// prefix (cut to maxGeneratedNameBase) and a random suffix.
func generateName(base string) string {
	if len(base) > maxGeneratedNameBase {
		base = base[:maxGeneratedNameBase]
	}
	return base + utilrand.String(generateNameSuffixLength)
}

// prepareCreate sets the system fields of a new object (uid, creationTimestamp, generation) and
// clears those a client may not set (deletion fields, status of kinds whose status is a
// subresource), so none can be forged. ctx carries the requesting user, which some kinds record
// (a CertificateSigningRequest's requestor).
func (a *API) prepareCreate(ctx context.Context, res *registry.Resource, obj runtime.Object, m metav1.Object) {
	m.SetUID(types.UID(uuid.NewString()))
	m.SetCreationTimestamp(metav1.NewTime(a.now().Truncate(time.Second)))
	m.SetDeletionTimestamp(nil)
	m.SetDeletionGracePeriodSeconds(nil)
	m.SetSelfLink("")
	m.SetGeneration(0)
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(generateName(m.GetGenerateName()))
	}
	// Generation, status and the kind's own fields are the kind's (its strategy).
	res.Strategy().PrepareForCreate(ctx, obj)
}

// validateObjectMeta checks the metadata rules of the spec: name (or generateName) valid for the
// kind, labels, annotations and finalizers well-formed. Violations are 422 Invalid, listing each.
func validateObjectMeta(res *registry.Resource, m metav1.Object) error {
	var errs field.ErrorList
	st := res.Strategy()
	p := field.NewPath("metadata")
	switch {
	case m.GetName() == "" && m.GetGenerateName() == "":
		errs = append(errs, field.Required(p.Child("name"), "name or generateName is required"))
	case m.GetName() != "":
		for _, msg := range st.ValidateName(m.GetName()) {
			errs = append(errs, field.Invalid(p.Child("name"), m.GetName(), msg))
		}
	}
	if g := m.GetGenerateName(); g != "" {
		// The prefix as generateName keeps it, plus the random suffix, must itself be a valid name.
		for _, msg := range st.ValidateName(g[:min(len(g), maxGeneratedNameBase)] + strings.Repeat("a", generateNameSuffixLength)) {
			errs = append(errs, field.Invalid(p.Child("generateName"), g, msg))
		}
	}
	for k, v := range m.GetLabels() {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p.Child("labels"), k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(p.Child("labels"), v, msg))
		}
	}
	total := 0
	for k, v := range m.GetAnnotations() {
		for _, msg := range validation.IsQualifiedName(strings.ToLower(k)) {
			errs = append(errs, field.Invalid(p.Child("annotations"), k, msg))
		}
		total += len(k) + len(v)
	}
	if total > maxAnnotationsBytes {
		errs = append(errs, field.TooLong(p.Child("annotations"), "", maxAnnotationsBytes))
	}
	for i, f := range m.GetFinalizers() {
		if msgs := validation.IsQualifiedName(f); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("finalizers").Index(i), f, strings.Join(msgs, "; ")))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	name := m.GetName()
	if name == "" {
		name = m.GetGenerateName()
	}
	return apierrors.NewInvalid(res.GroupVersionKind().GroupKind(), name, errs)
}

// mustMeta returns an object's metadata (registry.Meta).
func mustMeta(obj runtime.Object) metav1.Object { return registry.Meta(obj) }
