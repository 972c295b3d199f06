package crd

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	// v1Schema is the path of the storage version's schema in validCRD.
	v1Schema = "spec.versions[1].schema.openAPIV3Schema"
	// specProps is the path of the properties of .spec in that schema.
	specProps = v1Schema + ".properties[spec].properties"
)

type crdMutation func(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition)

// testCase is one Validate case: mutate a copy of the valid CRD (and,
// for updates, derive the old object from the unmodified copy) and expect
// exactly the listed errors.
type testCase struct {
	name   string
	mutate crdMutation
	// update, when set, validates as an update whose old object is the
	// valid CRD after oldMutate (if any).
	update    bool
	oldMutate crdMutation
	want      []want
}

func runCases(t *testing.T, cases []testCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			crd := validCRD(t)
			var old *apiextensionsv1.CustomResourceDefinition
			if tc.update {
				old = validCRD(t)
				if tc.oldMutate != nil {
					tc.oldMutate(t, old)
				}
			}
			if tc.mutate != nil {
				tc.mutate(t, crd)
			}
			assertErrors(t, Validate(crd, old), tc.want...)
		})
	}
}

func TestValidateValidCRD(t *testing.T) {
	crd := validCRD(t)
	if errs := Validate(crd, nil); len(errs) != 0 {
		t.Fatalf("valid CRD on create: unexpected errors:\n  %s", errorLines(errs))
	}
	if errs := Validate(crd, validCRD(t)); len(errs) != 0 {
		t.Fatalf("valid CRD on update: unexpected errors:\n  %s", errorLines(errs))
	}
	// Fields left for defaulting are tolerated.
	crd.Spec.Names.Singular = ""
	crd.Spec.Names.ListKind = ""
	crd.Spec.Conversion = nil
	if errs := Validate(crd, nil); len(errs) != 0 {
		t.Fatalf("CRD before defaulting: unexpected errors:\n  %s", errorLines(errs))
	}
}

func TestValidateNilCRD(t *testing.T) {
	if errs := Validate(nil, nil); len(errs) == 0 {
		t.Fatal("nil CRD must be reported")
	}
}

func TestValidateMetadataAndNames(t *testing.T) {
	runCases(t, []testCase{
		{name: "name must be plural.group",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Name = "gadgets.example.com"
			},
			want: []want{invalid("metadata.name").with(`must be spec.names.plural+"."+spec.group`)}},
		{name: "name required",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Name = "" },
			want:   []want{required("metadata.name")}},
		{name: "group needs a dot",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Group = "example"
				c.Name = "widgets.example"
			},
			want: []want{invalid("spec.group").with("should be a domain with at least one dot")}},
		{name: "group must be a DNS subdomain",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Group = "Example.io"
				c.Name = "widgets.Example.io"
			},
			want: []want{invalid("spec.group"), invalid("metadata.name").with("RFC 1123")}},
		{name: "group required",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Group = "" },
			want:   []want{required("spec.group"), invalid("metadata.name")}},
		{name: "plural required",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Names.Plural = "" },
			want:   []want{required("spec.names.plural"), invalid("metadata.name")}},
		{name: "plural must be a lowercase DNS-1035 label",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Names.Plural = "Widgets"
				c.Name = "widgets.example.com"
			},
			want: []want{invalid("spec.names.plural").with("DNS-1035 label"), invalid("metadata.name")}},
		{name: "singular must be a DNS-1035 label",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Names.Singular = "wid_get" },
			want:   []want{invalid("spec.names.singular")}},
		{name: "kind required",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Names.Kind = "" },
			want:   []want{required("spec.names.kind")}},
		{name: "kind must be a label after lowercasing",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Names.Kind = "9Widget" },
			want:   []want{invalid("spec.names.kind").with("may have mixed case, but should otherwise match")}},
		{name: "listKind must be a label after lowercasing",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Names.ListKind = "Widget List" },
			want:   []want{invalid("spec.names.listKind")}},
		{name: "kind and listKind differ",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Names.ListKind = "Widget" },
			want:   []want{invalid("spec.names.listKind").with("kind and listKind may not be the same")}},
		{name: "shortNames and categories are DNS-1035 labels",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Names.ShortNames = []string{"wd", "W"}
				c.Spec.Names.Categories = []string{"all things"}
			},
			want: []want{invalid("spec.names.shortNames[1]"), invalid("spec.names.categories[0]")}},
		{name: "status.acceptedNames are checked too",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Status.AcceptedNames = apiextensionsv1.CustomResourceDefinitionNames{Plural: "Widgets", Kind: "Widget"}
			},
			want: []want{invalid("status.acceptedNames.plural")}},
	})
}

func TestValidateScopeAndVersions(t *testing.T) {
	runCases(t, []testCase{
		{name: "scope required",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Scope = "" },
			want:   []want{required("spec.scope")}},
		{name: "scope must be Namespaced or Cluster",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Scope = "Global" },
			want:   []want{notSupported("spec.scope").with(`supported values: "Cluster", "Namespaced"`)}},
		{name: "versions required",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Versions = nil
				c.Status.StoredVersions = nil
			},
			want: []want{required("spec.versions")}},
		{name: "version names unique",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Name = "v1" },
			want:   []want{invalid("spec.versions").with("must contain unique version names")}},
		{name: "version name is a DNS-1035 label",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Name = "V1beta1" },
			want:   []want{invalid("spec.versions[0].name")}},
		{name: "version name required",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Name = "" },
			want:   []want{required("spec.versions[0].name")}},
		{name: "two storage versions",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Storage = true },
			want:   []want{invalid("spec.versions").with("must have exactly one version marked as storage version")}},
		{name: "no storage version",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[1].Storage = false },
			want:   []want{invalid("spec.versions").with("must have exactly one version marked as storage version")}},
		{name: "no served version",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Versions[0].Served = false
				c.Spec.Versions[1].Served = false
			},
			want: []want{invalid("spec.versions").with("must have at least one version marked as served")}},
		{name: "preserveUnknownFields true",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.PreserveUnknownFields = true },
			want:   []want{invalid("spec.preserveUnknownFields").with("cannot set to true")}},
		{name: "preserveUnknownFields true kept on update of a CRD that had it",
			update:    true,
			oldMutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.PreserveUnknownFields = true },
			mutate:    func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.PreserveUnknownFields = true },
		},
		{name: "preserveUnknownFields switched to true on update",
			update: true,
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.PreserveUnknownFields = true },
			want:   []want{invalid("spec.preserveUnknownFields")}},
		{name: "schema required for every version",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Schema = nil },
			want:   []want{required("spec.versions[0].schema.openAPIV3Schema").with("schemas are required")}},
		{name: "deprecationWarning only for deprecated versions",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Deprecated = false },
			want:   []want{invalid("spec.versions[0].deprecationWarning")}},
	})
}

func TestValidateStructuralSchemaRules(t *testing.T) {
	edit := func(path string, f func(*apiextensionsv1.JSONSchemaProps)) crdMutation {
		return func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { editV1(t, c, path, f) }
	}
	runCases(t, []testCase{
		{name: "node without type",
			mutate: edit("spec.size", func(s *apiextensionsv1.JSONSchemaProps) { s.Type = "" }),
			want:   []want{required(specProps + "[size].type").with("must not be empty for specified object fields")}},
		{name: "array item without type",
			mutate: edit("spec.tags", func(s *apiextensionsv1.JSONSchemaProps) { s.Items.Schema.Type = "" }),
			want:   []want{required(specProps + "[tags].items.type").with("must not be empty for specified array items")}},
		{name: "root without type",
			mutate: edit("", func(s *apiextensionsv1.JSONSchemaProps) { s.Type = "" }),
			want:   []want{required(v1Schema + ".type").with("must not be empty at the root")}},
		{name: "root must be object",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				rootSchema(c, 0).Type = "string"
				rootSchema(c, 0).XPreserveUnknownFields = nil
			},
			want: []want{invalid("spec.versions[0].schema.openAPIV3Schema.type").with("must be object at the root")}},
		{name: "unknown type",
			mutate: edit("spec.size", func(s *apiextensionsv1.JSONSchemaProps) { s.Type = "strin" }),
			want:   []want{notSupported(specProps + "[size].type")}},
		{name: "type null",
			mutate: edit("spec.size", func(s *apiextensionsv1.JSONSchemaProps) { s.Type = "null" }),
			want:   []want{forbidden(specProps + "[size].type").with("use nullable")}},
		{name: "array without items",
			mutate: edit("spec.tags", func(s *apiextensionsv1.JSONSchemaProps) { s.Items = nil }),
			want:   []want{required(specProps + "[tags].items").with("must be specified")}},
		{name: "items as a list",
			mutate: edit("spec.tags", func(s *apiextensionsv1.JSONSchemaProps) {
				s.Items = &apiextensionsv1.JSONSchemaPropsOrArray{JSONSchemas: []apiextensionsv1.JSONSchemaProps{{Type: "string"}}}
			}),
			want: []want{forbidden(specProps + "[tags].items").with("items must be a schema object and not an array")}},
		{name: "properties and additionalProperties schema",
			mutate: edit("spec.selector", func(s *apiextensionsv1.JSONSchemaProps) {
				s.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}
			}),
			want: []want{forbidden(specProps + "[selector].additionalProperties").with("mutual exclusive")}},
		{name: "properties and additionalProperties false",
			mutate: edit("spec.selector", func(s *apiextensionsv1.JSONSchemaProps) {
				s.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: false}
			}),
			want: []want{forbidden(specProps + "[selector].additionalProperties")}},
		{name: "additionalProperties false without properties is allowed, as upstream",
			mutate: edit("spec.selector.matchLabels", func(s *apiextensionsv1.JSONSchemaProps) {
				s.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: false}
			})},
		{name: "additionalProperties at the root",
			mutate: edit("", func(s *apiextensionsv1.JSONSchemaProps) {
				s.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}
			}),
			want: []want{
				forbidden(v1Schema + ".additionalProperties").with("must not be used at the root"),
				forbidden(v1Schema + ".additionalProperties").with("mutual exclusive"),
			}},
		{name: "unsupported keywords",
			mutate: edit("spec.mode", func(s *apiextensionsv1.JSONSchemaProps) {
				s.Ref = ptr("#/definitions/x")
				s.Definitions = apiextensionsv1.JSONSchemaDefinitions{"x": {Type: "string"}}
				s.Dependencies = apiextensionsv1.JSONSchemaDependencies{"x": {Property: []string{"y"}}}
				s.ID = "mode"
				s.Schema = "http://json-schema.org/draft-04/schema#"
				s.PatternProperties = map[string]apiextensionsv1.JSONSchemaProps{"^x": {Type: "string"}}
				s.UniqueItems = true
				s.AdditionalItems = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true}
			}),
			want: []want{
				forbidden(specProps + "[mode].$ref"),
				forbidden(specProps + "[mode].definitions"),
				forbidden(specProps + "[mode].dependencies"),
				forbidden(specProps + "[mode].id"),
				forbidden(specProps + "[mode].$schema"),
				forbidden(specProps + "[mode].patternProperties"),
				forbidden(specProps + "[mode].uniqueItems").with("quadratic"),
				forbidden(specProps + "[mode].additionalItems"),
			}},
		{name: "invalid pattern",
			mutate: edit("spec.mode", func(s *apiextensionsv1.JSONSchemaProps) { s.Pattern = "([" }),
			want:   []want{invalid(specProps + "[mode].pattern").with("must be a valid regular expression")}},
		{name: "preserve-unknown-fields false",
			mutate: edit("spec.config", func(s *apiextensionsv1.JSONSchemaProps) { s.XPreserveUnknownFields = ptr(false) }),
			want:   []want{invalid(specProps + "[config].x-kubernetes-preserve-unknown-fields").with("must be true or undefined")}},
		{name: "value validation must not set structure",
			mutate: edit("spec.nested", func(s *apiextensionsv1.JSONSchemaProps) {
				v := &s.AllOf[0]
				v.Type = "object"
				v.Title = "t"
				v.Description = "d"
				v.Default = jsonValue(`{}`)
				v.Nullable = true
				v.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true}
				v.XPreserveUnknownFields = ptr(true)
				v.XEmbeddedResource = true
				v.XIntOrString = true
				v.XListType = ptr("atomic")
				v.XListMapKeys = []string{"a"}
				v.XMapType = ptr("atomic")
				v.XValidations = apiextensionsv1.ValidationRules{{Rule: "true"}}
			}),
			want: []want{
				forbidden(specProps + "[nested].allOf[0].type").with("must be empty to be structural"),
				forbidden(specProps + "[nested].allOf[0].title"),
				forbidden(specProps + "[nested].allOf[0].description"),
				forbidden(specProps + "[nested].allOf[0].default").with("must be undefined to be structural"),
				forbidden(specProps + "[nested].allOf[0].nullable").with("must be false to be structural"),
				forbidden(specProps + "[nested].allOf[0].additionalProperties"),
				forbidden(specProps + "[nested].allOf[0].x-kubernetes-preserve-unknown-fields"),
				forbidden(specProps + "[nested].allOf[0].x-kubernetes-embedded-resource"),
				forbidden(specProps + "[nested].allOf[0].x-kubernetes-int-or-string"),
				forbidden(specProps + "[nested].allOf[0].x-kubernetes-list-type"),
				forbidden(specProps + "[nested].allOf[0].x-kubernetes-list-map-keys"),
				forbidden(specProps + "[nested].allOf[0].x-kubernetes-map-type"),
				forbidden(specProps + "[nested].allOf[0].x-kubernetes-validations"),
			}},
		{name: "type deep inside oneOf/anyOf/not",
			mutate: edit("spec.mode", func(s *apiextensionsv1.JSONSchemaProps) {
				s.OneOf[1].Type = "string"
				s.AnyOf = []apiextensionsv1.JSONSchemaProps{{Not: &apiextensionsv1.JSONSchemaProps{Type: "string"}}}
			}),
			want: []want{
				forbidden(specProps + "[mode].oneOf[1].type"),
				forbidden(specProps + "[mode].anyOf[0].not.type"),
			}},
		{name: "value validation restricts an unspecified field",
			mutate: edit("spec.nested", func(s *apiextensionsv1.JSONSchemaProps) {
				s.AllOf[0].Properties["other"] = apiextensionsv1.JSONSchemaProps{MinLength: ptr(int64(1))}
			}),
			want: []want{required(specProps + "[nested].properties[other]").
				with("because it is defined in " + specProps + "[nested].allOf[0].properties[other]")}},
		{name: "value validation restricts unspecified items",
			mutate: edit("spec.mode", func(s *apiextensionsv1.JSONSchemaProps) {
				s.Not = &apiextensionsv1.JSONSchemaProps{Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{MinLength: ptr(int64(1))}}}
			}),
			want: []want{required(specProps + "[mode].items").with("because it is defined in " + specProps + "[mode].not.items")}},
		{name: "metadata inside value validation",
			mutate: edit("", func(s *apiextensionsv1.JSONSchemaProps) {
				s.AnyOf = []apiextensionsv1.JSONSchemaProps{{Properties: map[string]apiextensionsv1.JSONSchemaProps{"metadata": {}}}}
			}),
			want: []want{
				forbidden(v1Schema + ".anyOf[0].properties[metadata]").with("must not be specified in a nested context"),
				// anyOf is also not allowed at the root with the status subresource
				invalid(v1Schema).with(`Invalid value: "anyOf"`),
			}},
		{name: "int-or-string with other anyOf",
			mutate: edit("spec.port", func(s *apiextensionsv1.JSONSchemaProps) { s.AnyOf[1].Type = "boolean" }),
			want: []want{
				forbidden(specProps + "[port].anyOf[0].type"),
				forbidden(specProps + "[port].anyOf[1].type"),
			}},
		{name: "int-or-string as allOf[0].anyOf is allowed",
			mutate: edit("spec.port", func(s *apiextensionsv1.JSONSchemaProps) {
				s.AllOf = []apiextensionsv1.JSONSchemaProps{{AnyOf: s.AnyOf}, {MaxLength: ptr(int64(5))}}
				s.AnyOf = nil
			})},
		{name: "int-or-string with preserve-unknown-fields",
			mutate: edit("spec.port", func(s *apiextensionsv1.JSONSchemaProps) { s.XPreserveUnknownFields = ptr(true) }),
			want:   []want{invalid(specProps + "[port].x-kubernetes-preserve-unknown-fields").with("must be false if x-kubernetes-int-or-string is true")}},
		{name: "embedded resource without type",
			mutate: edit("spec.template", func(s *apiextensionsv1.JSONSchemaProps) { s.Type = "" }),
			want:   []want{required(specProps + "[template].type").with("must be object if x-kubernetes-embedded-resource is true")}},
		{name: "metadata restricts more than name",
			mutate: edit("metadata", func(s *apiextensionsv1.JSONSchemaProps) {
				s.Properties["labels"] = apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}}
			}),
			want: []want{forbidden(v1Schema + ".properties[metadata]").with("must not specify anything other than name and generateName")}},
		{name: "metadata with a description",
			mutate: edit("metadata", func(s *apiextensionsv1.JSONSchemaProps) { s.Description = "meta" }),
			want:   []want{forbidden(v1Schema + ".properties[metadata]")}},
		{name: "metadata must be an object",
			mutate: edit("metadata", func(s *apiextensionsv1.JSONSchemaProps) { s.Type = "string" }),
			want:   []want{invalid(v1Schema + ".properties[metadata].type").with("must be object")}},
		{name: "kind must be a string",
			mutate: edit("kind", func(s *apiextensionsv1.JSONSchemaProps) { s.Type = "integer" }),
			want:   []want{invalid(v1Schema + ".properties[kind].type").with("must be string")}},
		{name: "nullable root",
			mutate: edit("", func(s *apiextensionsv1.JSONSchemaProps) { s.Nullable = true }),
			want:   []want{forbidden(v1Schema + ".nullable").with("nullable cannot be true at the root")}},
		{name: "root keyword not allowed with status subresource",
			mutate: edit("", func(s *apiextensionsv1.JSONSchemaProps) { s.MinProperties = ptr(int64(1)) }),
			want:   []want{invalid(v1Schema).with("fields are allowed at the root of the schema if the status subresource is enabled")}},
		{name: "root keyword allowed without status subresource",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				rootSchema(c, 0).MinProperties = ptr(int64(1))
			}},
	})
}

func TestValidateListAndMapTypes(t *testing.T) {
	edit := func(path string, f func(*apiextensionsv1.JSONSchemaProps)) crdMutation {
		return func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { editV1(t, c, path, f) }
	}
	runCases(t, []testCase{
		{name: "unknown list type",
			mutate: edit("spec.tags", func(s *apiextensionsv1.JSONSchemaProps) { s.XListType = ptr("bag") }),
			want:   []want{notSupported(specProps + "[tags].x-kubernetes-list-type").with(`"atomic", "set", "map"`)}},
		{name: "list type on an object",
			mutate: edit("spec.selector", func(s *apiextensionsv1.JSONSchemaProps) { s.XListType = ptr("atomic") }),
			want:   []want{invalid(specProps + "[selector].type").with("must be array if x-kubernetes-list-type is specified")}},
		{name: "map keys without list type map",
			mutate: edit("spec.tags", func(s *apiextensionsv1.JSONSchemaProps) { s.XListMapKeys = []string{"name"} }),
			want:   []want{invalid(specProps + "[tags].x-kubernetes-list-type").with("must be map if x-kubernetes-list-map-keys is non-empty")}},
		{name: "list type map without keys",
			mutate: edit("spec.ports", func(s *apiextensionsv1.JSONSchemaProps) { s.XListMapKeys = nil }),
			want:   []want{required(specProps + "[ports].x-kubernetes-list-map-keys")}},
		{name: "map key is not an item property",
			mutate: edit("spec.ports", func(s *apiextensionsv1.JSONSchemaProps) { s.XListMapKeys = []string{"name", "missing"} }),
			want:   []want{invalid(specProps + "[ports].x-kubernetes-list-map-keys").with("entries must all be names of item properties")}},
		{name: "map keys duplicated",
			mutate: edit("spec.ports", func(s *apiextensionsv1.JSONSchemaProps) { s.XListMapKeys = []string{"name", "name"} }),
			want:   []want{invalid(specProps + "[ports].x-kubernetes-list-map-keys").with("must not contain duplicate entries")}},
		{name: "map key neither required nor defaulted",
			mutate: edit("spec.ports", func(s *apiextensionsv1.JSONSchemaProps) {
				protocol := s.Items.Schema.Properties["protocol"]
				protocol.Default = nil
				s.Items.Schema.Properties["protocol"] = protocol
			}),
			want: []want{required(specProps + "[ports].items.properties[protocol].default").with("must have a default or be a required property")}},
		{name: "map key not scalar",
			mutate: edit("spec.ports", func(s *apiextensionsv1.JSONSchemaProps) {
				s.Items.Schema.Properties["name"] = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}
			}),
			want: []want{invalid(specProps + "[ports].items.properties[name].type").with("must be a scalar type")}},
		{name: "map key nullable",
			mutate: edit("spec.ports", func(s *apiextensionsv1.JSONSchemaProps) {
				s.Items.Schema.Properties["name"] = apiextensionsv1.JSONSchemaProps{Type: "string", Nullable: true}
			}),
			want: []want{forbidden(specProps + "[ports].items.properties[name].nullable")}},
		{name: "list type map with scalar items",
			mutate: edit("spec.tags", func(s *apiextensionsv1.JSONSchemaProps) {
				s.XListType = ptr("map")
				s.XListMapKeys = []string{"name"}
			}),
			want: []want{invalid(specProps + "[tags].items.type").with("must be object if parent array's x-kubernetes-list-type is map")}},
		{name: "set of non-atomic objects",
			mutate: edit("spec.tags", func(s *apiextensionsv1.JSONSchemaProps) {
				s.Items.Schema = &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}
			}),
			want: []want{invalid(specProps + "[tags].items.x-kubernetes-map-type").with("must be atomic as item of a list with x-kubernetes-list-type=set")}},
		{name: "set of atomic objects is fine",
			mutate: edit("spec.tags", func(s *apiextensionsv1.JSONSchemaProps) {
				s.Items.Schema = &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true), XMapType: ptr("atomic")}
			})},
		{name: "set of non-atomic lists",
			mutate: edit("spec.tags", func(s *apiextensionsv1.JSONSchemaProps) {
				s.Items.Schema = &apiextensionsv1.JSONSchemaProps{Type: "array", XListType: ptr("set"),
					Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}}
			}),
			want: []want{invalid(specProps + "[tags].items.x-kubernetes-list-type")}},
		{name: "unknown map type",
			mutate: edit("spec.selector", func(s *apiextensionsv1.JSONSchemaProps) { s.XMapType = ptr("deep") }),
			want:   []want{notSupported(specProps + "[selector].x-kubernetes-map-type")}},
		{name: "map type on a string",
			mutate: edit("spec.size", func(s *apiextensionsv1.JSONSchemaProps) { s.XMapType = ptr("atomic") }),
			want:   []want{invalid(specProps + "[size].type").with("must be object if x-kubernetes-map-type is specified")}},
	})
}

func TestValidateDefaults(t *testing.T) {
	setDefault := func(path, raw string) crdMutation {
		return func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			editV1(t, c, path, func(s *apiextensionsv1.JSONSchemaProps) { s.Default = jsonValue(raw) })
		}
	}
	runCases(t, []testCase{
		{name: "string default for an integer",
			mutate: setDefault("spec.replicas", `"three"`),
			want:   []want{invalid(specProps + "[replicas].default").with(`Invalid value: "three": must be of type integer`)}},
		{name: "fractional default for an integer",
			mutate: setDefault("spec.replicas", `1.5`),
			want:   []want{invalid(specProps + "[replicas].default").with("must be of type integer")}},
		{name: "integral float default for an integer is fine",
			mutate: setDefault("spec.replicas", `2.0`)},
		{name: "default below minimum",
			mutate: setDefault("spec.replicas", `-1`),
			want:   []want{invalid(specProps + "[replicas].default").with("should be greater than or equal to 0")}},
		{name: "default outside enum",
			mutate: setDefault("spec.size", `"medium"`),
			want:   []want{notSupported(specProps + "[size].default").with(`supported values: "small", "large"`)}},
		{name: "default for int-or-string",
			mutate: setDefault("spec.port", `true`),
			want:   []want{invalid(specProps + "[port].default").with("must be of type integer or string")}},
		{name: "string default for int-or-string is fine",
			mutate: setDefault("spec.port", `"http"`)},
		{name: "nested value of an object default",
			mutate: setDefault("spec.nested", `{"deeper": {"value": "x"}}`),
			want:   []want{invalid(specProps + "[nested].default.deeper.value").with("must be of type number")}},
		{name: "object default with unknown fields",
			mutate: setDefault("spec.nested", `{"bogus": 1}`),
			want:   []want{invalid(specProps + "[nested].default").with("must not have unknown fields")}},
		{name: "default missing a required field",
			mutate: setDefault("spec", `{"replicas": 1}`),
			want:   []want{required(v1Schema + ".properties[spec].default.size")}},
		{name: "array default items",
			mutate: setDefault("spec.tags", `["a", 1]`),
			want:   []want{invalid(specProps + "[tags].default[1]").with("must be of type string")}},
		{name: "null inside a default for a non-nullable field",
			mutate: setDefault("spec.nested", `{"deeper": null}`),
			want:   []want{invalid(specProps + "[nested].default.deeper").with("Invalid value: \"null\": must be of type object")}},
		{name: "default longer than maxLength",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				editV1(t, c, "spec.mode", func(s *apiextensionsv1.JSONSchemaProps) {
					s.MaxLength = ptr(int64(3))
					s.Default = jsonValue(`"abcdef"`)
				})
			},
			want: []want{{typ: field.ErrorTypeTooLong, path: specProps + "[mode].default"}}},
		{name: "numeric enum compares by value",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				editV1(t, c, "spec.replicas", func(s *apiextensionsv1.JSONSchemaProps) {
					s.Enum = []apiextensionsv1.JSON{*jsonValue(`1`), *jsonValue(`2.0`)}
					s.Default = jsonValue(`2`)
				})
			}},
		{name: "numeric enum mismatch",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				editV1(t, c, "spec.replicas", func(s *apiextensionsv1.JSONSchemaProps) {
					s.Enum = []apiextensionsv1.JSON{*jsonValue(`1`), *jsonValue(`2`)}
					s.Default = jsonValue(`3`)
				})
			},
			want: []want{notSupported(specProps + "[replicas].default").with(`Unsupported value: 3: supported values: "1", "2"`)}},
		{name: "null default is ignored",
			mutate: setDefault("spec.replicas", `null`)},
		{name: "preserve-unknown-fields default takes anything",
			mutate: setDefault("spec.config", `{"anything": [1, "two"]}`)},
		{name: "default in top-level metadata",
			mutate: setDefault("metadata.name", `"w"`),
			want:   []want{forbidden(v1Schema + ".properties[metadata].properties[name].default").with("must not be set in top-level metadata")}},
		{name: "x-kubernetes-validations rule required",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				rootSchema(c, 1).XValidations[0].Rule = " "
			},
			want: []want{required(v1Schema + ".x-kubernetes-validations[0].rule")}},
	})
}

func TestValidateConversion(t *testing.T) {
	webhook := func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
		c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr("https://convert.example.com/widgets")},
				ConversionReviewVersions: []string{"v1"},
			},
		}
	}
	runCases(t, []testCase{
		{name: "webhook strategy is not supported here",
			mutate: webhook,
			want:   []want{notSupported("spec.conversion.strategy").with(`supported values: "None"`).with("only None")}},
		{name: "webhook strategy without webhook",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter}
			},
			want: []want{notSupported("spec.conversion.strategy"), required("spec.conversion.webhook")}},
		{name: "webhook without clientConfig and review versions",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				webhook(t, c)
				c.Spec.Conversion.Webhook.ClientConfig = nil
				c.Spec.Conversion.Webhook.ConversionReviewVersions = nil
			},
			want: []want{
				notSupported("spec.conversion.strategy"),
				required("spec.conversion.webhook.clientConfig"),
				required("spec.conversion.webhook.conversionReviewVersions"),
			}},
		{name: "webhook with a bad URL and unknown review versions",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				webhook(t, c)
				c.Spec.Conversion.Webhook.ClientConfig.URL = ptr("http://convert.example.com/?x=1")
				c.Spec.Conversion.Webhook.ConversionReviewVersions = []string{"v9"}
			},
			want: []want{
				notSupported("spec.conversion.strategy"),
				invalid("spec.conversion.webhook.clientConfig.url").with("'https' is the only allowed URL scheme"),
				invalid("spec.conversion.webhook.clientConfig.url").with("query parameters are not permitted"),
				invalid("spec.conversion.webhook.conversionReviewVersions").with("must include at least one of v1, v1beta1"),
			}},
		{name: "webhook service reference",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				webhook(t, c)
				c.Spec.Conversion.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{
					Service: &apiextensionsv1.ServiceReference{Port: ptr(int32(70000)), Path: ptr("convert")},
				}
			},
			want: []want{
				notSupported("spec.conversion.strategy"),
				required("spec.conversion.webhook.clientConfig.service.name"),
				required("spec.conversion.webhook.clientConfig.service.namespace"),
				invalid("spec.conversion.webhook.clientConfig.service.port"),
				invalid("spec.conversion.webhook.clientConfig.service.path"),
			}},
		{name: "webhook with both url and service",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				webhook(t, c)
				c.Spec.Conversion.Webhook.ClientConfig.Service = &apiextensionsv1.ServiceReference{Name: "conv", Namespace: "ns"}
			},
			want: []want{notSupported("spec.conversion.strategy"), required("spec.conversion.webhook.clientConfig").with("exactly one of url or service is required")}},
		{name: "webhook settings with strategy None",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				webhook(t, c)
				c.Spec.Conversion.Strategy = apiextensionsv1.NoneConverter
			},
			want: []want{forbidden("spec.conversion.webhook").with("should not be set when strategy is not set to Webhook")}},
		{name: "unknown strategy",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Conversion.Strategy = "Magic" },
			want:   []want{notSupported("spec.conversion.strategy").with(`"None", "Webhook"`)}},
	})
}

func TestValidatePrinterColumns(t *testing.T) {
	cols := "spec.versions[1].additionalPrinterColumns"
	runCases(t, []testCase{
		{name: "every column rule",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Versions[1].AdditionalPrinterColumns = []apiextensionsv1.CustomResourceColumnDefinition{
					{Name: "", Type: "string", JSONPath: ".spec.size"},
					{Name: "Size", Type: "string", JSONPath: ".spec.size"},
					{Name: "Size", Type: "string", JSONPath: ".spec.size"},
					{Name: "Bad", Type: "text", JSONPath: ".spec.size"},
					{Name: "NoType", JSONPath: ".spec.size"},
					{Name: "Format", Type: "integer", Format: "int8", JSONPath: ".spec.replicas"},
					{Name: "NoPath", Type: "string"},
					{Name: "RelPath", Type: "string", JSONPath: "spec.size"},
					{Name: "Priority", Type: "string", JSONPath: ".spec.size", Priority: -1},
				}
			},
			want: []want{
				required(cols + "[0].name"),
				duplicate(cols + "[2].name"),
				invalid(cols + "[3].type").with("must be one of boolean,date,integer,number,string"),
				required(cols + "[4].type"),
				invalid(cols + "[5].format").with("must be one of byte,date,date-time,double,float,int32,int64,password"),
				required(cols + "[6].jsonPath"),
				invalid(cols + "[7].jsonPath").with("must be a simple json path starting with ."),
				invalid(cols + "[8].priority"),
			}},
	})
}

func TestValidateSubresourcesAndSelectableFields(t *testing.T) {
	scale := "spec.versions[1].subresources.scale"
	sel := "spec.versions[1].selectableFields"
	runCases(t, []testCase{
		{name: "scale replicas paths required",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Versions[1].Subresources.Scale = &apiextensionsv1.CustomResourceSubresourceScale{}
			},
			want: []want{required(scale + ".specReplicasPath"), required(scale + ".statusReplicasPath")}},
		{name: "scale paths under the wrong parent",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Versions[1].Subresources.Scale = &apiextensionsv1.CustomResourceSubresourceScale{
					SpecReplicasPath:   ".status.replicas",
					StatusReplicasPath: ".spec.replicas",
					LabelSelectorPath:  ptr(".metadata.labels"),
				}
			},
			want: []want{
				invalid(scale + ".specReplicasPath").with("should be a json path under .spec"),
				invalid(scale + ".statusReplicasPath").with("should be a json path under .status"),
				invalid(scale + ".labelSelectorPath").with("should be a json path under either .spec or .status"),
			}},
		{name: "scale path not starting with a dot",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Versions[1].Subresources.Scale.LabelSelectorPath = ptr("status.selector")
			},
			want: []want{invalid(scale + ".labelSelectorPath").with("must be a simple json path starting with .")}},
		{name: "scale path to a non-integer field",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Versions[1].Subresources.Scale.SpecReplicasPath = ".spec.size"
			},
			want: []want{invalid(scale + ".specReplicasPath").with("must point to a field of type integer")}},
		{name: "scale path the schema does not define is left alone",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Versions[1].Subresources.Scale.SpecReplicasPath = ".spec.config.replicas"
			}},
		{name: "selectable fields",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Versions[1].SelectableFields = []apiextensionsv1.SelectableField{
					{JSONPath: ".spec.replicas"},
					{JSONPath: ".spec.config"},
					{JSONPath: ".metadata.name"},
					{JSONPath: ".spec.replicas"},
					{JSONPath: ""},
				}
			},
			want: []want{
				invalid(sel + "[1].jsonPath").with("must point to a field of type string, boolean or integer"),
				invalid(sel + "[2].jsonPath").with("must not point to fields in metadata"),
				duplicate(sel + "[3].jsonPath"),
				required(sel + "[4].jsonPath"),
			}},
		{name: "too many selectable fields",
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Versions[1].SelectableFields = nil
				editV1(t, c, "spec", func(s *apiextensionsv1.JSONSchemaProps) {
					s.Properties["enabled"] = apiextensionsv1.JSONSchemaProps{Type: "boolean"}
				})
				for _, p := range []string{".spec.size", ".spec.replicas", ".spec.mode", ".spec.enabled", ".status.replicas", ".status.selector", ".kind", ".apiVersion", ".spec.ports"} {
					c.Spec.Versions[1].SelectableFields = append(c.Spec.Versions[1].SelectableFields, apiextensionsv1.SelectableField{JSONPath: p})
				}
			},
			want: []want{tooMany(sel), invalid(sel + "[8].jsonPath")}},
	})
}

func TestValidateUpdate(t *testing.T) {
	runCases(t, []testCase{
		{name: "scope is immutable",
			update: true,
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Scope = apiextensionsv1.ClusterScoped
			},
			want: []want{invalid("spec.scope").with("field is immutable")}},
		{name: "group is immutable",
			update: true,
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Group = "other.example.com"
				c.Name = "widgets.other.example.com"
			},
			want: []want{invalid("spec.group").with("field is immutable")}},
		{name: "plural is immutable",
			update: true,
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Names.Plural = "gadgets"
				c.Name = "gadgets.example.com"
			},
			want: []want{invalid("spec.names.plural").with("field is immutable")}},
		{name: "kind may change",
			update: true,
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Names.Kind = "Gadget"
				c.Spec.Names.ListKind = "GadgetList"
			}},
		{name: "a stored version must stay in spec.versions",
			update: true,
			oldMutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Status.StoredVersions = []string{"v1beta1", "v1"}
			},
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Versions = c.Spec.Versions[1:]
				c.Status.StoredVersions = []string{"v1beta1", "v1"}
			},
			want: []want{invalid("status.storedVersions[0]").with("missing from spec.versions; v1beta1 was previously a storage version")}},
		{name: "stored versions come from the old object when the new one has none",
			update: true,
			oldMutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Status.StoredVersions = []string{"v1beta1", "v1"}
			},
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Versions = c.Spec.Versions[1:]
				c.Status.StoredVersions = nil
			},
			want: []want{invalid("status.storedVersions[0]")}},
		{name: "dropping a never-stored version is fine",
			update: true,
			mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions = c.Spec.Versions[1:] }},
	})
}

// TestValidateReportsEveryCause checks that independent violations are all
// reported together rather than stopping at the first.
func TestValidateReportsEveryCause(t *testing.T) {
	crd := validCRD(t)
	crd.Spec.Scope = ""
	crd.Spec.Versions[0].Storage = true
	editV1(t, crd, "spec.size", func(s *apiextensionsv1.JSONSchemaProps) { s.Type = "" })
	crd.Spec.PreserveUnknownFields = true
	editV1(t, crd, "spec.replicas", func(s *apiextensionsv1.JSONSchemaProps) { s.Default = jsonValue(`"three"`) })
	crd.Spec.Names.ShortNames = []string{"W"}
	crd.Spec.Versions[1].AdditionalPrinterColumns[0].Type = "text"

	errs := Validate(crd, nil)
	assertErrors(t, errs,
		required("spec.scope"),
		invalid("spec.versions").with("exactly one version marked as storage version"),
		required(specProps+"[size].type"),
		invalid("spec.preserveUnknownFields"),
		invalid(specProps+"[replicas].default").with("must be of type integer"),
		invalid("spec.names.shortNames[0]"),
		invalid("spec.versions[1].additionalPrinterColumns[0].type"),
	)

	// The list is what the caller puts into the Status causes; check the
	// exact rendering of two of them.
	rendered := errorLines(errs)
	for _, line := range []string{
		"spec.versions[1].schema.openAPIV3Schema.properties[spec].properties[size].type: Required value: must not be empty for specified object fields",
		`spec.versions[1].schema.openAPIV3Schema.properties[spec].properties[replicas].default: Invalid value: "three": must be of type integer`,
	} {
		if !strings.Contains(rendered, line) {
			t.Errorf("missing %q in:\n  %s", line, rendered)
		}
	}
}

// TestValidateDeterministic checks that repeated runs report the same list in
// the same order, despite map iteration.
func TestValidateDeterministic(t *testing.T) {
	crd := validCRD(t)
	for _, k := range []string{"size", "replicas", "mode", "config", "tags"} {
		editV1(t, crd, "spec."+k, func(s *apiextensionsv1.JSONSchemaProps) { s.Type = ""; s.XPreserveUnknownFields = nil })
	}
	first := errorLines(Validate(crd, nil))
	for i := 0; i < 20; i++ {
		if got := errorLines(Validate(crd, nil)); got != first {
			t.Fatalf("run %d differs:\n%s\nvs\n%s", i, got, first)
		}
	}
}

func TestValidateStructuralDirect(t *testing.T) {
	root := field.NewPath("schema")
	s := parseSchema(t, `
type: object
properties:
  a:
    properties:
      b: {type: string}
  c:
    type: array
  d:
    x-kubernetes-int-or-string: true
  e:
    x-kubernetes-preserve-unknown-fields: true
`)
	assertErrors(t, ValidateStructural(&s, root),
		required("schema.properties[a].type"),
		required("schema.properties[c].items"),
	)
	if errs := ValidateStructural(nil, root); len(errs) != 0 {
		t.Errorf("nil schema: %v", errs)
	}
}

func TestValidateNamesNotTaken(t *testing.T) {
	other := validCRD(t)
	other.Name = "gadgets.example.com"
	other.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList", ShortNames: []string{"wd"}}
	otherGroup := validCRD(t)
	otherGroup.Name = "widgets.other.example.com"
	otherGroup.Spec.Group = "other.example.com"
	self := validCRD(t)

	crd := validCRD(t)
	existing := []apiextensionsv1.CustomResourceDefinition{*other, *otherGroup, *self}
	assertErrors(t, ValidateNamesNotTaken(crd, existing),
		invalid("spec.names.shortNames[0]").with(`is already in use by customresourcedefinition "gadgets.example.com"`))

	crd.Spec.Names.Kind = "Gadget"
	crd.Spec.Names.ListKind = ""
	crd.Spec.Names.Singular = ""
	crd.Spec.Names.ShortNames = nil
	assertErrors(t, ValidateNamesNotTaken(crd, existing),
		invalid("spec.names.singular"), invalid("spec.names.kind"), invalid("spec.names.listKind"))

	// accepted names of the other CRD win over its spec
	other.Status.AcceptedNames = apiextensionsv1.CustomResourceDefinitionNames{Plural: "things", Kind: "Thing"}
	assertErrors(t, ValidateNamesNotTaken(crd, []apiextensionsv1.CustomResourceDefinition{*other}))

	if errs := ValidateNamesNotTaken(nil, existing); errs != nil {
		t.Errorf("nil CRD: %v", errs)
	}
}

// Definitions in the project's own groups (platform.io, and upstream's k8s.io and kubernetes.io)
// need the approval annotation, as upstream requires for k8s.io groups.
func TestValidateProtectedGroups(t *testing.T) {
	protected := func(annotation string) crdMutation {
		return func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Group = "tools.platform.io"
			c.Name = c.Spec.Names.Plural + ".tools.platform.io"
			if annotation != "" {
				c.Annotations = map[string]string{ApprovalAnnotation: annotation}
			}
		}
	}
	runCases(t, []testCase{
		{name: "missing", mutate: protected(""), want: []want{required("metadata.annotations[api-approved.kubernetes.io]")}},
		{name: "not a URL", mutate: protected("yes please"), want: []want{invalid("metadata.annotations[api-approved.kubernetes.io]")}},
		{name: "a URL", mutate: protected("https://example.com/designs/42")},
		{name: "unapproved", mutate: protected("unapproved, experimental")},
		{name: "k8s.io too", mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Group = "x.k8s.io"
			c.Name = c.Spec.Names.Plural + ".x.k8s.io"
		}, want: []want{required("metadata.annotations[api-approved.kubernetes.io]")}},
		{name: "a look-alike is not protected", mutate: func(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Group = "notplatform.io"
			c.Name = c.Spec.Names.Plural + ".notplatform.io"
		}},
		{name: "an unchanged annotation is kept on update", update: true,
			oldMutate: protected("yes please"), mutate: protected("yes please")},
	})
}
