package crd

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// validCRDYAML is a CRD that passes every rule: namespaced, two versions (one
// storage), nested objects, arrays with items, an int-or-string field, a
// preserve-unknown-fields subtree, an embedded resource, list-type set/map
// with keys, value validations, defaults, printer columns, selectable fields,
// and status and scale subresources.
const validCRDYAML = `
apiVersion: apiextensions.platform.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    listKind: WidgetList
    shortNames: [wd]
    categories: [all]
  conversion:
    strategy: None
  versions:
  - name: v1beta1
    served: true
    storage: false
    deprecated: true
    deprecationWarning: example.com/v1beta1 Widget is deprecated
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        description: A widget.
        x-kubernetes-validations:
        - rule: self.spec.replicas <= 100
          message: too many replicas
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata:
            type: object
            properties:
              name: {type: string, maxLength: 63}
          spec:
            type: object
            required: [size]
            properties:
              size: {type: string, enum: [small, large], default: small}
              replicas: {type: integer, minimum: 0, default: 1}
              port:
                x-kubernetes-int-or-string: true
                anyOf: [{type: integer}, {type: string}]
                default: 8080
              selector:
                type: object
                x-kubernetes-map-type: atomic
                properties:
                  matchLabels:
                    type: object
                    additionalProperties: {type: string}
              tags:
                type: array
                x-kubernetes-list-type: set
                items: {type: string}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name, protocol]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    protocol: {type: string, default: TCP}
                    port: {type: integer, format: int32}
              config:
                type: object
                x-kubernetes-preserve-unknown-fields: true
              template:
                type: object
                x-kubernetes-embedded-resource: true
                x-kubernetes-preserve-unknown-fields: true
              nested:
                type: object
                default: {deeper: {value: 2.5}}
                properties:
                  deeper:
                    type: object
                    properties:
                      value: {type: number, default: 1.5}
                allOf:
                - properties:
                    deeper:
                      properties:
                        value: {minimum: 0}
              mode:
                type: string
                oneOf:
                - pattern: "^a"
                - pattern: "^b"
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
              conditions:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [type]
                items:
                  type: object
                  required: [type, status]
                  properties:
                    type: {type: string}
                    status: {type: string}
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.selector
    additionalPrinterColumns:
    - name: Replicas
      type: integer
      jsonPath: .spec.replicas
    - name: Size
      type: string
      jsonPath: .spec.size
      priority: 1
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    selectableFields:
    - jsonPath: .spec.size
status:
  storedVersions: [v1]
`

// validCRD returns a fresh copy of the valid CRD.
func validCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(validCRDYAML), crd); err != nil {
		t.Fatalf("parsing the valid CRD: %v", err)
	}
	return crd
}

// parseSchema parses a JSONSchemaProps from YAML.
func parseSchema(t *testing.T, y string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	var s apiextensionsv1.JSONSchemaProps
	if err := yaml.UnmarshalStrict([]byte(y), &s); err != nil {
		t.Fatalf("parsing schema %q: %v", y, err)
	}
	return s
}

// rootSchema returns the openAPIV3Schema of spec.versions[i].
func rootSchema(crd *apiextensionsv1.CustomResourceDefinition, i int) *apiextensionsv1.JSONSchemaProps {
	return crd.Spec.Versions[i].Schema.OpenAPIV3Schema
}

// editProp applies f to the property reached from s through names (each a
// property name), writing the modified copies back into the maps.
func editProp(t *testing.T, s *apiextensionsv1.JSONSchemaProps, names []string, f func(*apiextensionsv1.JSONSchemaProps)) {
	t.Helper()
	if len(names) == 0 {
		f(s)
		return
	}
	prop, ok := s.Properties[names[0]]
	if !ok {
		t.Fatalf("no property %q", names[0])
	}
	editProp(t, &prop, names[1:], f)
	s.Properties[names[0]] = prop
}

// editV1 edits a property of the v1 (storage) schema; path is dotted, e.g. "spec.size".
func editV1(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, path string, f func(*apiextensionsv1.JSONSchemaProps)) {
	t.Helper()
	var names []string
	if path != "" {
		names = strings.Split(path, ".")
	}
	editProp(t, rootSchema(crd, 1), names, f)
}

// jsonValue returns a *JSON holding raw.
func jsonValue(raw string) *apiextensionsv1.JSON {
	return &apiextensionsv1.JSON{Raw: []byte(raw)}
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// want is one expected error: its type and field path, and optionally a
// substring of its message.
type want struct {
	typ     field.ErrorType
	path    string
	details []string
}

func required(path string) want     { return want{typ: field.ErrorTypeRequired, path: path} }
func invalid(path string) want      { return want{typ: field.ErrorTypeInvalid, path: path} }
func forbidden(path string) want    { return want{typ: field.ErrorTypeForbidden, path: path} }
func notSupported(path string) want { return want{typ: field.ErrorTypeNotSupported, path: path} }
func duplicate(path string) want    { return want{typ: field.ErrorTypeDuplicate, path: path} }
func tooMany(path string) want      { return want{typ: field.ErrorTypeTooMany, path: path} }

// with adds an expected message substring.
func (w want) with(detail string) want {
	w.details = append(append([]string(nil), w.details...), detail)
	return w
}

// assertErrors checks that got holds exactly the wanted errors (type and
// path, as a multiset) and that messages contain the wanted substrings.
func assertErrors(t *testing.T, got field.ErrorList, wants ...want) {
	t.Helper()
	key := func(typ field.ErrorType, path string) string { return fmt.Sprintf("%s %s", typ, path) }
	var gotKeys, wantKeys []string
	for _, e := range got {
		gotKeys = append(gotKeys, key(e.Type, e.Field))
	}
	for _, w := range wants {
		wantKeys = append(wantKeys, key(w.typ, w.path))
	}
	sort.Strings(gotKeys)
	sort.Strings(wantKeys)
	if strings.Join(gotKeys, "\n") != strings.Join(wantKeys, "\n") {
		t.Errorf("errors differ\n got:\n  %s\nwant:\n  %s\nfull errors:\n  %s",
			strings.Join(gotKeys, "\n  "), strings.Join(wantKeys, "\n  "), errorLines(got))
		return
	}
	for _, w := range wants {
		if len(w.details) == 0 {
			continue
		}
		found := false
		for _, e := range got {
			if e.Type != w.typ || e.Field != w.path {
				continue
			}
			all := true
			for _, d := range w.details {
				all = all && strings.Contains(e.Error(), d)
			}
			found = found || all
		}
		if !found {
			t.Errorf("no %s error at %s containing %q; got:\n  %s", w.typ, w.path, w.details, errorLines(got))
		}
	}
}

// errorLines renders errs one per line.
func errorLines(errs field.ErrorList) string {
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n  ")
}
