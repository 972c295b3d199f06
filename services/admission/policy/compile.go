package policy

import (
	"context"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

// The composition environments (variables on top of upstream's base environment for
// admission), built once each as upstream builds them: one with the strict cost of the
// Kubernetes CEL libraries, one without.
var (
	strictEnvOnce, lenientEnvOnce sync.Once
	strictEnv, lenientEnv         *plugincel.CompositionEnv
)

func compositionEnv(strictCost bool) *plugincel.CompositionEnv {
	build := func(strict bool) *plugincel.CompositionEnv {
		env, err := plugincel.NewCompositionEnv(plugincel.VariablesTypeName, environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion(), strict))
		if err != nil {
			panic(err) // the base environment is upstream's own: it always builds
		}
		return env
	}
	if strictCost {
		strictEnvOnce.Do(func() { strictEnv = build(true) })
		return strictEnv
	}
	lenientEnvOnce.Do(func() { lenientEnv = build(false) })
	return lenientEnv
}

// compile builds a policy's evaluator with upstream's compilers, as upstream's plugin does
// (its compilePolicy is not exported): variables first, then matchConditions, validations,
// audit annotations and message expressions over them. Expressions that do not compile become
// evaluation errors of the evaluator, which the policy's failurePolicy decides.
func compile(policy *admissionregistrationv1.ValidatingAdmissionPolicy) validating.Validator {
	hasParam := policy.Spec.ParamKind != nil
	strictCost := utilfeature.DefaultFeatureGate.Enabled(features.StrictCostEnforcementForVAP)
	optionalVars := plugincel.OptionalVariableDeclarations{HasParams: hasParam, HasAuthorizer: true, StrictCost: strictCost}
	expressionOptionalVars := plugincel.OptionalVariableDeclarations{HasParams: hasParam, HasAuthorizer: false, StrictCost: strictCost}
	failurePolicy := policy.Spec.FailurePolicy

	compiler := plugincel.NewCompositedCompilerFromTemplate(compositionEnv(strictCost))
	variables := make([]plugincel.NamedExpressionAccessor, len(policy.Spec.Variables))
	for i, v := range policy.Spec.Variables {
		variables[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	compiler.CompileAndStoreVariables(variables, optionalVars, environment.StoredExpressions)

	var matcher matchconditions.Matcher
	if conds := policy.Spec.MatchConditions; len(conds) > 0 {
		accessors := make([]plugincel.ExpressionAccessor, len(conds))
		for i := range conds {
			accessors[i] = (*matchconditions.MatchCondition)(&conds[i])
		}
		matcher = matchconditions.NewMatcher(compiler.CompileCondition(accessors, optionalVars, environment.StoredExpressions), failurePolicy, "policy", "validate", policy.Name)
	}

	validations := make([]plugincel.ExpressionAccessor, len(policy.Spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(policy.Spec.Validations))
	for i, v := range policy.Spec.Validations {
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	annotations := make([]plugincel.ExpressionAccessor, len(policy.Spec.AuditAnnotations))
	for i, a := range policy.Spec.AuditAnnotations {
		annotations[i] = &validating.AuditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression}
	}
	messageFilter, annotationFilter := plugincel.ConditionEvaluator(none{}), plugincel.ConditionEvaluator(none{})
	if hasMessageExpression(policy.Spec.Validations) {
		messageFilter = compiler.CompileCondition(messages, expressionOptionalVars, environment.StoredExpressions)
	}
	if len(annotations) > 0 {
		annotationFilter = compiler.CompileCondition(annotations, optionalVars, environment.StoredExpressions)
	}
	return validating.NewValidator(
		compiler.CompileCondition(validations, optionalVars, environment.StoredExpressions),
		matcher,
		annotationFilter,
		messageFilter,
		failurePolicy,
	)
}

func hasMessageExpression(vs []admissionregistrationv1.Validation) bool {
	for _, v := range vs {
		if v.MessageExpression != "" {
			return true
		}
	}
	return false
}

// none evaluates no expressions: the message expressions of a policy without any, the audit
// annotations of one without any. Upstream's evaluator would give the same empty results after
// preparing every variable of the request for them (the objects and the request converted to
// unstructured form).
type none struct{}

func (none) ForInput(_ context.Context, _ *k8sadmission.VersionedAttributes, _ *admissionv1.AdmissionRequest, _ plugincel.OptionalVariableBindings,
	_ *corev1.Namespace, budget int64) ([]plugincel.EvaluationResult, int64, error) {
	return nil, budget, nil
}

func (none) CompilationErrors() []error { return nil }
