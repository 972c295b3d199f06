package crd

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
)

func typeInvalid(path string) want { return want{typ: field.ErrorTypeTypeInvalid, path: path} }
func tooLong(path string) want     { return want{typ: field.ErrorTypeTooLong, path: path} }

// valueTestSchema parses a root schema from YAML.
func valueTestSchema(t *testing.T, y string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	s := parseSchema(t, y)
	return &s
}

// specTestSchema returns a root schema whose .spec has the schema specYAML
// (a single YAML flow mapping or an indented block).
func specTestSchema(t *testing.T, specYAML string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	spec := parseSchema(t, specYAML)
	return &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"apiVersion": {Type: "string"},
			"kind":       {Type: "string"},
			"metadata":   {Type: "object"},
			"spec":       spec,
		},
	}
}

// decoders decode a JSON object like encoding/json (numbers as float64) and
// like upstream (sigs.k8s.io/json: integers as int64).
var decoders = []struct {
	name   string
	decode func([]byte, any) error
}{
	{"float64", json.Unmarshal},
	{"int64", sigsjson.UnmarshalCaseSensitivePreserveInts},
}

// decodeObject decodes a JSON object with decode.
func decodeObject(t *testing.T, decode func([]byte, any) error, js string) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := decode([]byte(js), &obj); err != nil {
		t.Fatalf("decoding %s: %v", js, err)
	}
	return obj
}

// mustJSON renders v as JSON (object keys sorted, 3 and 3.0 alike).
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshaling %#v: %v", v, err)
	}
	return string(b)
}

// sameJSON fails unless got renders as the same JSON as the object in want.
func sameJSON(t *testing.T, got map[string]any, want string) {
	t.Helper()
	var w map[string]any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad expected JSON %s: %v", want, err)
	}
	if g, w := mustJSON(t, got), mustJSON(t, w); g != w {
		t.Errorf("object differs\n got: %s\nwant: %s", g, w)
	}
}

// pruneSchemaYAML is the schema of most pruning cases.
const pruneSchemaYAML = `
type: object
properties:
  apiVersion: {type: string}
  kind: {type: string}
  metadata:
    type: object
    properties:
      name: {type: string}
  spec:
    type: object
    properties:
      replicas: {type: integer}
      list:
        type: array
        items:
          type: object
          properties:
            name: {type: string}
            nested:
              type: array
              items:
                type: object
                properties:
                  x: {type: integer}
      matrix:
        type: array
        items:
          type: array
          items:
            type: object
            properties:
              a: {type: string}
      labels:
        type: object
        additionalProperties:
          type: object
          properties:
            keep: {type: string}
      anyMap:
        type: object
        additionalProperties: true
      config:
        type: object
        x-kubernetes-preserve-unknown-fields: true
        properties:
          known:
            type: object
            properties:
              a: {type: string}
      preservedList:
        type: array
        x-kubernetes-preserve-unknown-fields: true
        items:
          type: object
          properties:
            a: {type: string}
      template:
        type: object
        x-kubernetes-embedded-resource: true
        properties:
          spec:
            type: object
            properties:
              image: {type: string}
      nested:
        type: object
        properties:
          x: {type: string}
  status:
    type: object
    properties:
      ready: {type: boolean}
`

func TestPrune(t *testing.T) {
	cases := []struct {
		name     string
		schema   string // root schema YAML; pruneSchemaYAML when empty
		obj      string
		want     string
		warnings []string
	}{{
		name: "nothing unknown",
		obj:  `{"apiVersion":"a/v1","kind":"K","metadata":{"name":"n"},"spec":{"replicas":1},"status":{"ready":true}}`,
		want: `{"apiVersion":"a/v1","kind":"K","metadata":{"name":"n"},"spec":{"replicas":1},"status":{"ready":true}}`,
	}, {
		name:     "unknown top-level and nested fields",
		obj:      `{"apiVersion":"a/v1","kind":"K","metadata":{"name":"n"},"extra":1,"spec":{"replicas":1,"foo":"x","bar":{"deep":true}},"status":{"ready":true,"zzz":null}}`,
		want:     `{"apiVersion":"a/v1","kind":"K","metadata":{"name":"n"},"spec":{"replicas":1},"status":{"ready":true}}`,
		warnings: []string{`unknown field "extra"`, `unknown field "spec.bar"`, `unknown field "spec.foo"`, `unknown field "status.zzz"`},
	}, {
		name: "root apiVersion, kind and metadata are kept as they are",
		obj:  `{"apiVersion":"a/v1","kind":"K","metadata":{"name":"n","labels":{"a":"b"},"unknownMeta":1}}`,
		want: `{"apiVersion":"a/v1","kind":"K","metadata":{"name":"n","labels":{"a":"b"},"unknownMeta":1}}`,
	}, {
		name:     "root metadata is kept even when the schema does not mention it",
		schema:   `{type: object, properties: {spec: {type: object}}}`,
		obj:      `{"apiVersion":"a/v1","kind":"K","metadata":{"name":"n"},"spec":{"a":1},"other":2}`,
		want:     `{"apiVersion":"a/v1","kind":"K","metadata":{"name":"n"},"spec":{}}`,
		warnings: []string{`unknown field "other"`, `unknown field "spec.a"`},
	}, {
		name:     "apiVersion, kind and metadata in a nested non-embedded object are pruned",
		obj:      `{"spec":{"nested":{"x":"1","apiVersion":"v1","kind":"K","metadata":{}}}}`,
		want:     `{"spec":{"nested":{"x":"1"}}}`,
		warnings: []string{`unknown field "spec.nested.apiVersion"`, `unknown field "spec.nested.kind"`, `unknown field "spec.nested.metadata"`},
	}, {
		name:     "arrays of objects",
		obj:      `{"spec":{"list":[{"name":"a","bar":1},{"name":"b"},{"bar":2,"baz":3,"nested":[{"x":1,"y":2}]}]}}`,
		want:     `{"spec":{"list":[{"name":"a"},{"name":"b"},{"nested":[{"x":1}]}]}}`,
		warnings: []string{`unknown field "spec.list[0].bar"`, `unknown field "spec.list[2].bar"`, `unknown field "spec.list[2].baz"`, `unknown field "spec.list[2].nested[0].y"`},
	}, {
		name:     "arrays of arrays",
		obj:      `{"spec":{"matrix":[[{"a":"x","b":1}],[],[{"c":2}]]}}`,
		want:     `{"spec":{"matrix":[[{"a":"x"}],[],[{}]]}}`,
		warnings: []string{`unknown field "spec.matrix[0][0].b"`, `unknown field "spec.matrix[2][0].c"`},
	}, {
		name:     "additionalProperties values are pruned with their schema",
		obj:      `{"spec":{"labels":{"one":{"keep":"k","drop":1},"two":{}}}}`,
		want:     `{"spec":{"labels":{"one":{"keep":"k"},"two":{}}}}`,
		warnings: []string{`unknown field "spec.labels.one.drop"`},
	}, {
		name:     "additionalProperties true keeps the keys but not the fields of object values",
		obj:      `{"spec":{"anyMap":{"a":1,"b":"s","c":{"x":1}}}}`,
		want:     `{"spec":{"anyMap":{"a":1,"b":"s","c":{}}}}`,
		warnings: []string{`unknown field "spec.anyMap.c.x"`},
	}, {
		name:     "preserve-unknown-fields keeps unknown fields but prunes specified ones",
		obj:      `{"spec":{"config":{"anything":{"goes":[1,{"x":2}]},"known":{"a":"1","b":2}}}}`,
		want:     `{"spec":{"config":{"anything":{"goes":[1,{"x":2}]},"known":{"a":"1"}}}}`,
		warnings: []string{`unknown field "spec.config.known.b"`},
	}, {
		name: "items of a preserving array preserve unknown fields",
		obj:  `{"spec":{"preservedList":[{"a":"x","b":1}]}}`,
		want: `{"spec":{"preservedList":[{"a":"x","b":1}]}}`,
	}, {
		name:   "preserve-unknown-fields at the root",
		schema: `{type: object, x-kubernetes-preserve-unknown-fields: true, properties: {spec: {type: object, properties: {a: {type: string}}}}}`,
		obj:    `{"apiVersion":"a/v1","kind":"K","metadata":{},"anything":{"x":1},"spec":{"a":"1","b":2}}`,
		want:   `{"apiVersion":"a/v1","kind":"K","metadata":{},"anything":{"x":1},"spec":{"a":"1"}}`,
		warnings: []string{
			`unknown field "spec.b"`,
		},
	}, {
		name:     "embedded resources keep apiVersion, kind and metadata",
		obj:      `{"spec":{"template":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","junk":1},"spec":{"image":"i","extra":1},"status":{}}}}`,
		want:     `{"spec":{"template":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","junk":1},"spec":{"image":"i"}}}}`,
		warnings: []string{`unknown field "spec.template.spec.extra"`, `unknown field "spec.template.status"`},
	}, {
		name:     "values of the wrong type are left to validation",
		obj:      `{"spec":{"replicas":{"a":1},"list":"notalist","nested":[{"x":1}]}}`,
		want:     `{"spec":{"replicas":{},"list":"notalist","nested":[{}]}}`,
		warnings: []string{`unknown field "spec.nested[0].x"`, `unknown field "spec.replicas.a"`},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			y := tc.schema
			if y == "" {
				y = pruneSchemaYAML
			}
			for _, d := range decoders {
				obj := decodeObject(t, d.decode, tc.obj)
				got := Prune(valueTestSchema(t, y), obj)
				if !reflect.DeepEqual(got, tc.warnings) {
					t.Errorf("%s: warnings\n got: %q\nwant: %q", d.name, got, tc.warnings)
				}
				sameJSON(t, obj, tc.want)
			}
		})
	}
}

func TestPruneNilSchemaAndObject(t *testing.T) {
	obj := map[string]any{"apiVersion": "a/v1", "kind": "K", "metadata": map[string]any{"name": "n"}, "spec": map[string]any{}}
	got := Prune(nil, obj)
	if want := []string{`unknown field "spec"`}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	sameJSON(t, obj, `{"apiVersion":"a/v1","kind":"K","metadata":{"name":"n"}}`)
	if got := Prune(valueTestSchema(t, pruneSchemaYAML), nil); got != nil {
		t.Errorf("nil object: got %q", got)
	}
}

func TestPruneNulls(t *testing.T) {
	s := valueTestSchema(t, `
type: object
properties:
  metadata: {type: object}
  spec:
    type: object
    properties:
      plain: {type: string}
      nullable: {type: string, nullable: true}
      defaulted: {type: string, default: "d"}
      nullDefault: {type: string, default: null}
      list: {type: array, items: {type: string}}
      objs:
        type: array
        items:
          type: object
          properties:
            a: {type: string}
      map:
        type: object
        additionalProperties: {type: string}
      free:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`)
	obj := decodeObject(t, json.Unmarshal, `{"metadata":null,"spec":{"plain":null,"nullable":null,"defaulted":null,"nullDefault":null,
		"list":["a",null],"objs":[{"a":null}],"map":{"k":null,"v":"x"},"free":{"n":null},"unknown":null}}`)
	PruneNulls(s, obj)
	sameJSON(t, obj, `{"metadata":null,"spec":{"nullable":null,"defaulted":null,"list":["a",null],"objs":[{}],"map":{"v":"x"},"free":{"n":null},"unknown":null}}`)
}

// defaultSchemaYAML is the schema of the defaulting cases.
const defaultSchemaYAML = `
type: object
properties:
  apiVersion: {type: string}
  kind: {type: string}
  metadata: {type: object}
  spec:
    type: object
    default: {}
    properties:
      replicas: {type: integer, default: 1}
      ratio: {type: number, default: 0.5}
      enabled: {type: boolean, default: true}
      name: {type: string, default: "dflt"}
      nullable: {type: string, nullable: true, default: "x"}
      noDefault: {type: string}
      nullDefault: {type: string, default: null}
      nested:
        type: object
        default: {inner: {}}
        properties:
          inner:
            type: object
            properties:
              level: {type: integer, default: 3}
              given: {type: string}
          other: {type: string, default: "o"}
      ports:
        type: array
        items:
          type: object
          default: {port: 80}
          properties:
            port: {type: integer}
            protocol: {type: string, default: TCP}
      tags:
        type: array
        default: ["a", "b"]
        items: {type: string}
      limits:
        type: object
        additionalProperties:
          type: object
          default: {}
          properties:
            cpu: {type: string, default: "1"}
      free:
        type: object
        x-kubernetes-preserve-unknown-fields: true
        properties:
          known: {type: string, default: "k"}
`

func TestDefault(t *testing.T) {
	// the defaults of spec when nothing is set
	const specDefaults = `"replicas":1,"ratio":0.5,"enabled":true,"name":"dflt","nullable":"x","nested":{"inner":{"level":3},"other":"o"},"tags":["a","b"]`
	cases := []struct {
		name string
		obj  string
		want string
	}{{
		name: "absent object gets its default, then the defaults inside it",
		obj:  `{"apiVersion":"a/v1","kind":"K","metadata":{"name":"n"}}`,
		want: `{"apiVersion":"a/v1","kind":"K","metadata":{"name":"n"},"spec":{` + specDefaults + `}}`,
	}, {
		name: "absent properties get their defaults",
		obj:  `{"spec":{}}`,
		want: `{"spec":{` + specDefaults + `}}`,
	}, {
		name: "null non-nullable values get the default, nullable nulls and null defaults stay",
		obj:  `{"spec":{"replicas":null,"name":null,"nullable":null,"nullDefault":null,"noDefault":null,"nested":null,"tags":null}}`,
		want: `{"spec":{"replicas":1,"ratio":0.5,"enabled":true,"name":"dflt","nullable":null,"nullDefault":null,"noDefault":null,"nested":{"inner":{"level":3},"other":"o"},"tags":["a","b"]}}`,
	}, {
		name: "client values are never overwritten, zero values included",
		obj:  `{"spec":{"replicas":0,"ratio":0,"enabled":false,"name":"","nullable":"set","nested":{"inner":{"level":7,"given":"g"},"other":""},"tags":[]}}`,
		want: `{"spec":{"replicas":0,"ratio":0,"enabled":false,"name":"","nullable":"set","nested":{"inner":{"level":7,"given":"g"},"other":""},"tags":[]}}`,
	}, {
		name: "nested defaults apply inside client objects",
		obj:  `{"spec":{"nested":{"inner":{"given":"g"}}}}`,
		want: `{"spec":{` + strings.Replace(specDefaults, `"nested":{"inner":{"level":3},"other":"o"}`, `"nested":{"inner":{"given":"g","level":3},"other":"o"}`, 1) + `}}`,
	}, {
		name: "array items are defaulted, null items get the items default",
		obj:  `{"spec":{"ports":[{"port":8080},{"port":443,"protocol":"UDP"},null]}}`,
		want: `{"spec":{` + specDefaults + `,"ports":[{"port":8080,"protocol":"TCP"},{"port":443,"protocol":"UDP"},{"port":80,"protocol":"TCP"}]}}`,
	}, {
		name: "additionalProperties values are defaulted, null values get the default",
		obj:  `{"spec":{"limits":{"a":{},"b":{"cpu":"2"},"c":null}}}`,
		want: `{"spec":{` + specDefaults + `,"limits":{"a":{"cpu":"1"},"b":{"cpu":"2"},"c":{"cpu":"1"}}}}`,
	}, {
		name: "specified properties under preserve-unknown-fields are defaulted, unknown ones untouched",
		obj:  `{"spec":{"free":{"x":null,"y":{}}}}`,
		want: `{"spec":{` + specDefaults + `,"free":{"x":null,"y":{},"known":"k"}}}`,
	}, {
		name: "values of the wrong type are left alone",
		obj:  `{"spec":{"nested":"str","ports":{"a":1},"limits":[1]}}`,
		want: `{"spec":{"replicas":1,"ratio":0.5,"enabled":true,"name":"dflt","nullable":"x","nested":"str","ports":{"a":1},"limits":[1],"tags":["a","b"]}}`,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, d := range decoders {
				obj := decodeObject(t, d.decode, tc.obj)
				Default(valueTestSchema(t, defaultSchemaYAML), obj)
				sameJSON(t, obj, tc.want)
			}
		})
	}
}

func TestDefaultNumbersAreInt64OrFloat64(t *testing.T) {
	obj := map[string]any{}
	Default(valueTestSchema(t, defaultSchemaYAML), obj)
	spec := obj["spec"].(map[string]any)
	if _, ok := spec["replicas"].(int64); !ok {
		t.Errorf("replicas: got %T, want int64", spec["replicas"])
	}
	if _, ok := spec["ratio"].(float64); !ok {
		t.Errorf("ratio: got %T, want float64", spec["ratio"])
	}
}

func TestDefaultDeepCopies(t *testing.T) {
	s := valueTestSchema(t, defaultSchemaYAML)
	a, b := map[string]any{}, map[string]any{}
	Default(s, a)
	Default(s, b)
	// mutate everything reachable in a; b and the schema must not change
	specA := a["spec"].(map[string]any)
	specA["nested"].(map[string]any)["inner"].(map[string]any)["level"] = int64(99)
	specA["tags"].([]any)[0] = "changed"
	specA["extra"] = true
	sameJSON(t, b, `{"spec":{"replicas":1,"ratio":0.5,"enabled":true,"name":"dflt","nullable":"x","nested":{"inner":{"level":3},"other":"o"},"tags":["a","b"]}}`)
	c := map[string]any{}
	Default(s, c)
	if mustJSON(t, c) != mustJSON(t, b) {
		t.Errorf("the schema's defaults changed: %s", mustJSON(t, c))
	}

	// items defaults are copied per item
	obj := decodeObject(t, json.Unmarshal, `{"spec":{"ports":[null,null]}}`)
	Default(s, obj)
	ports := obj["spec"].(map[string]any)["ports"].([]any)
	ports[0].(map[string]any)["port"] = int64(1)
	if got := ports[1].(map[string]any)["port"]; got != int64(80) {
		t.Errorf("items share a default map: second port is %v", got)
	}
}

func TestDefaultNilArguments(t *testing.T) {
	Default(nil, map[string]any{"spec": nil})
	Default(valueTestSchema(t, defaultSchemaYAML), nil)
}

// valueCase is one ValidateValue case on .spec.
type valueCase struct {
	name string
	spec string // schema of .spec (YAML)
	obj  string // value of .spec (JSON)
	want []want
}

// runValueCases validates {"apiVersion":..., "spec": obj} against a root
// schema with .spec as given, decoding obj both with float64 and int64
// numbers, and checks the errors.
func runValueCases(t *testing.T, cases []valueCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := specTestSchema(t, tc.spec)
			for _, d := range decoders {
				t.Run(d.name, func(t *testing.T) {
					obj := decodeObject(t, d.decode, `{"apiVersion":"a/v1","kind":"K","metadata":{"name":"n"},"spec":`+tc.obj+`}`)
					before := mustJSON(t, obj)
					assertErrors(t, ValidateValue(s, obj), tc.want...)
					if after := mustJSON(t, obj); after != before {
						t.Errorf("ValidateValue modified the object: %s", after)
					}
				})
			}
		})
	}
}

func TestValidateValueTypes(t *testing.T) {
	runValueCases(t, []valueCase{{
		name: "valid values of every type",
		spec: `{type: object, properties: {i: {type: integer}, num: {type: number}, s: {type: string}, b: {type: boolean}, o: {type: object}, a: {type: array, items: {type: integer}}}}`,
		obj:  `{"i":3,"num":1.5,"s":"x","b":false,"o":{},"a":[1,2]}`,
	}, {
		name: "string for integer, upstream wording",
		spec: `{type: object, properties: {replicas: {type: integer}}}`,
		obj:  `{"replicas":"3"}`,
		want: []want{typeInvalid("spec.replicas").with(`spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"`)},
	}, {
		name: "3.0 is an integer, 3.5 is not",
		spec: `{type: object, properties: {a: {type: integer}, b: {type: integer}}}`,
		obj:  `{"a":3.0,"b":3.5}`,
		want: []want{typeInvalid("spec.b").with(`spec.b in body must be of type integer: "number"`)},
	}, {
		name: "an integer is a number",
		spec: `{type: object, properties: {num: {type: number}}}`,
		obj:  `{"num":3}`,
	}, {
		name: "wrong types everywhere",
		spec: `{type: object, properties: {num: {type: number}, s: {type: string}, b: {type: boolean}, o: {type: object}, a: {type: array, items: {type: string}}}}`,
		obj:  `{"num":"1","s":1,"b":"true","o":[],"a":{}}`,
		want: []want{
			typeInvalid("spec.num").with(`must be of type number: "string"`),
			typeInvalid("spec.s").with(`must be of type string: "integer"`),
			typeInvalid("spec.b").with(`must be of type boolean: "string"`),
			typeInvalid("spec.o").with(`must be of type object: "array"`),
			typeInvalid("spec.a").with(`must be of type array: "object"`),
		},
	}, {
		name: "spec itself of the wrong type",
		spec: `{type: object, required: [a]}`,
		obj:  `"str"`,
		want: []want{typeInvalid("spec").with(`spec in body must be of type object: "string"`)},
	}, {
		name: "null only where nullable",
		spec: `{type: object, properties: {a: {type: string}, b: {type: string, nullable: true}, c: {type: object}, d: {x-kubernetes-preserve-unknown-fields: true}}}`,
		obj:  `{"a":null,"b":null,"c":null,"d":null}`,
		want: []want{
			typeInvalid("spec.a").with(`spec.a: Invalid value: "null": spec.a in body must be of type string: "null"`),
			typeInvalid("spec.c").with(`must be of type object: "null"`),
		},
	}, {
		name: "null array items",
		spec: `{type: object, properties: {l: {type: array, items: {type: string}}, num: {type: array, items: {type: string, nullable: true}}}}`,
		obj:  `{"l":["a",null],"num":["a",null]}`,
		want: []want{typeInvalid("spec.l[1]")},
	}, {
		name: "int-or-string",
		spec: `
type: object
properties:
  a: {x-kubernetes-int-or-string: true}
  b: {x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}]}
  c: {x-kubernetes-int-or-string: true, allOf: [{anyOf: [{type: integer}, {type: string}]}, {pattern: "^[0-9]+%?$"}]}
  ok: {type: array, items: {x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}]}}
`,
		obj: `{"a":3.5,"b":true,"c":"x%","ok":[1,3.0,"50%",""]}`,
		want: []want{
			typeInvalid("spec.a").with(`spec.a in body must be of type integer,string: "number"`),
			typeInvalid("spec.b").with(`spec.b in body must be of type integer,string: "boolean"`),
			invalid("spec.c").with(`spec.c in body should match '^[0-9]+%?$'`),
			invalid("spec.c").with(`"spec.c" must validate all the schemas (allOf)`),
		},
	}, {
		name: "null int-or-string",
		spec: `{type: object, properties: {a: {x-kubernetes-int-or-string: true}, b: {x-kubernetes-int-or-string: true, nullable: true}}}`,
		obj:  `{"a":null,"b":null}`,
		want: []want{typeInvalid("spec.a").with(`must be of type integer,string: "null"`)},
	}})
}

func TestValidateValueIntegersOfEveryGoType(t *testing.T) {
	s := specTestSchema(t, `{type: object, properties: {v: {type: integer, format: int64}}}`)
	valid := []any{float64(3), int64(3), int(3), int32(3), uint8(3), json.Number("3"), json.Number("3.0"), json.Number("1e3"),
		int64(math.MaxInt64), float64(1<<53 - 1)}
	for _, v := range valid {
		if errs := ValidateValue(s, map[string]any{"spec": map[string]any{"v": v}}); len(errs) > 0 {
			t.Errorf("%T %v: unexpected errors:\n  %s", v, v, errorLines(errs))
		}
	}
	invalidValues := []any{float64(3.5), json.Number("3.5"), float32(0.25), float64(1 << 60), "3", true}
	for _, v := range invalidValues {
		errs := ValidateValue(s, map[string]any{"spec": map[string]any{"v": v}})
		if len(errs) == 0 || errs[0].Type != field.ErrorTypeTypeInvalid || errs[0].Field != "spec.v" {
			t.Errorf("%T %v: want a type error at spec.v, got:\n  %s", v, v, errorLines(errs))
		}
	}
}

func TestValidateValueKeywords(t *testing.T) {
	runValueCases(t, []valueCase{{
		name: "required",
		spec: `{type: object, required: [size, name], properties: {size: {type: string}, name: {type: string}}}`,
		obj:  `{"name":null}`,
		want: []want{
			required("spec.size").with("spec.size: Required value"),
			typeInvalid("spec.name"),
		},
	}, {
		name: "required in array items",
		spec: `{type: object, properties: {items: {type: array, items: {type: object, required: [name], properties: {name: {type: string}}}}}}`,
		obj:  `{"items":[{"name":"a"},{"name":"b"},{}]}`,
		want: []want{required("spec.items[2].name")},
	}, {
		name: "enum",
		spec: `{type: object, properties: {size: {type: string, enum: [small, large]}, num: {type: integer, enum: [1, 2]}, o: {type: object, enum: [{a: 1}]}, z: {type: string, nullable: true, enum: [a, null]}}}`,
		obj:  `{"size":"huge","num":2.0,"o":{"a":1.0},"z":null}`,
		want: []want{notSupported("spec.size").with(`spec.size: Unsupported value: "huge": supported values: "small", "large"`)},
	}, {
		name: "numeric enum",
		spec: `{type: object, properties: {num: {type: integer, enum: [1, 2]}}}`,
		obj:  `{"num":3}`,
		want: []want{notSupported("spec.num").with(`Unsupported value: 3: supported values: "1", "2"`)},
	}, {
		name: "enum on null of a nullable field without null in the enum",
		spec: `{type: object, properties: {z: {type: string, nullable: true, enum: [a]}}}`,
		obj:  `{"z":null}`,
		want: []want{notSupported("spec.z")},
	}, {
		name: "pattern",
		spec: `{type: object, properties: {v: {type: string, pattern: "^[a-z]+$"}}}`,
		obj:  `{"v":"ABC"}`,
		want: []want{invalid("spec.v").with(`spec.v: Invalid value: "ABC": spec.v in body should match '^[a-z]+$'`)},
	}, {
		name: "minimum and maximum",
		spec: `{type: object, properties: {lo: {type: integer, minimum: 1}, hi: {type: integer, maximum: 10}, f: {type: number, minimum: 1.5}, ok: {type: integer, minimum: 1, maximum: 10}}}`,
		obj:  `{"lo":0,"hi":11,"f":1.25,"ok":10}`,
		want: []want{
			invalid("spec.lo").with(`spec.lo: Invalid value: 0: spec.lo in body should be greater than or equal to 1`),
			invalid("spec.hi").with(`spec.hi in body should be less than or equal to 10`),
			invalid("spec.f").with(`spec.f in body should be greater than or equal to 1.5`),
		},
	}, {
		name: "exclusive minimum and maximum",
		spec: `{type: object, properties: {lo: {type: integer, minimum: 1, exclusiveMinimum: true}, hi: {type: number, maximum: 10, exclusiveMaximum: true}, ok: {type: number, minimum: 1, exclusiveMinimum: true}}}`,
		obj:  `{"lo":1,"hi":10.0,"ok":1.01}`,
		want: []want{
			invalid("spec.lo").with(`spec.lo in body should be greater than 1`),
			invalid("spec.hi").with(`spec.hi in body should be less than 10`),
		},
	}, {
		name: "multipleOf",
		spec: `{type: object, properties: {a: {type: integer, multipleOf: 3}, b: {type: integer, multipleOf: 3}, c: {type: number, multipleOf: 0.1}, d: {type: number, multipleOf: 0.5}}}`,
		obj:  `{"a":9,"b":7,"c":0.3,"d":0.7}`,
		want: []want{
			invalid("spec.b").with(`spec.b: Invalid value: 7: spec.b in body should be a multiple of 3`),
			invalid("spec.d").with(`spec.d in body should be a multiple of 0.5`),
		},
	}, {
		name: "minLength and maxLength count runes",
		spec: `{type: object, properties: {a: {type: string, maxLength: 3}, b: {type: string, maxLength: 3}, c: {type: string, minLength: 2}, d: {type: string, minLength: 2}}}`,
		obj:  `{"a":"äöü","b":"äöüß","c":"é","d":"éé"}`,
		want: []want{
			tooLong("spec.b").with(`spec.b: Too long: may not be more than 3 bytes`),
			invalid("spec.c").with(`spec.c: Invalid value: "é": spec.c in body should be at least 2 chars long`),
		},
	}, {
		name: "minItems and maxItems",
		spec: `{type: object, properties: {a: {type: array, items: {type: string}, maxItems: 2}, b: {type: array, items: {type: string}, minItems: 2}}}`,
		obj:  `{"a":["x","y","z"],"b":["x"]}`,
		want: []want{
			tooMany("spec.a").with(`spec.a: Too many: 3: must have at most 2 items`),
			invalid("spec.b").with(`spec.b: Invalid value: 1: spec.b in body should have at least 2 items`),
		},
	}, {
		name: "minProperties and maxProperties",
		spec: `{type: object, properties: {a: {type: object, maxProperties: 1}, b: {type: object, additionalProperties: {type: string}, minProperties: 2}}}`,
		obj:  `{"a":{"x":1,"y":2},"b":{"x":"1"}}`,
		want: []want{
			tooMany("spec.a").with(`spec.a: Too many: 2: must have at most 1 items`),
			invalid("spec.b").with(`spec.b in body should have at least 2 properties`),
		},
	}, {
		name: "list-type set",
		spec: `{type: object, properties: {s: {type: array, x-kubernetes-list-type: set, items: {type: string}}, num: {type: array, x-kubernetes-list-type: set, items: {type: number}}, ok: {type: array, x-kubernetes-list-type: set, items: {type: string}}}}`,
		obj:  `{"s":["a","b","a","a","b"],"num":[1,1.0],"ok":["a","b"]}`,
		want: []want{
			duplicate("spec.s[2]").with(`spec.s[2]: Duplicate value: "a"`),
			duplicate("spec.s[4]"),
			duplicate("spec.num[1]"),
		},
	}, {
		name: "list-type atomic allows duplicates",
		spec: `{type: object, properties: {s: {type: array, x-kubernetes-list-type: atomic, items: {type: string}}}}`,
		obj:  `{"s":["a","a"]}`,
	}, {
		name: "list-type map",
		spec: `
type: object
properties:
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
        port: {type: integer}
  conds:
    type: array
    x-kubernetes-list-type: map
    x-kubernetes-list-map-keys: [type]
    items:
      type: object
      required: [type]
      properties:
        type: {type: string}
`,
		obj: `{"ports":[{"name":"a","protocol":"TCP","port":1},{"name":"a","protocol":"UDP"},{"name":"a","protocol":"TCP","port":2}],
		       "conds":[{"type":"Ready"},{"type":"Synced"},{"type":"Ready"}]}`,
		want: []want{
			duplicate("spec.ports[2]").with(`spec.ports[2]: Duplicate value: {"name":"a","protocol":"TCP"}`),
			duplicate("spec.conds[2]").with(`Duplicate value: {"type":"Ready"}`),
		},
	}, {
		name: "list-type map items must be objects",
		spec: `{type: object, properties: {m: {type: array, x-kubernetes-list-type: map, x-kubernetes-list-map-keys: [k], items: {type: object, required: [k], properties: {k: {type: string}}}}}}`,
		obj:  `{"m":[{"k":"a"},"str",{"k":"a"}]}`,
		want: []want{
			typeInvalid("spec.m[1]"),
			invalid("spec.m[1]").with("must be an object for an array of list-type map"),
		},
	}, {
		name: "additionalProperties schema for map values",
		spec: `{type: object, properties: {labels: {type: object, additionalProperties: {type: string, maxLength: 3}}}}`,
		obj:  `{"labels":{"a":"ok","b":5,"c":"toolong","d.e/f":null}}`,
		want: []want{
			typeInvalid("spec.labels.b").with(`spec.labels.b in body must be of type string: "integer"`),
			tooLong("spec.labels.c"),
			typeInvalid("spec.labels.d.e/f"),
		},
	}, {
		name: "additionalProperties false",
		spec: `{type: object, properties: {m: {type: object, additionalProperties: false}}}`,
		obj:  `{"m":{"x":1}}`,
		want: []want{invalid("spec.m").with(`spec.m: Invalid value: "x": spec.m.x in body is a forbidden property`)},
	}, {
		name: "nested arrays",
		spec: `{type: object, properties: {m: {type: array, items: {type: array, items: {type: integer, minimum: 0}}}}}`,
		obj:  `{"m":[[0,1],[2,-1]]}`,
		want: []want{invalid("spec.m[1][1]").with("spec.m[1][1] in body should be greater than or equal to 0")},
	}})
}

func TestValidateValueFormats(t *testing.T) {
	cases := []struct {
		format string
		valid  []string
		bad    []string
	}{
		{"date", []string{"2024-02-29"}, []string{"2023-02-29", "2024-1-2", "2024-01-02T00:00:00Z"}},
		{"date-time", []string{"2024-01-02T15:04:05Z", "2024-01-02t15:04:05.123+01:00"}, []string{"2024-01-02 15:04:05", "2024-01-02T25:00:00Z", "2024-01-02T15:04:05"}},
		{"datetime", []string{"2024-01-02T15:04:05Z"}, []string{"yesterday"}},
		{"byte", []string{"aGVsbG8=", "aGk=", "YWJj"}, []string{"hello!", "aGVsbG8", ""}},
		{"uuid", []string{"123e4567-e89b-12d3-a456-426614174000", "123E4567E89B12D3A456426614174000"}, []string{"123e4567", "g23e4567-e89b-12d3-a456-426614174000"}},
		{"uuid4", []string{"123e4567-e89b-42d3-a456-426614174000"}, []string{"123e4567-e89b-12d3-a456-426614174000"}},
		{"email", []string{"a@example.com", "Jane <jane@example.com>"}, []string{"not-an-email", "@example.com"}},
		{"hostname", []string{"example.com", "localhost", "a-b.example.io"}, []string{"-bad.com", "exa mple.com", "a_b.com"}},
		{"ipv4", []string{"192.168.0.1", "010.001.0.1"}, []string{"256.1.1.1", "::1", "1.2.3"}},
		{"ipv6", []string{"::1", "2001:db8::1", "::ffff:1.2.3.4"}, []string{"1.2.3.4", "2001:db8::g"}},
		{"cidr", []string{"10.0.0.0/8", "2001:db8::/32", "010.0.0.0/08"}, []string{"10.0.0.0", "10.0.0.0/33", "x/8"}},
		{"uri", []string{"https://example.com/x?y=1", "/path", "urn:isbn:0451450523"}, []string{"example.com", "", "https://exa mple.com"}},
		{"mac", []string{"01:23:45:67:89:ab", "01-23-45-67-89-ab"}, []string{"01:23:45"}},
		{"duration", []string{"1h30m", "3 days", "5min"}, []string{"soon", "10"}},
		{"hexcolor", []string{"#fff", "a0b1c2"}, []string{"#ffff"}},
		{"rgbcolor", []string{"rgb(255, 0, 10)"}, []string{"rgb(256,0,0)"}},
		{"ssn", []string{"123-45-6789"}, []string{"123456789"}},
		{"isbn", []string{"0321751043", "978-0321751041"}, []string{"0321751044"}},
		{"creditcard", []string{"4111 1111 1111 1111"}, []string{"4111 1111 1111 1112"}},
		{"bsonobjectid", []string{"507f1f77bcf86cd799439011"}, []string{"507f1f77bcf86cd79943901z"}},
		{"password", []string{"", "anything"}, nil},
		{"int32", []string{"any string"}, nil}, // numeric formats do not apply to strings
		{"unknown-format", []string{"whatever"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.format, func(t *testing.T) {
			s := specTestSchema(t, `{type: object, properties: {v: {type: string, format: `+tc.format+`}}}`)
			for _, v := range tc.valid {
				if errs := ValidateValue(s, map[string]any{"spec": map[string]any{"v": v}}); len(errs) > 0 {
					t.Errorf("%q: unexpected errors:\n  %s", v, errorLines(errs))
				}
			}
			for _, v := range tc.bad {
				errs := ValidateValue(s, map[string]any{"spec": map[string]any{"v": v}})
				assertErrors(t, errs, typeInvalid("spec.v").with(`spec.v in body must be of type `+tc.format+`: "`+v+`"`))
			}
		})
	}
}

func TestValidateValueNumericFormats(t *testing.T) {
	s := specTestSchema(t, `{type: object, properties: {a: {type: integer, format: int32}, b: {type: integer, format: int64}}}`)
	ok := []map[string]any{
		{"a": int64(math.MaxInt32), "b": int64(math.MaxInt64)},
		{"a": float64(math.MinInt32), "b": float64(-(1<<53 - 1))},
		{"a": json.Number("2147483647"), "b": json.Number("-9223372036854775808")},
	}
	for _, spec := range ok {
		if errs := ValidateValue(s, map[string]any{"spec": spec}); len(errs) > 0 {
			t.Errorf("%v: unexpected errors:\n  %s", spec, errorLines(errs))
		}
	}
	errs := ValidateValue(s, map[string]any{"spec": map[string]any{"a": int64(math.MaxInt32 + 1), "b": uint64(1 << 63)}})
	assertErrors(t, errs,
		typeInvalid("spec.a").with(`spec.a: Invalid value: 2147483648: spec.a in body must be of type int32`),
		typeInvalid("spec.b").with(`spec.b in body must be of type int64`))
	errs = ValidateValue(s, map[string]any{"spec": map[string]any{"a": float64(-1<<31 - 1)}})
	assertErrors(t, errs, typeInvalid("spec.a").with("must be of type int32"))
}

func TestValidateValueJunctors(t *testing.T) {
	runValueCases(t, []valueCase{{
		name: "allOf",
		spec: `{type: object, properties: {v: {type: integer, allOf: [{minimum: 1}, {maximum: 5}]}, ok: {type: integer, allOf: [{minimum: 1}, {maximum: 5}]}}}`,
		obj:  `{"v":7,"ok":3}`,
		want: []want{
			invalid("spec.v").with("spec.v in body should be less than or equal to 5"),
			invalid("spec.v").with(`spec.v: Invalid value: 7: "spec.v" must validate all the schemas (allOf)`),
		},
	}, {
		name: "allOf none validated",
		spec: `{type: object, properties: {v: {type: string, allOf: [{minLength: 5}, {pattern: "^a"}]}}}`,
		obj:  `{"v":"b"}`,
		want: []want{
			invalid("spec.v").with("should be at least 5 chars long"),
			invalid("spec.v").with("should match '^a'"),
			invalid("spec.v").with(`"spec.v" must validate all the schemas (allOf). None validated`),
		},
	}, {
		name: "anyOf",
		spec: `{type: object, properties: {v: {type: string, anyOf: [{pattern: "^a"}, {pattern: "^b"}]}, ok: {type: string, anyOf: [{pattern: "^a"}, {pattern: "^b"}]}}}`,
		obj:  `{"v":"c","ok":"b"}`,
		want: []want{
			invalid("spec.v").with(`spec.v: Invalid value: "c": "spec.v" must validate at least one schema (anyOf)`),
			invalid("spec.v").with("spec.v in body should match '^a'"),
		},
	}, {
		name: "anyOf of required fields reports the closest branch",
		spec: `{type: object, properties: {v: {type: object, properties: {a: {type: string}, b: {type: string}, c: {type: string}}, anyOf: [{required: [a, b]}, {required: [c]}]}}}`,
		obj:  `{"v":{"a":"x"}}`,
		want: []want{
			invalid("spec.v").with(`spec.v: Invalid value: "spec.v" must validate at least one schema (anyOf)`),
			required("spec.v.b"),
		},
	}, {
		name: "oneOf with none valid",
		spec: `{type: object, properties: {v: {type: string, oneOf: [{pattern: "^a"}, {pattern: "^b"}]}}}`,
		obj:  `{"v":"c"}`,
		want: []want{
			invalid("spec.v").with(`"spec.v" must validate one and only one schema (oneOf). Found none valid`),
			invalid("spec.v").with("should match '^a'"),
		},
	}, {
		name: "oneOf with two valid",
		spec: `{type: object, properties: {v: {type: string, oneOf: [{pattern: "^a"}, {pattern: "b$"}, {pattern: "^x"}]}, ok: {type: string, oneOf: [{pattern: "^a"}, {pattern: "^b"}]}}}`,
		obj:  `{"v":"ab","ok":"a"}`,
		want: []want{invalid("spec.v").with(`"spec.v" must validate one and only one schema (oneOf). Found 2 valid alternatives`)},
	}, {
		name: "not",
		spec: `{type: object, properties: {v: {type: string, not: {pattern: "^x"}}, ok: {type: string, not: {pattern: "^x"}}}}`,
		obj:  `{"v":"xy","ok":"yx"}`,
		want: []want{invalid("spec.v").with(`spec.v: Invalid value: "xy": "spec.v" must not validate the schema (not)`)},
	}, {
		name: "value validations reach into properties and items",
		spec: `
type: object
properties:
  list:
    type: array
    items: {type: integer}
    allOf: [{items: {maximum: 10}}]
  obj:
    type: object
    properties:
      a: {type: integer}
    not: {properties: {a: {minimum: 100}}}
`,
		obj: `{"list":[1,11],"obj":{"a":100}}`,
		want: []want{
			invalid("spec.list[1]").with("spec.list[1] in body should be less than or equal to 10"),
			invalid("spec.list").with(`"spec.list" must validate all the schemas (allOf)`),
			invalid("spec.obj").with(`"spec.obj" must not validate the schema (not)`),
		},
	}, {
		name: "value validations are not checked on null",
		spec: `{type: object, properties: {v: {type: string, nullable: true, allOf: [{minLength: 3}], not: {}}}}`,
		obj:  `{"v":null}`,
	}})
}

func TestValidateValueUnknownAndEmbedded(t *testing.T) {
	runValueCases(t, []valueCase{{
		name: "preserve-unknown-fields: undescribed fields are fine, described ones are checked",
		spec: `{type: object, x-kubernetes-preserve-unknown-fields: true, properties: {a: {type: integer}}}`,
		obj:  `{"a":"x","b":{"anything":[1,"two",null]},"c":null}`,
		want: []want{typeInvalid("spec.a")},
	}, {
		name: "untyped preserve-unknown-fields field accepts anything",
		spec: `{type: object, properties: {any: {x-kubernetes-preserve-unknown-fields: true}}}`,
		obj:  `{"any":[1,{"x":"y"}]}`,
	}, {
		name: "unknown fields are not validation errors",
		spec: `{type: object, properties: {a: {type: integer}}}`,
		obj:  `{"a":1,"unknown":"x"}`,
	}, {
		name: "embedded resource needs apiVersion and kind",
		spec: `{type: object, properties: {template: {type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}}}`,
		obj:  `{"template":{"metadata":{"name":"x"}}}`,
		want: []want{
			required("spec.template.apiVersion").with("must not be empty"),
			required("spec.template.kind").with("must not be empty"),
		},
	}, {
		name: "embedded resource apiVersion and kind must be well-formed",
		spec: `
type: object
properties:
  a: {type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}
  b: {type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}
  c: {type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}
`,
		obj: `{"a":{"apiVersion":"a/b/c","kind":"Foo_Bar"},"b":{"apiVersion":1,"kind":""},"c":{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"}}}`,
		want: []want{
			invalid("spec.a.apiVersion").with(`unexpected GroupVersion string: a/b/c`),
			invalid("spec.a.kind").with("may have mixed case, but should otherwise match"),
			invalid("spec.b.apiVersion").with("must be a string"),
			invalid("spec.b.kind").with("must not be empty"),
		},
	}, {
		name: "embedded resource with a schema for its fields",
		spec: `
type: object
properties:
  t:
    type: object
    x-kubernetes-embedded-resource: true
    required: [spec]
    properties:
      apiVersion: {type: string}
      kind: {type: string}
      metadata: {type: object, properties: {name: {type: string, maxLength: 3}}}
      spec: {type: object, properties: {image: {type: string}}}
`,
		obj: `{"t":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"toolong"}}}`,
		want: []want{
			tooLong("spec.t.metadata.name"),
			required("spec.t.spec"),
		},
	}})
}

func TestValidateValueRoot(t *testing.T) {
	s := valueTestSchema(t, `
type: object
required: [spec, apiVersion, metadata]
minProperties: 2
properties:
  apiVersion: {type: string}
  kind: {type: string}
  metadata:
    type: object
    properties:
      name: {type: string, maxLength: 3}
  spec:
    type: object
    properties:
      a: {type: integer}
`)
	// apiVersion, kind and metadata are the caller's, even when malformed
	obj := map[string]any{"apiVersion": int64(5), "kind": map[string]any{}, "metadata": map[string]any{"name": "much too long"}}
	assertErrors(t, ValidateValue(s, obj), required("spec").with("spec: Required value"))

	obj = map[string]any{"spec": map[string]any{}}
	assertErrors(t, ValidateValue(s, obj), invalid("<nil>").with("in body should have at least 2 properties"))

	if errs := ValidateValue(nil, obj); errs != nil {
		t.Errorf("nil schema: got %v", errs)
	}
	assertErrors(t, ValidateValue(s, nil), required("spec"), invalid("<nil>"))
}

// combinedSchemaYAML is the schema of the combined case.
const combinedSchemaYAML = `
type: object
properties:
  apiVersion: {type: string}
  kind: {type: string}
  metadata: {type: object}
  spec:
    type: object
    required: [size, image]
    properties:
      size: {type: string, enum: [small, large]}
      image: {type: string, minLength: 1}
      replicas: {type: integer, minimum: 0, maximum: 10}
      port: {x-kubernetes-int-or-string: true}
      email: {type: string, format: email}
      tags:
        type: array
        maxItems: 3
        x-kubernetes-list-type: set
        items: {type: string, pattern: "^[a-z]+$"}
      ports:
        type: array
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [name]
        items:
          type: object
          required: [name]
          properties:
            name: {type: string}
            port: {type: integer, format: int32, minimum: 1}
      labels:
        type: object
        additionalProperties: {type: string}
      config:
        type: object
        x-kubernetes-preserve-unknown-fields: true
  status:
    type: object
    properties:
      ready: {type: boolean}
`

func TestValidateValueReportsEveryViolation(t *testing.T) {
	const js = `{
		"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
		"spec": {
			"size": "huge",
			"replicas": 11.5,
			"port": true,
			"email": "nope",
			"tags": ["a", "B", "a", "c", "d"],
			"ports": [{"name": "http", "port": 0}, {"port": 80}, {"name": "http", "port": 3000000000}],
			"labels": {"app": "x", "tier": 1},
			"config": {"anything": {"goes": true}}
		},
		"status": {"ready": "yes"}
	}`
	s := valueTestSchema(t, combinedSchemaYAML)
	for _, d := range decoders {
		t.Run(d.name, func(t *testing.T) {
			errs := ValidateValue(s, decodeObject(t, d.decode, js))
			assertErrors(t, errs,
				notSupported("spec.size"),
				required("spec.image"),
				typeInvalid("spec.replicas").with(`must be of type integer: "number"`),
				invalid("spec.replicas").with("should be less than or equal to 10"),
				typeInvalid("spec.port"),
				typeInvalid("spec.email").with(`must be of type email: "nope"`),
				invalid("spec.tags[1]").with("should match '^[a-z]+$'"),
				tooMany("spec.tags"),
				duplicate("spec.tags[2]"),
				invalid("spec.ports[0].port").with("should be greater than or equal to 1"),
				required("spec.ports[1].name"),
				typeInvalid("spec.ports[2].port").with("must be of type int32"),
				duplicate("spec.ports[2]"),
				typeInvalid("spec.labels.tier"),
				typeInvalid("status.ready").with(`status.ready in body must be of type boolean: "string"`),
			)
		})
	}
}

func TestValidateValueDeterministic(t *testing.T) {
	s := valueTestSchema(t, combinedSchemaYAML)
	obj := decodeObject(t, json.Unmarshal, `{"spec":{"size":"x","replicas":"y","tags":[1,2],"labels":{"a":1,"b":2,"c":3}},"status":{"ready":1}}`)
	first := errorLines(ValidateValue(s, obj))
	for i := 0; i < 20; i++ {
		if got := errorLines(ValidateValue(s, obj)); got != first {
			t.Fatalf("order changed:\n%s\nvs\n%s", got, first)
		}
	}
}

// TestValueServingPipeline runs Prune, PruneNulls, Default and ValidateValue
// in the order the server uses them on the CRD of the other tests.
func TestValueServingPipeline(t *testing.T) {
	crd := validCRD(t)
	s := rootSchema(crd, 1)
	obj := decodeObject(t, sigsjson.UnmarshalCaseSensitivePreserveInts, `{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": {"name": "w", "namespace": "default"},
		"spec": {"unknown": 1, "replicas": null, "port": null, "ports": [{"name": "http", "port": 80}, {"name": "http", "protocol": "UDP"}],
		         "template": {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": []}}, "mode": "abc"},
		"status": {"replicas": 1}
	}`)
	warnings := Prune(s, obj)
	if want := []string{`unknown field "spec.unknown"`}; !reflect.DeepEqual(warnings, want) {
		t.Errorf("warnings: got %q, want %q", warnings, want)
	}
	PruneNulls(s, obj)
	Default(s, obj)
	sameJSON(t, obj, `{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": {"name": "w", "namespace": "default"},
		"spec": {"size": "small", "replicas": 1, "port": 8080, "nested": {"deeper": {"value": 2.5}},
		         "ports": [{"name": "http", "port": 80, "protocol": "TCP"}, {"name": "http", "protocol": "UDP"}],
		         "template": {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": []}}, "mode": "abc"},
		"status": {"replicas": 1}
	}`)
	if errs := ValidateValue(s, obj); len(errs) > 0 {
		t.Errorf("unexpected errors:\n  %s", errorLines(errs))
	}
}
