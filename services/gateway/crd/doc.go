// Package crd validates CustomResourceDefinition objects
// (apiextensions.platform.io/v1) against the v1 rules before they are
// persisted.
//
// Validate is the entry point used on create and update: it returns every
// violation it finds (never stopping at the first one) as a field.ErrorList,
// which the caller turns into a 422 Invalid Status. The field paths and
// messages follow the ones an upstream Kubernetes API server reports for the
// same mistakes, e.g.
//
//	spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields
//
// ValidateStructural checks only that an OpenAPI v3 schema is structural and
// is exported so the code serving custom resources can reuse it.
//
// ValidateNamesNotTaken is a separate check that needs the other stored CRDs
// and so is not part of Validate.
//
// It also serves custom objects: Prune, PruneNulls, Default and ValidateValue
// apply a version's structural schema to an object, and TypeConverter gives
// server-side apply the schema's list and map markers.
//
// CompileRules and Rules evaluate a version's x-kubernetes-validations (CEL)
// on objects, and Validate checks the rules of a definition being written,
// both with upstream's code: the validator of k8s.io/apiextensions-apiserver's
// apiserver/schema/cel on upstream's structural schema (Structural), the CEL
// environment of k8s.io/apiserver, and the cost accounting of its
// apis/apiextensions/validation.
//
// The rest builds on the apiextensions v1 Go types, k8s.io/apimachinery
// and kube-openapi (for TypeConverter's models, with ObjectMeta's taken from
// apiextensions' generated definitions).
package crd
