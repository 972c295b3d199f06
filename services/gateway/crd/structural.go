package crd

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// level says where a structural node sits, which decides the wording of a
// missing-type error and whether root-only rules apply.
type level int

const (
	rootLevel level = iota
	itemLevel
	fieldLevel
)

// schemaTypes are the OpenAPI v3 types a structural schema may use, sorted
// as they are listed in NotSupported errors.
var schemaTypes = []string{"array", "boolean", "integer", "number", "object", "string"}

// ValidateStructural returns the violations that make s a non-structural
// schema, with s treated as the root schema of a resource (an
// openAPIV3Schema). path is the path of s itself, e.g.
// spec.versions[0].schema.openAPIV3Schema.
//
// A structural schema
//   - specifies a non-empty type for every node outside of allOf, anyOf,
//     oneOf and not, except where x-kubernetes-int-or-string or
//     x-kubernetes-preserve-unknown-fields is true;
//   - is of type object at the root, restricts nothing in metadata but name
//     and generateName, and does not use additionalProperties at the root;
//   - has items (a single schema) for every array and never mixes
//     properties with additionalProperties;
//   - does not use $ref, $schema, id, definitions, dependencies,
//     patternProperties, additionalItems or uniqueItems: true;
//   - does not set type, default, title, description, nullable,
//     additionalProperties or x-kubernetes-* extensions inside allOf, anyOf,
//     oneOf and not (the int-or-string pattern anyOf: [{type: integer},
//     {type: string}], directly or as allOf[0], is the one exception), and
//     only restricts there fields and items that are also specified outside;
//   - uses x-kubernetes-list-type, x-kubernetes-list-map-keys and
//     x-kubernetes-map-type consistently.
//
// The result is deterministic: properties are visited in sorted order.
func ValidateStructural(s *apiextensionsv1.JSONSchemaProps, path *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	return validateStructuralNode(s, rootLevel, path)
}

// validateStructuralNode validates a node that is part of the structure of
// the schema (reached through properties, items and additionalProperties
// only) and everything below it.
func validateStructuralNode(s *apiextensionsv1.JSONSchemaProps, lvl level, p *field.Path) field.ErrorList {
	errs := validateKeywords(s, p)

	// type
	switch {
	case s.XEmbeddedResource && s.Type != "object":
		if s.Type == "" {
			errs = append(errs, field.Required(p.Child("type"), "must be object if x-kubernetes-embedded-resource is true"))
		} else {
			errs = append(errs, field.Invalid(p.Child("type"), s.Type, "must be object if x-kubernetes-embedded-resource is true"))
		}
	case typeMissing(s):
		switch lvl {
		case rootLevel:
			errs = append(errs, field.Required(p.Child("type"), "must not be empty at the root"))
		case itemLevel:
			errs = append(errs, field.Required(p.Child("type"), "must not be empty for specified array items"))
		default:
			errs = append(errs, field.Required(p.Child("type"), "must not be empty for specified object fields"))
		}
	}
	if lvl == rootLevel && s.Type != "" && s.Type != "object" {
		errs = append(errs, field.Invalid(p.Child("type"), s.Type, "must be object at the root"))
	}

	// items
	if s.Type == "array" && s.Items == nil {
		errs = append(errs, field.Required(p.Child("items"), "must be specified"))
	}
	if s.Items != nil && s.Items.Schema != nil {
		errs = append(errs, validateStructuralNode(s.Items.Schema, itemLevel, p.Child("items"))...)
	}

	// properties
	for _, k := range sortedKeys(s.Properties) {
		prop := s.Properties[k]
		errs = append(errs, validateStructuralNode(&prop, fieldLevel, p.Child("properties").Key(k))...)
	}

	// additionalProperties
	if ap := s.AdditionalProperties; ap != nil {
		if lvl == rootLevel {
			errs = append(errs, field.Forbidden(p.Child("additionalProperties"), "must not be used at the root"))
		}
		if len(s.Properties) > 0 && (!ap.Allows || ap.Schema != nil) {
			errs = append(errs, field.Forbidden(p.Child("additionalProperties"), "additionalProperties and properties are mutual exclusive"))
		}
		if s.XEmbeddedResource {
			errs = append(errs, field.Forbidden(p.Child("additionalProperties"), "must not be used if x-kubernetes-embedded-resource is set"))
		}
		if ap.Schema != nil {
			errs = append(errs, validateStructuralNode(ap.Schema, fieldLevel, p.Child("additionalProperties"))...)
		}
	}

	// Kubernetes extensions
	if s.XIntOrString && preservesUnknownFields(s) {
		errs = append(errs, field.Invalid(p.Child("x-kubernetes-preserve-unknown-fields"), true, "must be false if x-kubernetes-int-or-string is true"))
	}
	if s.XIntOrString && s.XEmbeddedResource {
		errs = append(errs, field.Invalid(p.Child("x-kubernetes-embedded-resource"), true, "must be false if x-kubernetes-int-or-string is true"))
	}
	if s.XEmbeddedResource && !preservesUnknownFields(s) && len(s.Properties) == 0 {
		errs = append(errs, field.Required(p.Child("properties"), "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"))
	}

	// apiVersion, kind and metadata of the resource (or of an embedded one)
	if lvl == rootLevel || s.XEmbeddedResource {
		errs = append(errs, validateResourceMeta(s, lvl == rootLevel, p)...)
	}

	errs = append(errs, validateListAndMapTypes(s, p)...)

	// value validations (allOf, anyOf, oneOf, not)
	skipAnyOf := isIntOrStringAnyOf(s.AnyOf)
	skipFirstAllOfAnyOf := len(s.AllOf) > 0 && isIntOrStringAnyOf(s.AllOf[0].AnyOf)
	errs = append(errs, validateJunctors(s, skipAnyOf, skipFirstAllOfAnyOf, p)...)
	errs = append(errs, validateCompletenessOfJunctors(s, s, p, p)...)
	return errs
}

// typeMissing reports whether a structural node lacks the type it needs.
func typeMissing(s *apiextensionsv1.JSONSchemaProps) bool {
	return s.Type == "" && !s.XIntOrString && !preservesUnknownFields(s) && !s.XEmbeddedResource
}

// preservesUnknownFields reports whether x-kubernetes-preserve-unknown-fields is true.
func preservesUnknownFields(s *apiextensionsv1.JSONSchemaProps) bool {
	return s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields
}

// validateKeywords checks the rules that apply to every node, structural or
// inside a value validation: unsupported JSON-schema keywords, the type name
// and the pattern.
func validateKeywords(s *apiextensionsv1.JSONSchemaProps, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Type == "null" {
		errs = append(errs, field.Forbidden(p.Child("type"), "type cannot be set to null, use nullable as an alternative"))
	} else if s.Type != "" && !contains(schemaTypes, s.Type) {
		errs = append(errs, field.NotSupported(p.Child("type"), s.Type, schemaTypes))
	}
	if s.ID != "" {
		errs = append(errs, field.Forbidden(p.Child("id"), "id is not supported"))
	}
	if s.Schema != "" {
		errs = append(errs, field.Forbidden(p.Child("$schema"), "$schema is not supported"))
	}
	if s.Ref != nil {
		errs = append(errs, field.Forbidden(p.Child("$ref"), "$ref is not supported"))
	}
	if len(s.Definitions) != 0 {
		errs = append(errs, field.Forbidden(p.Child("definitions"), "definitions is not supported"))
	}
	if len(s.Dependencies) != 0 {
		errs = append(errs, field.Forbidden(p.Child("dependencies"), "dependencies is not supported"))
	}
	if len(s.PatternProperties) != 0 {
		errs = append(errs, field.Forbidden(p.Child("patternProperties"), "patternProperties is not supported"))
	}
	if s.AdditionalItems != nil {
		errs = append(errs, field.Forbidden(p.Child("additionalItems"), "additionalItems is not supported"))
	}
	if s.Items != nil && len(s.Items.JSONSchemas) != 0 {
		errs = append(errs, field.Forbidden(p.Child("items"), "items must be a schema object and not an array"))
	}
	if s.UniqueItems {
		errs = append(errs, field.Forbidden(p.Child("uniqueItems"), "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"))
	}
	if s.XPreserveUnknownFields != nil && !*s.XPreserveUnknownFields {
		errs = append(errs, field.Invalid(p.Child("x-kubernetes-preserve-unknown-fields"), false, "must be true or undefined"))
	}
	if s.Pattern != "" {
		if _, err := regexp.Compile(s.Pattern); err != nil {
			errs = append(errs, field.Invalid(p.Child("pattern"), s.Pattern, fmt.Sprintf("must be a valid regular expression, but isn't: %v", err)))
		}
	}
	return errs
}

// validateResourceMeta checks the apiVersion, kind and metadata properties of
// a resource root (or of an x-kubernetes-embedded-resource). At the very root
// metadata may restrict nothing but name and generateName.
func validateResourceMeta(s *apiextensionsv1.JSONSchemaProps, root bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	props := p.Child("properties")
	for _, k := range []string{"apiVersion", "kind"} {
		if prop, ok := s.Properties[k]; ok && prop.Type != "string" && !typeMissing(&prop) {
			errs = append(errs, field.Invalid(props.Key(k).Child("type"), prop.Type, "must be string"))
		}
	}
	meta, ok := s.Properties["metadata"]
	if !ok {
		return errs
	}
	if meta.Type != "object" && !typeMissing(&meta) {
		errs = append(errs, field.Invalid(props.Key("metadata").Child("type"), meta.Type, "must be object"))
	}
	if root && !restrictsOnlyNames(meta) {
		errs = append(errs, field.Forbidden(props.Key("metadata"), "must not specify anything other than name and generateName, but metadata is implicitly specified"))
	}
	return errs
}

// restrictsOnlyNames reports whether the root metadata schema specifies
// nothing besides its type, a default (rejected elsewhere) and schemas for
// name and/or generateName.
func restrictsOnlyNames(meta apiextensionsv1.JSONSchemaProps) bool {
	meta.Type = ""
	meta.Default = nil
	onlyNames := len(meta.Properties) > 0
	for k := range meta.Properties {
		if k != "name" && k != "generateName" {
			onlyNames = false
		}
	}
	if onlyNames {
		meta.Properties = nil
	}
	b, err := json.Marshal(&meta)
	return err == nil && string(b) == "{}"
}

// validateListAndMapTypes checks x-kubernetes-list-type,
// x-kubernetes-list-map-keys and x-kubernetes-map-type of a structural node.
func validateListAndMapTypes(s *apiextensionsv1.JSONSchemaProps, p *field.Path) field.ErrorList {
	var errs field.ErrorList

	if s.XMapType != nil {
		if s.Type == "" {
			errs = append(errs, field.Required(p.Child("type"), "must be object if x-kubernetes-map-type is specified"))
		} else if s.Type != "object" {
			errs = append(errs, field.Invalid(p.Child("type"), s.Type, "must be object if x-kubernetes-map-type is specified"))
		}
		if mt := *s.XMapType; mt != "atomic" && mt != "granular" {
			errs = append(errs, field.NotSupported(p.Child("x-kubernetes-map-type"), mt, []string{"atomic", "granular"}))
		}
	}

	if len(s.XListMapKeys) > 0 {
		if s.XListType == nil {
			errs = append(errs, field.Required(p.Child("x-kubernetes-list-type"), "must be map if x-kubernetes-list-map-keys is non-empty"))
		} else if *s.XListType != "map" {
			errs = append(errs, field.Invalid(p.Child("x-kubernetes-list-type"), *s.XListType, "must be map if x-kubernetes-list-map-keys is non-empty"))
		}
	}

	if s.XListType == nil {
		return errs
	}
	lt := *s.XListType
	if s.Type == "" {
		errs = append(errs, field.Required(p.Child("type"), "must be array if x-kubernetes-list-type is specified"))
	} else if s.Type != "array" {
		errs = append(errs, field.Invalid(p.Child("type"), s.Type, "must be array if x-kubernetes-list-type is specified"))
	}
	if lt != "atomic" && lt != "set" && lt != "map" {
		errs = append(errs, field.NotSupported(p.Child("x-kubernetes-list-type"), lt, []string{"atomic", "set", "map"}))
	}

	var items *apiextensionsv1.JSONSchemaProps
	if s.Items != nil {
		items = s.Items.Schema
	}
	itemsPath := p.Child("items")

	if (lt == "set" || lt == "map") && items != nil && items.Nullable {
		errs = append(errs, field.Forbidden(itemsPath.Child("nullable"), "cannot be nullable when x-kubernetes-list-type is "+lt))
	}

	switch lt {
	case "set":
		if items == nil {
			break
		}
		switch items.Type {
		case "array":
			if items.XListType != nil && *items.XListType != "atomic" {
				errs = append(errs, field.Invalid(itemsPath.Child("x-kubernetes-list-type"), *items.XListType, "must be atomic as item of a list with x-kubernetes-list-type=set"))
			}
		case "object":
			if items.XMapType == nil || *items.XMapType != "atomic" {
				var mt interface{}
				if items.XMapType != nil {
					mt = *items.XMapType
				}
				errs = append(errs, field.Invalid(itemsPath.Child("x-kubernetes-map-type"), mt, "must be atomic as item of a list with x-kubernetes-list-type=set"))
			}
		}
	case "map":
		keysPath := p.Child("x-kubernetes-list-map-keys")
		if len(s.XListMapKeys) == 0 {
			errs = append(errs, field.Required(keysPath, "must not be empty if x-kubernetes-list-type is map"))
		}
		if s.Items == nil && s.Type != "array" {
			// for arrays the missing items were already reported
			errs = append(errs, field.Required(itemsPath, "must have a schema if x-kubernetes-list-type is map"))
		}
		if items == nil {
			break
		}
		if items.Type != "object" {
			errs = append(errs, field.Invalid(itemsPath.Child("type"), items.Type, "must be object if parent array's x-kubernetes-list-type is map"))
			break
		}
		required := map[string]bool{}
		for _, r := range items.Required {
			required[r] = true
		}
		seen := map[string]bool{}
		unknownReported, duplicateReported := false, false
		for _, k := range s.XListMapKeys {
			if seen[k] && !duplicateReported {
				errs = append(errs, field.Invalid(keysPath, s.XListMapKeys, "must not contain duplicate entries"))
				duplicateReported = true
			}
			if seen[k] {
				continue
			}
			seen[k] = true
			prop, ok := items.Properties[k]
			if !ok {
				if !unknownReported {
					errs = append(errs, field.Invalid(keysPath, s.XListMapKeys, "entries must all be names of item properties"))
					unknownReported = true
				}
				continue
			}
			propPath := itemsPath.Child("properties").Key(k)
			if prop.Type == "array" || prop.Type == "object" {
				errs = append(errs, field.Invalid(propPath.Child("type"), prop.Type, "must be a scalar type if parent array's x-kubernetes-list-type is map"))
			}
			if !required[k] && prop.Default == nil {
				errs = append(errs, field.Required(propPath.Child("default"), "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"))
			}
			if prop.Nullable {
				errs = append(errs, field.Forbidden(propPath.Child("nullable"), "this property is in x-kubernetes-list-map-keys, so it cannot be nullable"))
			}
		}
	}
	return errs
}

// intOrStringAnyOf is the one anyOf that may specify types: the expansion of
// x-kubernetes-int-or-string.
var intOrStringAnyOf = []apiextensionsv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}}

// isIntOrStringAnyOf reports whether anyOf is exactly [{type: integer}, {type: string}].
func isIntOrStringAnyOf(anyOf []apiextensionsv1.JSONSchemaProps) bool {
	return len(anyOf) == 2 && reflect.DeepEqual(anyOf, intOrStringAnyOf)
}

// validateJunctors validates the allOf, anyOf, oneOf and not of s.
func validateJunctors(s *apiextensionsv1.JSONSchemaProps, skipAnyOf, skipFirstAllOfAnyOf bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range s.AllOf {
		errs = append(errs, validateValueValidation(&s.AllOf[i], i == 0 && skipFirstAllOfAnyOf, p.Child("allOf").Index(i))...)
	}
	if !skipAnyOf {
		for i := range s.AnyOf {
			errs = append(errs, validateValueValidation(&s.AnyOf[i], false, p.Child("anyOf").Index(i))...)
		}
	}
	for i := range s.OneOf {
		errs = append(errs, validateValueValidation(&s.OneOf[i], false, p.Child("oneOf").Index(i))...)
	}
	if s.Not != nil {
		errs = append(errs, validateValueValidation(s.Not, false, p.Child("not"))...)
	}
	return errs
}

// validateValueValidation validates a node inside allOf, anyOf, oneOf or not:
// it may only validate values, never change the structure of the schema.
func validateValueValidation(v *apiextensionsv1.JSONSchemaProps, skipAnyOf bool, p *field.Path) field.ErrorList {
	errs := validateKeywords(v, p)

	mustBe := func(name, detail string) {
		errs = append(errs, field.Forbidden(p.Child(name), detail))
	}
	if v.Type != "" {
		mustBe("type", "must be empty to be structural")
	}
	if v.AdditionalProperties != nil {
		mustBe("additionalProperties", "must be undefined to be structural")
	}
	if v.Default != nil {
		mustBe("default", "must be undefined to be structural")
	}
	if v.Title != "" {
		mustBe("title", "must be empty to be structural")
	}
	if v.Description != "" {
		mustBe("description", "must be empty to be structural")
	}
	if v.Nullable {
		mustBe("nullable", "must be false to be structural")
	}
	if preservesUnknownFields(v) {
		mustBe("x-kubernetes-preserve-unknown-fields", "must be false to be structural")
	}
	if v.XEmbeddedResource {
		mustBe("x-kubernetes-embedded-resource", "must be false to be structural")
	}
	if v.XIntOrString {
		mustBe("x-kubernetes-int-or-string", "must be false to be structural")
	}
	if len(v.XListMapKeys) > 0 {
		mustBe("x-kubernetes-list-map-keys", "must be empty to be structural")
	}
	if v.XListType != nil {
		mustBe("x-kubernetes-list-type", "must be undefined to be structural")
	}
	if v.XMapType != nil {
		mustBe("x-kubernetes-map-type", "must be undefined to be structural")
	}
	if len(v.XValidations) > 0 {
		mustBe("x-kubernetes-validations", "must be empty to be structural")
	}
	if _, ok := v.Properties["metadata"]; ok {
		errs = append(errs, field.Forbidden(p.Child("properties").Key("metadata"), "must not be specified in a nested context"))
	}

	if v.Items != nil && v.Items.Schema != nil {
		errs = append(errs, validateValueValidation(v.Items.Schema, false, p.Child("items"))...)
	}
	for _, k := range sortedKeys(v.Properties) {
		prop := v.Properties[k]
		errs = append(errs, validateValueValidation(&prop, false, p.Child("properties").Key(k))...)
	}
	errs = append(errs, validateJunctors(v, skipAnyOf, false, p)...)
	return errs
}

// validateCompletenessOfJunctors checks that every property and items that
// the value validations of v restrict are also specified in the structural
// node s (sPath) that v (vPath) applies to.
func validateCompletenessOfJunctors(v, s *apiextensionsv1.JSONSchemaProps, sPath, vPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range v.AllOf {
		errs = append(errs, validateCompleteness(&v.AllOf[i], s, sPath, vPath.Child("allOf").Index(i))...)
	}
	for i := range v.AnyOf {
		errs = append(errs, validateCompleteness(&v.AnyOf[i], s, sPath, vPath.Child("anyOf").Index(i))...)
	}
	for i := range v.OneOf {
		errs = append(errs, validateCompleteness(&v.OneOf[i], s, sPath, vPath.Child("oneOf").Index(i))...)
	}
	if v.Not != nil {
		errs = append(errs, validateCompleteness(v.Not, s, sPath, vPath.Child("not"))...)
	}
	return errs
}

// validateCompleteness checks one value validation v (at vPath) against the
// structural node s (at sPath) it applies to.
func validateCompleteness(v, s *apiextensionsv1.JSONSchemaProps, sPath, vPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range sortedKeys(v.Properties) {
		vp := v.Properties[k]
		sp, ok := s.Properties[k]
		if !ok {
			errs = append(errs, field.Required(sPath.Child("properties").Key(k), "because it is defined in "+vPath.Child("properties").Key(k).String()))
			continue
		}
		errs = append(errs, validateCompleteness(&vp, &sp, sPath.Child("properties").Key(k), vPath.Child("properties").Key(k))...)
	}
	if v.Items != nil && v.Items.Schema != nil {
		if s.Items == nil || s.Items.Schema == nil {
			errs = append(errs, field.Required(sPath.Child("items"), "because it is defined in "+vPath.Child("items").String()))
		} else {
			errs = append(errs, validateCompleteness(v.Items.Schema, s.Items.Schema, sPath.Child("items"), vPath.Child("items"))...)
		}
	}
	errs = append(errs, validateCompletenessOfJunctors(v, s, sPath, vPath)...)
	return errs
}

// sortedKeys returns the keys of m in sorted order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// contains reports whether list holds s.
func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
