package crd

import (
	"context"
	"fmt"
	"math"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"
)

// This file evaluates x-kubernetes-validations (CEL validation rules) on custom objects with
// upstream's validator (k8s.io/apiextensions-apiserver's schema/cel): the same CEL
// environment and libraries, cost limits, messages, transition rules and ratcheting as an
// upstream API server. The definition-time checks of the rules are in cel_definition.go.

// Structural converts a version's schema (v1) to upstream's structural schema, as upstream's
// handler does for each served version: through the internal apiextensions types. The schema
// must be structural (ValidateStructural); an error means it is not.
func Structural(s *apiextensionsv1.JSONSchemaProps) (*structuralschema.Structural, error) {
	internal, err := internalSchema(s)
	if err != nil {
		return nil, err
	}
	return structuralschema.NewStructural(internal)
}

// internalSchema converts a v1 schema to the internal apiextensions type upstream's validation
// packages work on.
func internalSchema(s *apiextensionsv1.JSONSchemaProps) (*apiextensions.JSONSchemaProps, error) {
	out := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(s, out, nil); err != nil {
		return nil, fmt.Errorf("converting the schema: %w", err)
	}
	return out, nil
}

// Rules are the compiled x-kubernetes-validations of one version's schema. Compile them once
// per definition version (CompileRules) and evaluate them on every write (Validate); they are
// safe for concurrent use.
type Rules struct {
	schema    *structuralschema.Structural
	validator *cel.Validator
}

// CompileRules compiles the x-kubernetes-validations of a version's schema. It returns nil
// (and no error) when the schema has no rule. Rules that do not compile (which the
// definition's validation refuses) are reported by Validate on each object, as upstream does.
func CompileRules(s *apiextensionsv1.JSONSchemaProps) (*Rules, error) {
	if s == nil || !HasRules(s) {
		return nil, nil
	}
	ss, err := Structural(s)
	if err != nil {
		return nil, err
	}
	v := cel.NewValidator(ss, true, celconfig.PerCallLimit)
	if v == nil {
		return nil, nil
	}
	return &Rules{schema: ss, validator: v}, nil
}

// HasRules reports whether a schema has x-kubernetes-validations anywhere in its structure.
func HasRules(s *apiextensionsv1.JSONSchemaProps) bool {
	if s == nil {
		return false
	}
	if len(s.XValidations) > 0 {
		return true
	}
	if s.Items != nil && HasRules(s.Items.Schema) {
		return true
	}
	if s.AdditionalProperties != nil && HasRules(s.AdditionalProperties.Schema) {
		return true
	}
	for k := range s.Properties {
		p := s.Properties[k]
		if HasRules(&p) {
			return true
		}
	}
	return false
}

// blockingRuleError is upstream's answer when an object's schema violations leave it unfit for
// its rules (wrong types, missing required fields, values over their limits): the rules are not
// evaluated.
const blockingRuleError = "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"

// blocksRules reports whether one of an object's schema violations stops its rules from being
// evaluated, as upstream's strategy decides.
func blocksRules(errs field.ErrorList) bool {
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}

// Validate evaluates the rules on obj (old is the stored object on update, nil on create) and
// returns the violations, after schemaErrs, the object's schema violations (which decide whether
// the rules run at all). The runtime cost of one object's rules is bounded by upstream's budget
// (celconfig.RuntimeCELCostBudget) and each expression's by its per-call limit: an object that
// exceeds them is refused. On update, a rule that fails on a value the update did not change is
// not reported unless it is a transition rule (ratcheting, as upstream's
// CRDValidationRatcheting).
func (r *Rules) Validate(ctx context.Context, obj, old map[string]any, schemaErrs field.ErrorList) field.ErrorList {
	if r == nil {
		return nil
	}
	if blocksRules(schemaErrs) {
		return field.ErrorList{field.Invalid(nil, nil, blockingRuleError)}
	}
	if old == nil {
		errs, _ := r.validator.Validate(ctx, nil, r.schema, obj, nil, celconfig.RuntimeCELCostBudget)
		return errs
	}
	correlated := common.NewCorrelatedObject(obj, old, &model.Structural{Structural: r.schema})
	errs, _ := r.validator.Validate(ctx, nil, r.schema, obj, old, celconfig.RuntimeCELCostBudget, cel.WithRatcheting(correlated))
	return errs
}

// multiplyCost is a product that stops at the largest uint64 instead of overflowing.
func multiplyCost(cost, cardinality uint64) uint64 {
	if cost == 0 {
		return 0
	}
	if math.MaxUint64/cost < cardinality {
		return math.MaxUint64
	}
	return cost * cardinality
}
