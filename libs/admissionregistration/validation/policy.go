package validation

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	genericvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	vap "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/util/jsonpath"
)

// ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding objects are checked with
// upstream's rules and messages (release 1.33, the v1 API). Expressions are compiled with
// upstream's own CEL compilers and environment (k8s.io/apiserver), the ones the admission
// service evaluates them with. On update, an expression the stored object already had is
// compiled in upstream's environment for stored expressions (which accepts what a newer release
// may have removed from the environment for new ones), as upstream does.

// Upstream's limits of policies.
const (
	maxAuditAnnotations              = 20
	maxAuditAnnotationValueExprBytes = 5 * 1024
	maxPolicyMatchConditions         = 64
)

var supportedPolicyReasons = []string{
	string(metav1.StatusReasonForbidden), string(metav1.StatusReasonInvalid),
	string(metav1.StatusReasonRequestEntityTooLarge), string(metav1.StatusReasonUnauthorized),
}

// stored is the expressions of the stored object, by where they are used.
type stored struct {
	validations, messages, conditions, annotations, variables map[string]bool
}

func storedExpressions(old *admissionregistrationv1.ValidatingAdmissionPolicy) stored {
	s := stored{validations: map[string]bool{}, messages: map[string]bool{}, conditions: map[string]bool{}, annotations: map[string]bool{}, variables: map[string]bool{}}
	if old == nil {
		return s
	}
	for _, v := range old.Spec.Validations {
		s.validations[v.Expression] = true
		if v.MessageExpression != "" {
			s.messages[v.MessageExpression] = true
		}
	}
	for _, c := range old.Spec.MatchConditions {
		s.conditions[c.Expression] = true
	}
	for _, a := range old.Spec.AuditAnnotations {
		s.annotations[a.ValueExpression] = true
	}
	for _, v := range old.Spec.Variables {
		s.variables[v.Expression] = true
	}
	return s
}

func envType(preexisting map[string]bool, expr string) environment.Type {
	if preexisting[expr] {
		return environment.StoredExpressions
	}
	return environment.NewExpressions
}

func strictCost() bool {
	return utilfeature.DefaultFeatureGate.Enabled(features.StrictCostEnforcementForVAP)
}

// plainCompilers compile expressions that cannot see variables (matchConditions), one per cost
// mode, built once.
var (
	plainOnce     [2]sync.Once
	plainCompiler [2]plugincel.Compiler
)

func plainCompilerFor(strict bool) plugincel.Compiler {
	i := 0
	if strict {
		i = 1
	}
	plainOnce[i].Do(func() {
		plainCompiler[i] = plugincel.NewCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion(), strict))
	})
	return plainCompiler[i]
}

// celError turns a compilation error into the field error upstream answers.
func celError(p *field.Path, expr string, err *apiservercel.Error) *field.Error {
	switch err.Type {
	case apiservercel.ErrorTypeRequired:
		return field.Required(p, err.Detail)
	case apiservercel.ErrorTypeInvalid:
		return field.Invalid(p, expr, err.Detail)
	}
	return field.InternalError(p, err)
}

// ValidateValidatingAdmissionPolicy checks a policy (old is nil on create).
func ValidateValidatingAdmissionPolicy(obj, old *admissionregistrationv1.ValidatingAdmissionPolicy) field.ErrorList {
	all := genericvalidation.ValidateObjectMeta(&obj.ObjectMeta, false, genericvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	all = append(all, validatePolicySpec(obj.Name, &obj.Spec, storedExpressions(old), field.NewPath("spec"))...)
	all = append(all, validatePolicyStatus(&obj.Status, field.NewPath("status"))...)
	return all
}

func validatePolicySpec(name string, spec *admissionregistrationv1.ValidatingAdmissionPolicySpec, pre stored, p *field.Path) field.ErrorList {
	var all field.ErrorList
	strict := strictCost()
	hasParams := spec.ParamKind != nil
	// Variables are compiled into the compiler the other expressions then see them through.
	var composited *plugincel.CompositedCompiler
	compiler := func() *plugincel.CompositedCompiler {
		if composited == nil {
			var err error
			if composited, err = plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion(), strict)); err != nil {
				panic(err) // upstream's base environment always builds
			}
		}
		return composited
	}
	if spec.FailurePolicy == nil {
		all = append(all, field.Required(p.Child("failurePolicy"), ""))
	} else if !has(supportedFailurePolicies, string(*spec.FailurePolicy)) {
		all = append(all, field.NotSupported(p.Child("failurePolicy"), *spec.FailurePolicy, sortedList(supportedFailurePolicies)))
	}
	if spec.ParamKind != nil {
		all = append(all, validateParamKind(spec.ParamKind, p.Child("paramKind"))...)
	}
	if spec.MatchConstraints == nil {
		all = append(all, field.Required(p.Child("matchConstraints"), ""))
	} else {
		all = append(all, validateMatchResources(spec.MatchConstraints, p.Child("matchConstraints"))...)
		// The resource rules give the expressions their types.
		if len(spec.MatchConstraints.ResourceRules) == 0 {
			all = append(all, field.Required(p.Child("matchConstraints", "resourceRules"), ""))
		}
	}

	// matchConditions see params but not variables.
	conds := p.Child("matchConditions")
	if len(spec.MatchConditions) > maxPolicyMatchConditions {
		all = append(all, field.TooMany(conds, len(spec.MatchConditions), maxPolicyMatchConditions))
	}
	condNames := map[string]bool{}
	for i, c := range spec.MatchConditions {
		cp := conds.Index(i)
		if expr := strings.TrimSpace(c.Expression); expr == "" {
			all = append(all, field.Required(cp.Child("expression"), ""))
		} else {
			r := plainCompilerFor(strict).CompileCELExpression(&matchconditions.MatchCondition{Expression: expr},
				plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true, StrictCost: strict}, envType(pre.conditions, expr))
			if r.Error != nil {
				all = append(all, celError(cp.Child("expression"), expr, r.Error))
			}
		}
		if c.Name == "" {
			all = append(all, field.Required(cp.Child("name"), ""))
		} else {
			all = append(all, qualifiedName(c.Name, cp.Child("name"))...)
			if condNames[c.Name] {
				all = append(all, field.Duplicate(cp.Child("name"), c.Name))
			}
			condNames[c.Name] = true
		}
	}

	vars := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true, StrictCost: strict}
	for i, v := range spec.Variables {
		vp := p.Child("variables").Index(i)
		if strings.TrimSpace(v.Name) == "" {
			all = append(all, field.Required(vp.Child("name"), "name is not specified"))
		} else if !isCELIdentifier(v.Name) {
			all = append(all, field.Invalid(vp.Child("name"), v.Name, "name is not a valid CEL identifier"))
		}
		if strings.TrimSpace(v.Expression) == "" {
			all = append(all, field.Required(vp.Child("expression"), "expression is not specified"))
			continue
		}
		variable := &vap.Variable{Name: v.Name, Expression: v.Expression}
		if r := compiler().CompileAndStoreVariable(variable, vars, envType(pre.variables, v.Expression)); r.Error != nil {
			all = append(all, celError(vp.Child("expression"), v.Expression, r.Error))
		}
	}

	if len(spec.Validations) == 0 && len(spec.AuditAnnotations) == 0 {
		all = append(all, field.Required(p.Child("validations"), "validations or auditAnnotations must contain at least one item"))
		all = append(all, field.Required(p.Child("auditAnnotations"), "validations or auditAnnotations must contain at least one item"))
		return all
	}
	for i, v := range spec.Validations {
		all = append(all, validateValidation(compiler(), &v, vars, pre, p.Child("validations").Index(i))...)
	}
	if len(spec.AuditAnnotations) > maxAuditAnnotations {
		all = append(all, field.Invalid(p.Child("auditAnnotations"), spec.AuditAnnotations, fmt.Sprintf("must not have more than %d auditAnnotations", maxAuditAnnotations)))
	}
	keys := map[string]bool{}
	for i, a := range spec.AuditAnnotations {
		ap := p.Child("auditAnnotations").Index(i)
		if name == "" {
			all = append(all, field.Invalid(ap.Child("key"), a.Key, "requires metadata.name be non-empty"))
		} else {
			all = append(all, qualifiedName(name+"/"+a.Key, ap.Child("key"))...)
		}
		switch expr := strings.TrimSpace(a.ValueExpression); {
		case expr == "":
			all = append(all, field.Required(ap.Child("valueExpression"), "valueExpression is not specified"))
		case len(expr) > maxAuditAnnotationValueExprBytes:
			all = append(all, field.Required(ap.Child("valueExpression"), fmt.Sprintf("must not exceed %d bytes in length", maxAuditAnnotationValueExprBytes)))
		default:
			r := compiler().CompileCELExpression(&vap.AuditAnnotationCondition{ValueExpression: expr}, vars, envType(pre.annotations, a.ValueExpression))
			if r.Error != nil {
				all = append(all, celError(ap.Child("valueExpression"), a.ValueExpression, r.Error))
			}
		}
		if keys[a.Key] {
			all = append(all, field.Duplicate(ap.Child("key"), a.Key))
		}
		keys[a.Key] = true
	}
	return all
}

var newlines = regexp.MustCompile(`[\n\r]+`)

func validateValidation(c *plugincel.CompositedCompiler, v *admissionregistrationv1.Validation, vars plugincel.OptionalVariableDeclarations, pre stored, p *field.Path) field.ErrorList {
	var all field.ErrorList
	if strings.TrimSpace(v.Expression) == "" {
		all = append(all, field.Required(p.Child("expression"), "expression is not specified"))
	} else if r := c.CompileCELExpression(&vap.ValidationCondition{Expression: v.Expression}, vars, envType(pre.validations, v.Expression)); r.Error != nil {
		all = append(all, celError(p.Child("expression"), v.Expression, r.Error))
	}
	msgExpr := strings.TrimSpace(v.MessageExpression)
	if v.MessageExpression != "" && msgExpr == "" {
		all = append(all, field.Invalid(p.Child("messageExpression"), v.MessageExpression, "must be non-empty if specified"))
	} else if msgExpr != "" {
		// Message expressions see params and variables, not the authorizer.
		mvars := vars
		mvars.HasAuthorizer = false
		if r := c.CompileCELExpression(&vap.MessageExpressionCondition{MessageExpression: v.MessageExpression}, mvars, envType(pre.messages, v.MessageExpression)); r.Error != nil {
			all = append(all, celError(p.Child("messageExpression"), v.MessageExpression, r.Error))
		}
	}
	msg := strings.TrimSpace(v.Message)
	if v.Message != "" && msg == "" {
		all = append(all, field.Invalid(p.Child("message"), v.Message, "message must be non-empty if specified"))
	} else if newlines.MatchString(msg) {
		all = append(all, field.Invalid(p.Child("message"), v.Message, "message must not contain line breaks"))
	}
	if v.Reason != nil && !has(supportedPolicyReasons, string(*v.Reason)) {
		all = append(all, field.NotSupported(p.Child("reason"), *v.Reason, sortedList(supportedPolicyReasons)))
	}
	return all
}

// validateParamKind: an apiVersion whose group is a DNS subdomain and version a DNS label, and
// a kind that is a DNS label in lower case (the APIService rules).
func validateParamKind(k *admissionregistrationv1.ParamKind, p *field.Path) field.ErrorList {
	var all field.ErrorList
	if k.APIVersion == "" {
		all = append(all, field.Required(p.Child("apiVersion"), ""))
	} else if group, version, err := splitGroupVersion(k.APIVersion); err != nil {
		all = append(all, field.Invalid(p.Child("apiVersion"), k.APIVersion, err.Error()))
	} else {
		if group != "" {
			if errs := utilvalidation.IsDNS1123Subdomain(group); len(errs) > 0 {
				all = append(all, field.Invalid(p.Child("apiVersion"), group, strings.Join(errs, ",")))
			}
		}
		if version == "" {
			all = append(all, field.Invalid(p.Child("apiVersion"), k.APIVersion, "version must be specified"))
		} else if errs := utilvalidation.IsDNS1035Label(version); len(errs) > 0 {
			all = append(all, field.Invalid(p.Child("apiVersion"), version, strings.Join(errs, ",")))
		}
	}
	if k.Kind == "" {
		all = append(all, field.Required(p.Child("kind"), ""))
	} else if errs := utilvalidation.IsDNS1035Label(strings.ToLower(k.Kind)); len(errs) > 0 {
		all = append(all, field.Invalid(p.Child("kind"), k.Kind, "may have mixed case, but should otherwise match: "+strings.Join(errs, ",")))
	}
	return all
}

// splitGroupVersion reads "group/version" or "version" ("" and "/" are both empty).
func splitGroupVersion(gv string) (string, string, error) {
	if gv == "" || gv == "/" {
		return "", "", nil
	}
	switch strings.Count(gv, "/") {
	case 0:
		return "", gv, nil
	case 1:
		g, v, _ := strings.Cut(gv, "/")
		return g, v, nil
	}
	return "", "", fmt.Errorf("unexpected GroupVersion string: %v", gv)
}

func validateMatchResources(m *admissionregistrationv1.MatchResources, p *field.Path) field.ErrorList {
	var all field.ErrorList
	if m == nil {
		return nil
	}
	if m.MatchPolicy == nil {
		all = append(all, field.Required(p.Child("matchPolicy"), ""))
	} else if !has(supportedMatchPolicies, string(*m.MatchPolicy)) {
		all = append(all, field.NotSupported(p.Child("matchPolicy"), *m.MatchPolicy, sortedList(supportedMatchPolicies)))
	}
	for _, sel := range []struct {
		name string
		s    *metav1.LabelSelector
	}{{"namespaceSelector", m.NamespaceSelector}, {"objectSelector", m.ObjectSelector}} {
		if sel.s == nil {
			all = append(all, field.Required(p.Child(sel.name), ""))
		} else {
			// Strict, as the policies came after upstream's issue 99139.
			all = append(all, metav1validation.ValidateLabelSelector(sel.s, metav1validation.LabelSelectorValidationOptions{}, p.Child(sel.name))...)
		}
	}
	for _, rules := range []struct {
		name string
		r    []admissionregistrationv1.NamedRuleWithOperations
	}{{"resourceRules", m.ResourceRules}, {"excludeResourceRules", m.ExcludeResourceRules}} {
		for i := range rules.r {
			rp := p.Child(rules.name).Index(i)
			names := map[string]bool{}
			for j, n := range rules.r[i].ResourceNames {
				for _, msg := range path.ValidatePathSegmentName(n, false) {
					all = append(all, field.Invalid(rp.Child("resourceNames").Index(j), n, msg))
				}
				if names[n] {
					all = append(all, field.Duplicate(rp.Child("resourceNames").Index(j), n))
				}
				names[n] = true
			}
			all = append(all, validateRuleWithOperations(&rules.r[i].RuleWithOperations, rp)...)
		}
	}
	return all
}

// validatePolicyStatus checks what the status may hold: type checking warnings with a field
// reference (a JSONPath) and a warning, and well-formed conditions.
func validatePolicyStatus(s *admissionregistrationv1.ValidatingAdmissionPolicyStatus, p *field.Path) field.ErrorList {
	var all field.ErrorList
	if s.TypeChecking != nil {
		for i, w := range s.TypeChecking.ExpressionWarnings {
			wp := p.Child("typeChecking", "expressionWarnings").Index(i)
			if w.Warning == "" {
				all = append(all, field.Required(wp.Child("warning"), ""))
			}
			ref := strings.TrimSpace(w.FieldRef)
			if ref == "" {
				all = append(all, field.Required(wp.Child("fieldRef"), ""))
			} else if err := jsonpath.New("spec").Parse("{" + ref + "}"); err != nil {
				all = append(all, field.Invalid(wp.Child("fieldRef"), ref, fmt.Sprintf("invalid JSONPath: %v", err)))
			}
		}
	}
	return append(all, metav1validation.ValidateConditions(s.Conditions, p.Child("conditions"))...)
}

var (
	celIdentifier = regexp.MustCompile(`^[_a-zA-Z][_a-zA-Z0-9]*$`)
	celReserved   = map[string]bool{"true": true, "false": true, "null": true, "in": true, "as": true, "break": true, "const": true,
		"continue": true, "else": true, "for": true, "function": true, "if": true, "import": true, "let": true, "loop": true,
		"package": true, "namespace": true, "return": true, "var": true, "void": true, "while": true}
)

// qualifiedName checks a qualified name (prefix/name), one error per problem.
func qualifiedName(v string, p *field.Path) field.ErrorList {
	var all field.ErrorList
	for _, msg := range utilvalidation.IsQualifiedName(v) {
		all = append(all, field.Invalid(p, v, msg))
	}
	return all
}

// isCELIdentifier: CEL's IDENT, not a reserved word.
func isCELIdentifier(s string) bool { return celIdentifier.MatchString(s) && !celReserved[s] }

// ValidateValidatingAdmissionPolicyBinding checks a binding (create and update alike).
func ValidateValidatingAdmissionPolicyBinding(obj *admissionregistrationv1.ValidatingAdmissionPolicyBinding) field.ErrorList {
	all := genericvalidation.ValidateObjectMeta(&obj.ObjectMeta, false, genericvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	p := field.NewPath("spec")
	if obj.Spec.PolicyName == "" {
		all = append(all, field.Required(p.Child("policyName"), ""))
	} else {
		for _, msg := range genericvalidation.NameIsDNSSubdomain(obj.Spec.PolicyName, false) {
			all = append(all, field.Invalid(p.Child("policyName"), obj.Spec.PolicyName, msg))
		}
	}
	if r := obj.Spec.ParamRef; r != nil {
		rp := p.Child("paramRef")
		if r.Name != "" {
			for _, msg := range path.ValidatePathSegmentName(r.Name, false) {
				all = append(all, field.Invalid(rp.Child("name"), r.Name, msg))
			}
			if r.Selector != nil {
				all = append(all, field.Forbidden(rp.Child("name"), "name and selector are mutually exclusive"))
			}
		}
		if r.Selector != nil {
			all = append(all, metav1validation.ValidateLabelSelector(r.Selector, metav1validation.LabelSelectorValidationOptions{}, rp.Child("selector"))...)
			if r.Name != "" {
				all = append(all, field.Forbidden(rp.Child("selector"), "name and selector are mutually exclusive"))
			}
		}
		if r.Name == "" && r.Selector == nil {
			all = append(all, field.Required(rp, "one of name or selector must be specified"))
		}
		if r.ParameterNotFoundAction == nil || *r.ParameterNotFoundAction == "" {
			all = append(all, field.Required(rp.Child("parameterNotFoundAction"), ""))
		} else if a := *r.ParameterNotFoundAction; a != admissionregistrationv1.DenyAction && a != admissionregistrationv1.AllowAction {
			all = append(all, field.NotSupported(rp.Child("parameterNotFoundAction"), r.ParameterNotFoundAction,
				[]string{string(admissionregistrationv1.DenyAction), string(admissionregistrationv1.AllowAction)}))
		}
	}
	// (Upstream spells the path "matchResouces".)
	all = append(all, validateMatchResources(obj.Spec.MatchResources, p.Child("matchResouces"))...)

	ap := p.Child("validationActions")
	supported := []string{string(admissionregistrationv1.Audit), string(admissionregistrationv1.Deny), string(admissionregistrationv1.Warn)}
	seen := map[admissionregistrationv1.ValidationAction]bool{}
	for i, a := range obj.Spec.ValidationActions {
		if !has(supported, string(a)) {
			all = append(all, field.NotSupported(ap.Index(i), a, supported))
		}
		if seen[a] {
			all = append(all, field.Duplicate(ap.Index(i), a))
		}
		seen[a] = true
	}
	if seen[admissionregistrationv1.Deny] && seen[admissionregistrationv1.Warn] {
		all = append(all, field.Invalid(ap, obj.Spec.ValidationActions,
			"must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"))
	}
	if len(seen) == 0 {
		all = append(all, field.Required(ap, "at least one validation action is required"))
	}
	return all
}
