package crd

import (
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateNamesNotTaken reports the names in crd.Spec.Names that another
// CustomResourceDefinition of the same group already uses. existing are the
// stored CRDs; the one with crd's own metadata.name is skipped, so the stored
// version of crd may be included on update.
//
// As upstream does, a resource name (plural, singular or a short name) clashes
// with any resource name of the other CRD, and a kind (kind or listKind) with
// any kind of the other CRD. The other CRD's status.acceptedNames are used
// when set, its spec.names otherwise. Empty singular and listKind count as
// their defaults (lowercase kind, kind+"List").
//
// It is separate from Validate because it needs the other stored objects.
func ValidateNamesNotTaken(crd *apiextensionsv1.CustomResourceDefinition, existing []apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	if crd == nil {
		return nil
	}
	resources := map[string]string{} // name -> CRD using it
	kinds := map[string]string{}
	for i := range existing {
		other := &existing[i]
		if other.Name == crd.Name || other.Spec.Group != crd.Spec.Group {
			continue
		}
		names := other.Status.AcceptedNames
		if names.Plural == "" {
			names = other.Spec.Names
		}
		plural, singular, shortNames, kind, listKind := effectiveNames(&names)
		for _, r := range append([]string{plural, singular}, shortNames...) {
			if _, ok := resources[r]; r != "" && !ok {
				resources[r] = other.Name
			}
		}
		for _, k := range []string{kind, listKind} {
			if _, ok := kinds[k]; k != "" && !ok {
				kinds[k] = other.Name
			}
		}
	}

	var errs field.ErrorList
	p := field.NewPath("spec", "names")
	check := func(set map[string]string, fp *field.Path, value string) {
		if owner, ok := set[value]; ok && value != "" {
			errs = append(errs, field.Invalid(fp, value, fmt.Sprintf("is already in use by customresourcedefinition %q", owner)))
		}
	}
	plural, singular, shortNames, kind, listKind := effectiveNames(&crd.Spec.Names)
	check(resources, p.Child("plural"), plural)
	check(resources, p.Child("singular"), singular)
	for i, s := range shortNames {
		check(resources, p.Child("shortNames").Index(i), s)
	}
	check(kinds, p.Child("kind"), kind)
	check(kinds, p.Child("listKind"), listKind)
	return errs
}

// effectiveNames returns the names with singular and listKind defaulted.
func effectiveNames(n *apiextensionsv1.CustomResourceDefinitionNames) (plural, singular string, shortNames []string, kind, listKind string) {
	singular, listKind = n.Singular, n.ListKind
	if singular == "" {
		singular = strings.ToLower(n.Kind)
	}
	if listKind == "" && n.Kind != "" {
		listKind = n.Kind + "List"
	}
	return n.Plural, singular, n.ShortNames, n.Kind, listKind
}
