package crd

import (
	"context"
	"fmt"
	"sort"

	celgo "github.com/google/cel-go/cel"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// This file checks a definition's x-kubernetes-validations when the definition is written, as
// upstream's CRD validation does: every rule and messageExpression must compile in upstream's
// CEL environment (the libraries of the compatibility version), fieldPath must name a field of
// the schema, oldSelf may only be used where old and new values correlate, optionalOldSelf
// needs oldSelf, and the estimated cost of each expression (times how often the schema lets it
// run) and of all of them together must stay within upstream's static limits. Defaults are
// checked against the rules of their schema. The messages are upstream's.

// validateRules returns the violations of the x-kubernetes-validations rules of crd's schemas
// (old is the stored definition on update). prior are the violations found so far: as upstream,
// the rules of a schema that is not structural are not compiled, nor those of a node with
// another violation at or below it.
func validateRules(crd, old *apiextensionsv1.CustomResourceDefinition, prior field.ErrorList) field.ErrorList {
	var loader cel.EnvLoader = cel.NewExpressionsEnvLoader()
	if old != nil {
		loader = preexistingExpressions(old)
	}
	var errs field.ErrorList
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if v.Schema == nil || !HasRules(v.Schema.OpenAPIV3Schema) {
			continue
		}
		// An update that leaves a version's schema alone (status writes, metadata, other
		// versions) does not check its rules again: they were checked when it was written, and
		// upstream exempts them from the per-expression cost limit anyway (a definition stays
		// writable when a release changes the estimates). This keeps the definitions
		// controller's status writes cheap, and definitions stored before rules were checked
		// writable.
		if old != nil && unchangedSchema(v, old) {
			continue
		}
		p := field.NewPath("spec", "versions").Index(i).Child("schema", "openAPIV3Schema")
		if hasStructuralErrors(prior, p) {
			continue
		}
		internal, err := internalSchema(v.Schema.OpenAPIV3Schema)
		if err != nil {
			errs = append(errs, field.Invalid(p, "", err.Error()))
			continue
		}
		w := &ruleWalk{loader: loader, prior: prior}
		root := apiextensionsvalidation.RootCELContext(internal)
		w.node(internal, p, root, nil)
		errs = append(errs, w.schemaErrs...)
		errs = append(errs, w.celErrs...)
		if total := root.TotalCost; total != nil && total.Total > apiextensionsvalidation.StaticEstimatedCRDCostLimit {
			for _, expensive := range total.MostExpensive {
				errs = append(errs, field.Forbidden(expensive.Path, "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"))
			}
			errs = append(errs, field.Forbidden(p, costErrorMessage("x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema", total.Total, apiextensionsvalidation.StaticEstimatedCRDCostLimit)))
		}
		if len(w.schemaErrs)+len(w.celErrs) == 0 && !hasErrorsUnder(prior, p) {
			errs = append(errs, validateDefaultsWithRules(internal, p)...)
		}
	}
	return errs
}

// hasStructuralErrors reports whether prior has a violation under the schema at p other than
// one of its rules' own (message, fieldPath, ...): the schema may then not convert to CEL types.
func hasStructuralErrors(prior field.ErrorList, p *field.Path) bool {
	for _, e := range prior {
		if hasErrorsUnder(field.ErrorList{e}, p) && !containsStep(e.Field, "x-kubernetes-validations") {
			return true
		}
	}
	return false
}

// containsStep reports whether a field path string has step as one of its parts.
func containsStep(path, step string) bool {
	for _, s := range splitFieldPath(path) {
		if s == step {
			return true
		}
	}
	return false
}

// ruleWalk visits a schema's structure (properties, additionalProperties, items) as upstream's
// CRD validation does, compiling the rules of every node.
type ruleWalk struct {
	loader cel.EnvLoader
	prior  field.ErrorList
	// schemaErrs are violations of the rules' fields (fieldPath); celErrs are those of their
	// expressions. Upstream lists the first before the second.
	schemaErrs, celErrs field.ErrorList
}

// node checks the rules of s (at p) and below. uncorrelatable is the highest path above s whose
// old and new values cannot be matched (items of lists that are not maps, fields of maps of an
// unknown type), where oldSelf is forbidden. It reports whether a violation other than a
// compilation error was found at s or below, which keeps the rules of s and its parents from
// being compiled (as upstream).
func (w *ruleWalk) node(s *apiextensions.JSONSchemaProps, p *field.Path, ctx *apiextensionsvalidation.CELSchemaContext, uncorrelatable *field.Path) bool {
	if s == nil {
		return false
	}
	failed := false
	if ap := s.AdditionalProperties; ap != nil && ap.Schema != nil {
		failed = w.node(ap.Schema, p.Child("additionalProperties"), ctx.ChildAdditionalPropertiesContext(ap.Schema), uncorrelatable) || failed
	}
	keys := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		sub := uncorrelatable
		if sub == nil && !cel.MapIsCorrelatable(s.XMapType) {
			sub = p
		}
		prop := s.Properties[k]
		failed = w.node(&prop, p.Child("properties").Key(k), ctx.ChildPropertyContext(&prop, k), sub) || failed
	}
	if s.Items != nil && s.Items.Schema != nil {
		sub := uncorrelatable
		if sub == nil && (s.XListType == nil || *s.XListType != "map") {
			sub = p
		}
		failed = w.node(s.Items.Schema, p.Child("items"), ctx.ChildItemsContext(s.Items.Schema), sub) || failed
	}
	if len(s.XValidations) == 0 {
		return failed
	}
	rp := p.Child("x-kubernetes-validations")
	for i, rule := range s.XValidations {
		if rule.FieldPath != "" && !fieldPathValid(s, rule.FieldPath) {
			w.schemaErrs = append(w.schemaErrs, field.Invalid(rp.Index(i).Child("fieldPath"), rule.FieldPath, "fieldPath must be a valid path"))
			failed = true
		}
	}
	if failed || hasErrorsUnder(w.prior, p) {
		return true
	}
	w.compile(s, rp, ctx, uncorrelatable)
	return false
}

// compile compiles the rules of one node and checks their costs and use of oldSelf.
func (w *ruleWalk) compile(s *apiextensions.JSONSchemaProps, rp *field.Path, ctx *apiextensionsvalidation.CELSchemaContext, uncorrelatable *field.Path) {
	typeInfo, err := ctx.TypeInfo()
	switch {
	case err != nil:
		w.celErrs = append(w.celErrs, field.InternalError(rp, fmt.Errorf("internal error: failed to construct type information for x-kubernetes-validations rules: %s", err)))
		return
	case typeInfo == nil:
		w.celErrs = append(w.celErrs, field.InternalError(rp, fmt.Errorf("internal error: failed to retrieve type information for x-kubernetes-validations")))
		return
	}
	results, err := cel.Compile(typeInfo.Schema, typeInfo.DeclType, celconfig.PerCallLimit, celEnvSet(), w.loader)
	if err != nil {
		w.celErrs = append(w.celErrs, field.InternalError(rp, err))
		return
	}
	for i, cr := range results {
		rule := s.XValidations[i]
		at := rp.Index(i)
		cost := expressionCost(cr, ctx)
		if cost > apiextensionsvalidation.StaticEstimatedCostLimit {
			w.celErrs = append(w.celErrs, field.Forbidden(at.Child("rule"), costErrorMessage("estimated rule cost", cost, apiextensionsvalidation.StaticEstimatedCostLimit)))
		}
		if ctx.TotalCost != nil {
			ctx.TotalCost.ObserveExpressionCost(at.Child("rule"), cost)
		}
		if cr.Error != nil {
			if cr.Error.Type == apiservercel.ErrorTypeRequired {
				w.celErrs = append(w.celErrs, field.Required(at.Child("rule"), cr.Error.Detail))
			} else {
				w.celErrs = append(w.celErrs, field.Invalid(at.Child("rule"), rule, cr.Error.Detail))
			}
		}
		if cr.MessageExpressionError != nil {
			w.celErrs = append(w.celErrs, field.Invalid(at.Child("messageExpression"), rule, cr.MessageExpressionError.Detail))
		} else if cr.MessageExpression != nil {
			if cr.MessageExpressionMaxCost > apiextensionsvalidation.StaticEstimatedCostLimit {
				w.celErrs = append(w.celErrs, field.Forbidden(at.Child("messageExpression"), costErrorMessage("estimated messageExpression cost", cr.MessageExpressionMaxCost, apiextensionsvalidation.StaticEstimatedCostLimit)))
			}
			if ctx.TotalCost != nil {
				ctx.TotalCost.ObserveExpressionCost(at.Child("messageExpression"), cr.MessageExpressionMaxCost)
			}
		}
		if cr.UsesOldSelf {
			if uncorrelatable != nil {
				w.celErrs = append(w.celErrs, field.Invalid(at.Child("rule"), rule.Rule, fmt.Sprintf("oldSelf cannot be used on the uncorrelatable portion of the schema within %v", uncorrelatable)))
			}
		} else if rule.OptionalOldSelf != nil {
			w.celErrs = append(w.celErrs, field.Invalid(at.Child("optionalOldSelf"), *rule.OptionalOldSelf, "may not be set if oldSelf is not used in rule"))
		}
	}
}

// celEnvSet is upstream's CEL environment for CRD rules: the base environment of the default
// compatibility version with strict cost checks (cached by upstream's package).
func celEnvSet() *environment.EnvSet {
	return environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion(), true)
}

// fieldPathValid reports whether a rule's fieldPath names a field of its node's schema.
func fieldPathValid(s *apiextensions.JSONSchemaProps, path string) bool {
	ss, err := structuralschema.NewStructural(s)
	if err != nil {
		return true
	}
	_, _, err = cel.ValidFieldPath(path, ss)
	return err == nil
}

// expressionCost is an expression's estimated cost times the most times the schema lets it run.
func expressionCost(cr cel.CompilationResult, ctx *apiextensionsvalidation.CELSchemaContext) uint64 {
	if ctx.MaxCardinality != nil {
		return multiplyCost(cr.MaxCost, *ctx.MaxCardinality)
	}
	return multiplyCost(cr.MaxCost, cr.MaxCardinality)
}

// costErrorMessage is upstream's message for an estimated cost over its limit.
func costErrorMessage(costName string, cost, limit uint64) string {
	factor := float64(cost) / float64(limit)
	var f string
	switch {
	case factor > 100.0:
		f = "more than 100x"
	case factor < 1.5:
		f = fmt.Sprintf("%fx", factor)
	default:
		f = fmt.Sprintf("%.1fx", factor)
	}
	return fmt.Sprintf("%s exceeds budget by factor of %s (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)", costName, f)
}

// ruleEnvLoader chooses the environment of each expression on update: expressions the stored
// definition already has compile in the environment of stored expressions (which keeps
// libraries a newer version may have changed), new ones in that of new expressions.
type ruleEnvLoader struct {
	rules, messageExpressions map[string]bool
}

func (l ruleEnvLoader) RuleEnv(envSet *environment.EnvSet, expression string) *celgo.Env {
	if l.rules[expression] {
		return envSet.StoredExpressionsEnv()
	}
	return envSet.NewExpressionsEnv()
}

func (l ruleEnvLoader) MessageExpressionEnv(envSet *environment.EnvSet, expression string) *celgo.Env {
	if l.messageExpressions[expression] {
		return envSet.StoredExpressionsEnv()
	}
	return envSet.NewExpressionsEnv()
}

// preexistingExpressions collects the rules and messageExpressions of a stored definition.
func preexistingExpressions(old *apiextensionsv1.CustomResourceDefinition) ruleEnvLoader {
	l := ruleEnvLoader{rules: map[string]bool{}, messageExpressions: map[string]bool{}}
	var walk func(s *apiextensionsv1.JSONSchemaProps)
	walk = func(s *apiextensionsv1.JSONSchemaProps) {
		if s == nil {
			return
		}
		for _, r := range s.XValidations {
			l.rules[r.Rule] = true
			if r.MessageExpression != "" {
				l.messageExpressions[r.MessageExpression] = true
			}
		}
		if s.Items != nil {
			walk(s.Items.Schema)
			for i := range s.Items.JSONSchemas {
				walk(&s.Items.JSONSchemas[i])
			}
		}
		if s.AdditionalProperties != nil {
			walk(s.AdditionalProperties.Schema)
		}
		for k := range s.Properties {
			p := s.Properties[k]
			walk(&p)
		}
		for _, list := range [][]apiextensionsv1.JSONSchemaProps{s.AllOf, s.AnyOf, s.OneOf} {
			for i := range list {
				walk(&list[i])
			}
		}
		walk(s.Not)
	}
	for i := range old.Spec.Versions {
		if sch := old.Spec.Versions[i].Schema; sch != nil {
			walk(sch.OpenAPIV3Schema)
		}
	}
	return l
}

// unchangedSchema reports whether the stored definition has version v with the same schema.
func unchangedSchema(v *apiextensionsv1.CustomResourceDefinitionVersion, old *apiextensionsv1.CustomResourceDefinition) bool {
	for i := range old.Spec.Versions {
		o := &old.Spec.Versions[i]
		if o.Name != v.Name {
			continue
		}
		var a, b *apiextensionsv1.JSONSchemaProps
		if v.Schema != nil {
			a = v.Schema.OpenAPIV3Schema
		}
		if o.Schema != nil {
			b = o.Schema.OpenAPIV3Schema
		}
		return equality.Semantic.DeepEqual(a, b)
	}
	return false
}

// validateDefaultsWithRules checks every default of a schema (outside metadata) against the
// rules of its node and below, as upstream's validation of defaults does: as the value of a
// create and of an update that leaves it unchanged. The runtime budget of one object is shared
// by all of them.
func validateDefaultsWithRules(root *apiextensions.JSONSchemaProps, p *field.Path) field.ErrorList {
	ss, err := structuralschema.NewStructural(root)
	if err != nil {
		return nil
	}
	var errs field.ErrorList
	budget := int64(celconfig.RuntimeCELCostBudget)
	var walk func(s, resourceRoot *structuralschema.Structural, p *field.Path, insideMeta bool)
	walk = func(s, resourceRoot *structuralschema.Structural, p *field.Path, insideMeta bool) {
		if s == nil || budget < 0 {
			return
		}
		if s.XEmbeddedResource {
			insideMeta = false
			resourceRoot = s
		}
		if s.Default.Object != nil && !insideMeta {
			if v := cel.NewValidator(s, s == resourceRoot, celconfig.PerCallLimit); v != nil {
				ctx := context.TODO()
				found, left := v.Validate(ctx, p.Child("default"), s, s.Default.Object, s.Default.Object, budget)
				if len(found) == 0 {
					var leftNew int64
					found, leftNew = v.Validate(ctx, p.Child("default"), s, s.Default.Object, nil, budget)
					left = min(left, leftNew)
				}
				errs = append(errs, found...)
				budget = left
				if budget < 0 {
					return
				}
			}
		}
		if s.Items != nil {
			walk(s.Items, resourceRoot, p.Child("items"), insideMeta)
		}
		if s.AdditionalProperties != nil {
			walk(s.AdditionalProperties.Structural, resourceRoot, p.Child("additionalProperties"), insideMeta)
		}
		for _, k := range sortedKeys(s.Properties) {
			prop := s.Properties[k]
			walk(&prop, resourceRoot, p.Child("properties").Key(k), insideMeta || (s == resourceRoot && k == "metadata"))
		}
	}
	walk(ss, ss, p, false)
	return errs
}
