package crd

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// ruleSchemaYAML is a root schema whose spec exercises x-kubernetes-validations: messages,
// messageExpression, reason and fieldPath, upstream's libraries (quantities, IPs and CIDRs,
// URLs, regular expressions, formats, lists and sets), transition rules (oldSelf) and
// optionalOldSelf.
const ruleSchemaYAML = `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: "!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas"
      message: minReplicas must not exceed maxReplicas
    - rule: "!has(self.mode) || self.mode != 'legacy'"
      messageExpression: "'mode ' + self.mode + ' is no longer supported'"
      reason: FieldValueForbidden
      fieldPath: .mode
    - rule: "!has(self.image) || self.image.startsWith('registry.example.com/')"
    properties:
      minReplicas: {type: integer}
      maxReplicas: {type: integer}
      mode: {type: string, maxLength: 32}
      image: {type: string, maxLength: 256}
      memory:
        type: string
        maxLength: 32
        x-kubernetes-validations:
        - rule: "isQuantity(self) && quantity(self).isLessThan(quantity('1Gi'))"
          message: memory must be a quantity below 1Gi
      network:
        type: string
        maxLength: 64
        x-kubernetes-validations:
        - rule: "isCIDR(self) && cidr(self).ip().family() == 4"
          message: network must be an IPv4 CIDR
      endpoint:
        type: string
        maxLength: 256
        x-kubernetes-validations:
        - rule: "isURL(self) && url(self).getScheme() == 'https'"
          message: endpoint must be an https URL
      host:
        type: string
        maxLength: 253
        x-kubernetes-validations:
        - rule: "!format.dns1123Subdomain().validate(self).hasValue()"
          messageExpression: "'host ' + self + ' must be a DNS subdomain'"
        - rule: "!self.matches('^test-')"
          message: host must not start with test-
      tags:
        type: array
        maxItems: 16
        items: {type: string, maxLength: 16}
        x-kubernetes-validations:
        - rule: "self.isSorted()"
          message: tags must be sorted
        - rule: "sets.intersects(self, ['a', 'b']) || size(self) == 0"
          message: tags must include a or b
      ports:
        type: array
        maxItems: 8
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [name]
        items:
          type: object
          required: [name]
          properties:
            name: {type: string, maxLength: 16}
            port:
              type: integer
              x-kubernetes-validations:
              - rule: "self == oldSelf || oldSelf < 1024"
                message: a port of 1024 and above may not change
      immutable:
        type: string
        maxLength: 16
        x-kubernetes-validations:
        - rule: self == oldSelf
          message: immutable may not change
      counter:
        type: integer
        x-kubernetes-validations:
        - rule: self >= oldSelf
          message: counter may not go down
      since:
        type: string
        maxLength: 16
        x-kubernetes-validations:
        - rule: "oldSelf.hasValue() || self == 'now'"
          optionalOldSelf: true
          message: since starts as now
`

// ruleCRD is a definition whose v1 schema is schemaYAML.
func ruleCRD(t *testing.T, schemaYAML string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	s := parseSchema(t, schemaYAML)
	return &apiextensionsv1.CustomResourceDefinition{
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "rules", Singular: "rule", Kind: "Rule", ListKind: "RuleList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &s},
			}},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: []string{"v1"}},
	}
}

func withName(c *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	c.Name = c.Spec.Names.Plural + "." + c.Spec.Group
	return c
}

func compileRules(t *testing.T, schemaYAML string) *Rules {
	t.Helper()
	s := parseSchema(t, schemaYAML)
	r, err := CompileRules(&s)
	if err != nil || r == nil {
		t.Fatalf("compiling: %v %v", r, err)
	}
	return r
}

func ruleObject(t *testing.T, y string) map[string]any {
	t.Helper()
	if y == "" {
		return nil
	}
	js := []byte(y)
	if !strings.HasPrefix(y, "{") {
		var err error
		if js, err = yaml.YAMLToJSON(js); err != nil {
			t.Fatal(err)
		}
	}
	v, err := valueDecodeJSON(js)
	if err != nil {
		t.Fatal(err)
	}
	return v.(map[string]any)
}

func TestRuleSchemaIsAValidDefinition(t *testing.T) {
	assertErrors(t, Validate(withName(ruleCRD(t, ruleSchemaYAML)), nil))
}

// Rules on objects: each violation with upstream's path, type and message.
func TestRulesOnObjects(t *testing.T) {
	r := compileRules(t, ruleSchemaYAML)
	for _, tc := range []struct {
		name, obj, old string
		want           []want
	}{
		{name: "valid", obj: `spec: {minReplicas: 1, maxReplicas: 2, mode: fast, image: registry.example.com/app, memory: 512Mi,
		    network: 10.0.0.0/8, endpoint: "https://example.com/x", host: web.example.com, tags: [a, c], since: now}`},
		{name: "message", obj: `spec: {minReplicas: 3, maxReplicas: 2}`,
			want: []want{invalid("spec").with(`spec: Invalid value: "object": minReplicas must not exceed maxReplicas`)}},
		{name: "messageExpression, reason and fieldPath", obj: `spec: {mode: legacy}`,
			want: []want{forbidden("spec.mode").with("spec.mode: Forbidden: mode legacy is no longer supported")}},
		{name: "no message: the rule is shown", obj: `spec: {image: docker.io/app}`,
			want: []want{invalid("spec").with(`failed rule: !has(self.image) || self.image.startsWith('registry.example.com/')`)}},
		{name: "quantity", obj: `spec: {memory: 2Gi}`, want: []want{invalid("spec.memory").with("memory must be a quantity below 1Gi")}},
		{name: "not a quantity", obj: `spec: {memory: lots}`, want: []want{invalid("spec.memory")}},
		{name: "cidr", obj: `spec: {network: "fd00::/8"}`, want: []want{invalid("spec.network").with("network must be an IPv4 CIDR")}},
		{name: "url", obj: `spec: {endpoint: "http://example.com"}`, want: []want{invalid("spec.endpoint").with("endpoint must be an https URL")}},
		{name: "format and regex", obj: `spec: {host: "test-Web"}`, want: []want{
			invalid("spec.host").with("host test-Web must be a DNS subdomain"),
			invalid("spec.host").with("host must not start with test-"),
		}},
		{name: "lists and sets", obj: `spec: {tags: [c, b, a]}`, want: []want{invalid("spec.tags").with("tags must be sorted")}},
		{name: "sets", obj: `spec: {tags: [c, d]}`, want: []want{invalid("spec.tags").with("tags must include a or b")}},
		{name: "transition rules do not run on create", obj: `spec: {immutable: x, counter: 1, ports: [{name: http, port: 8080}]}`},
		{name: "transition rule", obj: `spec: {immutable: y, counter: 1}`, old: `spec: {immutable: x, counter: 2}`, want: []want{
			invalid("spec.immutable").with("immutable may not change"),
			invalid("spec.counter").with("counter may not go down"),
		}},
		{name: "transition rules in map lists correlate by key", obj: `spec: {ports: [{name: https, port: 8443}, {name: http, port: 8081}]}`,
			old:  `spec: {ports: [{name: http, port: 8080}, {name: https, port: 8443}]}`,
			want: []want{invalid("spec.ports[1].port").with("a port of 1024 and above may not change")}},
		{name: "a new field is not a transition", obj: `spec: {immutable: x}`, old: `spec: {}`},
		{name: "optionalOldSelf runs on create", obj: `spec: {since: later}`, want: []want{invalid("spec.since").with("since starts as now")}},
		{name: "optionalOldSelf with an old value", obj: `spec: {since: later}`, old: `spec: {since: now}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertErrors(t, r.Validate(context.Background(), ruleObject(t, tc.obj), ruleObject(t, tc.old), nil), tc.want...)
		})
	}
}

// On update, rules that fail on values the update did not change are not reported (upstream's
// ratcheting); changed values are checked, and transition rules always.
func TestRulesRatchet(t *testing.T) {
	r := compileRules(t, ruleSchemaYAML)
	old := ruleObject(t, `spec: {minReplicas: 3, maxReplicas: 2, memory: 2Gi, tags: [b, a], counter: 5}`)
	for _, tc := range []struct {
		name, obj string
		want      []want
	}{
		{"unchanged invalid values pass", `spec: {minReplicas: 3, maxReplicas: 2, memory: 2Gi, tags: [b, a], counter: 5}`, nil},
		{"another field changes", `spec: {minReplicas: 3, maxReplicas: 2, memory: 2Gi, tags: [b, a], counter: 6}`,
			// the rule on spec sees a changed spec
			[]want{invalid("spec").with("minReplicas must not exceed maxReplicas")}},
		{"a changed invalid value", `spec: {minReplicas: 1, maxReplicas: 2, memory: 3Gi, tags: [b, a], counter: 5}`,
			[]want{invalid("spec.memory")}},
		{"transition rules are never ratcheted", `spec: {minReplicas: 1, maxReplicas: 2, memory: 2Gi, tags: [b, a], counter: 4}`,
			[]want{invalid("spec.counter")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertErrors(t, r.Validate(context.Background(), ruleObject(t, tc.obj), old, nil), tc.want...)
		})
	}
}

// Schema violations that leave an object unfit for its rules stop them, with upstream's error.
func TestRulesBlockedBySchemaErrors(t *testing.T) {
	r := compileRules(t, ruleSchemaYAML)
	obj := ruleObject(t, `spec: {minReplicas: 3, maxReplicas: 2}`)
	errs := r.Validate(context.Background(), obj, nil, field.ErrorList{field.TypeInvalid(field.NewPath("spec", "mode"), 1, "")})
	assertErrors(t, errs, invalid("<nil>").with("some validation rules were not checked because the object was invalid"))
	// Other violations (a maximum, a pattern) do not block the rules.
	errs = r.Validate(context.Background(), obj, nil, field.ErrorList{field.Invalid(field.NewPath("spec", "mode"), 1, "")})
	assertErrors(t, errs, invalid("spec"))
}

// A rule whose evaluation costs more than upstream's per-call limit is stopped, and the object
// refused; so is an object whose rules together exceed the runtime budget.
func TestRulesRuntimeCost(t *testing.T) {
	r := compileRules(t, `
type: object
properties:
  spec:
    type: object
    properties:
      items:
        type: array
        maxItems: 1000
        items: {type: integer}
        x-kubernetes-validations:
        - rule: self.all(x, self.all(y, x + y >= 0))
      many:
        type: array
        maxItems: 500
        items:
          type: array
          maxItems: 100
          items: {type: integer}
          x-kubernetes-validations:
          - rule: self.all(x, self.all(y, x + y >= 0))
`)
	var list []string
	for i := 0; i < 1000; i++ {
		list = append(list, fmt.Sprint(i))
	}
	items := "[" + strings.Join(list, ",") + "]"
	assertErrors(t, r.Validate(context.Background(), ruleObject(t, `spec: {items: [1, 2, 3]}`), nil, nil))
	assertErrors(t, r.Validate(context.Background(), ruleObject(t, `{"spec": {"items": `+items+`}}`), nil, nil),
		invalid("spec.items").with("operation cancelled: actual cost limit exceeded").with("no further validation rules will be run due to call cost exceeds limit for rule"))

	if raceEnabled {
		// Exhausting the budget takes upstream's 10M cost units: about two seconds, more than
		// thirty with the race detector, which has nothing to find in this sequential code.
		t.Log("the runtime budget is not exhausted under the race detector")
		return
	}
	inner := "[" + strings.Join(list[:100], ",") + "]"
	var outer []string
	for i := 0; i < 500; i++ {
		outer = append(outer, inner)
	}
	// The items within the budget pass; the first one beyond it ends the validation.
	errs := r.Validate(context.Background(), ruleObject(t, `{"spec": {"many": [`+strings.Join(outer, ",")+`]}}`), nil, nil)
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Field, "spec.many[") ||
		!strings.Contains(errs[0].Error(), "validation failed due to running out of cost budget, no further validation rules will be run") {
		t.Errorf("the runtime budget: %v", errs)
	}
}

func TestCompileRulesWithoutRules(t *testing.T) {
	s := parseSchema(t, `{type: object, properties: {spec: {type: object}}}`)
	if r, err := CompileRules(&s); r != nil || err != nil {
		t.Errorf("no rules: %v %v", r, err)
	}
	var r *Rules
	if errs := r.Validate(context.Background(), map[string]any{}, nil, nil); errs != nil {
		t.Errorf("nil rules: %v", errs)
	}
}

// The definition-time checks: rules that do not compile, messageExpressions that do not,
// fieldPaths outside the schema, oldSelf where values do not correlate, optionalOldSelf
// without oldSelf, estimated costs over upstream's limits, defaults that break rules.
func TestValidateRulesOfDefinitions(t *testing.T) {
	const base = "spec.versions[0].schema.openAPIV3Schema"
	for _, tc := range []struct {
		name, schema string
		want         []want
	}{
		{"compile error", `
type: object
properties:
  spec:
    type: object
    properties: {a: {type: string}}
    x-kubernetes-validations: [{rule: "self.b == 'x'"}]`,
			[]want{invalid(base + ".properties[spec].x-kubernetes-validations[0].rule").with("compilation failed").with("undefined field 'b'")}},
		{"not a bool", `
type: object
x-kubernetes-validations: [{rule: "'x'"}]`,
			[]want{invalid(base + ".x-kubernetes-validations[0].rule").with("cel expression must evaluate to a bool")}},
		{"messageExpression", `
type: object
x-kubernetes-validations: [{rule: "true", messageExpression: "42"}]`,
			[]want{invalid(base + ".x-kubernetes-validations[0].messageExpression").with("messageExpression must evaluate to a string")}},
		{"fieldPath", `
type: object
properties:
  spec:
    type: object
    properties: {a: {type: string}}
    x-kubernetes-validations: [{rule: "true", fieldPath: ".b"}]`,
			[]want{invalid(base + ".properties[spec].x-kubernetes-validations[0].fieldPath").with("fieldPath must be a valid path")}},
		{"oldSelf in an atomic list", `
type: object
properties:
  spec:
    type: object
    properties:
      list:
        type: array
        maxItems: 10
        items:
          type: string
          maxLength: 10
          x-kubernetes-validations: [{rule: "self == oldSelf"}]`,
			[]want{invalid(base + ".properties[spec].properties[list].items.x-kubernetes-validations[0].rule").
				with("oldSelf cannot be used on the uncorrelatable portion of the schema within " + base + ".properties[spec].properties[list]")}},
		{"optionalOldSelf without oldSelf", `
type: object
x-kubernetes-validations: [{rule: "true", optionalOldSelf: true}]`,
			[]want{invalid(base + ".x-kubernetes-validations[0].optionalOldSelf").with("may not be set if oldSelf is not used in rule")}},
		{"estimated cost", `
type: object
properties:
  spec:
    type: object
    properties:
      list:
        type: array
        items: {type: string}
        x-kubernetes-validations: [{rule: "self.all(x, self.all(y, x == y))"}]`,
			[]want{
				forbidden(base + ".properties[spec].properties[list].x-kubernetes-validations[0].rule").
					with("estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"),
				forbidden(base + ".properties[spec].properties[list].x-kubernetes-validations[0].rule").
					with("contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"),
				forbidden(base).with("x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x"),
			}},
		{"cost times cardinality", `
type: object
properties:
  spec:
    type: object
    properties:
      list:
        type: array
        items:
          type: string
          maxLength: 1000
          x-kubernetes-validations: [{rule: "self.matches('^a+$')"}]`,
			[]want{
				forbidden(base + ".properties[spec].properties[list].items.x-kubernetes-validations[0].rule").with("estimated rule cost exceeds budget"),
				forbidden(base + ".properties[spec].properties[list].items.x-kubernetes-validations[0].rule").with("contributed to estimated rule cost total"),
				forbidden(base).with("estimated rule cost total for entire OpenAPIv3 schema exceeds budget"),
			}},
		{"bounded lists are cheap", `
type: object
properties:
  spec:
    type: object
    properties:
      list:
        type: array
        maxItems: 10
        items:
          type: string
          maxLength: 100
          x-kubernetes-validations: [{rule: "self.matches('^a+$')"}]`, nil},
		{"a default must pass the rules", `
type: object
properties:
  spec:
    type: object
    properties:
      size:
        type: integer
        default: 20
        x-kubernetes-validations: [{rule: "self <= 10", message: "size must be at most 10"}]`,
			[]want{invalid(base + ".properties[spec].properties[size].default").with("size must be at most 10")}},
		{"rules are not compiled in a schema that is not structural", `
type: object
properties:
  spec:
    x-kubernetes-validations: [{rule: "self.b == 'x'"}]`,
			[]want{required(base + ".properties[spec].type")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertErrors(t, Validate(withName(ruleCRD(t, tc.schema)), nil), tc.want...)
		})
	}
}

// An update that leaves a version's schema alone does not check its rules again (a definition
// stored before a release changed its estimates stays writable, as upstream; status writes stay
// cheap); a changed schema is checked.
func TestValidateRulesOnUpdate(t *testing.T) {
	const expensive = `
type: object
properties:
  spec:
    type: object
    properties:
      list:
        type: array
        maxItems: 3000
        items: {type: integer}
        x-kubernetes-validations: [{rule: "self.all(x, self.all(y, x == y))"}]`
	old := withName(ruleCRD(t, expensive))
	if errs := Validate(old, nil); len(errs) == 0 {
		t.Fatal("the expensive rule must be refused on create")
	}
	c := old.DeepCopy()
	c.Labels = map[string]string{"changed": "true"}
	assertErrors(t, Validate(c, old))
	c.Spec.Versions[0].Schema.OpenAPIV3Schema.Description = "changed"
	if errs := Validate(c, old); len(errs) == 0 {
		t.Error("a changed schema must be held to the limit")
	}
}

// BenchmarkRulesValidate is the rules' own cost on one object: the five rules of the gateway's
// BenchmarkCustomCreateRules (six evaluations: one rule runs on each of two list items) on the
// object it creates.
func BenchmarkRulesValidate(b *testing.B) {
	t := &testing.T{}
	r := compileRules(t, `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations: [{rule: "!has(self.color) || self.color != 'green'"}]
    properties:
      size: {type: integer, x-kubernetes-validations: [{rule: "self <= 10"}]}
      color: {type: string}
      tags: {type: array, maxItems: 16, items: {type: string, maxLength: 64}, x-kubernetes-validations: [{rule: "self.all(t, size(t) <= 16)"}]}
      ports:
        type: array
        maxItems: 16
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [name]
        x-kubernetes-validations: [{rule: "self.all(p, p.port > 0 && p.port < 65536)"}]
        items:
          type: object
          required: [name]
          x-kubernetes-validations: [{rule: "self.name.matches('^[a-z]+$')"}]
          properties: {name: {type: string, maxLength: 15}, port: {type: integer}}
`)
	obj := ruleObject(t, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},
	  "spec":{"size":3,"color":"red","tags":["a","b"],"ports":[{"name":"http","port":80},{"name":"https","port":443}]}}`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if errs := r.Validate(context.Background(), obj, nil, nil); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}
