// Package validation checks MutatingWebhookConfiguration and ValidatingWebhookConfiguration
// objects on write, with upstream's rules and messages (release 1.33, the v1 API), and sets
// upstream's defaults. It is pure: the gateway calls it on create and update.
//
// An update is held to the create rules only where the stored object already met them, as
// upstream does: side effects other than None/NoneOnDryRun, webhooks without a supported
// admissionReviewVersion, duplicate webhook names and invalid label values in selectors stay
// allowed on objects that already had them, and matchConditions are compiled only when they
// changed.
package validation

import (
	"fmt"
	"net/url"
	"reflect"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	genericvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/libs/admissionregistration/matchconditions"
)

// AcceptedAdmissionReviewVersions are the AdmissionReview versions the dispatcher sends.
var AcceptedAdmissionReviewVersions = []string{"v1", "v1beta1"}

type options struct {
	ignoreMatchConditions            bool
	requireNoSideEffects             bool
	requireRecognizedReviewVersion   bool
	requireUniqueWebhookNames        bool
	allowInvalidLabelValueInSelector bool
}

// webhookFields is what the mutating and validating webhooks have in common.
type webhookFields struct {
	name               string
	rules              []admissionregistrationv1.RuleWithOperations
	failurePolicy      *admissionregistrationv1.FailurePolicyType
	matchPolicy        *admissionregistrationv1.MatchPolicyType
	sideEffects        *admissionregistrationv1.SideEffectClass
	timeoutSeconds     *int32
	namespaceSelector  *metav1.LabelSelector
	objectSelector     *metav1.LabelSelector
	clientConfig       admissionregistrationv1.WebhookClientConfig
	matchConditions    []admissionregistrationv1.MatchCondition
	reviewVersions     []string
	reinvocationPolicy *admissionregistrationv1.ReinvocationPolicyType
	mutating           bool
}

func mutatingFields(ws []admissionregistrationv1.MutatingWebhook) []webhookFields {
	out := make([]webhookFields, len(ws))
	for i, w := range ws {
		out[i] = webhookFields{name: w.Name, rules: w.Rules, failurePolicy: w.FailurePolicy, matchPolicy: w.MatchPolicy, sideEffects: w.SideEffects,
			timeoutSeconds: w.TimeoutSeconds, namespaceSelector: w.NamespaceSelector, objectSelector: w.ObjectSelector, clientConfig: w.ClientConfig,
			matchConditions: w.MatchConditions, reviewVersions: w.AdmissionReviewVersions, reinvocationPolicy: w.ReinvocationPolicy, mutating: true}
	}
	return out
}

func validatingFields(ws []admissionregistrationv1.ValidatingWebhook) []webhookFields {
	out := make([]webhookFields, len(ws))
	for i, w := range ws {
		out[i] = webhookFields{name: w.Name, rules: w.Rules, failurePolicy: w.FailurePolicy, matchPolicy: w.MatchPolicy, sideEffects: w.SideEffects,
			timeoutSeconds: w.TimeoutSeconds, namespaceSelector: w.NamespaceSelector, objectSelector: w.ObjectSelector, clientConfig: w.ClientConfig,
			matchConditions: w.MatchConditions, reviewVersions: w.AdmissionReviewVersions}
	}
	return out
}

// ValidateMutatingWebhookConfiguration validates a MutatingWebhookConfiguration being created
// (old nil) or updated (old the stored object).
func ValidateMutatingWebhookConfiguration(obj, old *admissionregistrationv1.MutatingWebhookConfiguration) field.ErrorList {
	if obj == nil {
		return field.ErrorList{field.Required(field.NewPath(""), "")}
	}
	opts := createOptions()
	if old != nil {
		opts = updateOptions(mutatingFields(obj.Webhooks), mutatingFields(old.Webhooks))
	}
	return validateConfiguration(&obj.ObjectMeta, mutatingFields(obj.Webhooks), opts)
}

// ValidateValidatingWebhookConfiguration validates a ValidatingWebhookConfiguration being
// created (old nil) or updated (old the stored object).
func ValidateValidatingWebhookConfiguration(obj, old *admissionregistrationv1.ValidatingWebhookConfiguration) field.ErrorList {
	if obj == nil {
		return field.ErrorList{field.Required(field.NewPath(""), "")}
	}
	opts := createOptions()
	if old != nil {
		opts = updateOptions(validatingFields(obj.Webhooks), validatingFields(old.Webhooks))
	}
	return validateConfiguration(&obj.ObjectMeta, validatingFields(obj.Webhooks), opts)
}

func createOptions() options {
	return options{requireNoSideEffects: true, requireRecognizedReviewVersion: true, requireUniqueWebhookNames: true}
}

func updateOptions(hooks, old []webhookFields) options {
	return options{
		ignoreMatchConditions:            sameMatchConditions(hooks, old),
		requireNoSideEffects:             noSideEffects(old),
		requireRecognizedReviewVersion:   acceptedReviewVersions(old),
		requireUniqueWebhookNames:        uniqueNames(old),
		allowInvalidLabelValueInSelector: invalidLabelValueInSelector(old),
	}
}

func sameMatchConditions(hooks, old []webhookFields) bool {
	if len(hooks) != len(old) {
		return false
	}
	for i := range old {
		if !reflect.DeepEqual(hooks[i].matchConditions, old[i].matchConditions) {
			return false
		}
	}
	return true
}

func noSideEffects(hooks []webhookFields) bool {
	for _, h := range hooks {
		if h.sideEffects == nil || !noSideEffectClasses[*h.sideEffects] {
			return false
		}
	}
	return true
}

func acceptedReviewVersions(hooks []webhookFields) bool {
	for _, h := range hooks {
		ok := false
		for _, v := range h.reviewVersions {
			if isAcceptedReviewVersion(v) {
				ok = true
				break
			}
		}
		if !ok && len(h.reviewVersions) > 0 {
			return false
		}
	}
	return true
}

func uniqueNames(hooks []webhookFields) bool {
	seen := map[string]bool{}
	for _, h := range hooks {
		if seen[h.name] {
			return false
		}
		seen[h.name] = true
	}
	return true
}

func invalidLabelValueInSelector(hooks []webhookFields) bool {
	strict := metav1validation.LabelSelectorValidationOptions{}
	for _, h := range hooks {
		if h.namespaceSelector != nil && len(metav1validation.ValidateLabelSelector(h.namespaceSelector, strict, nil)) > 0 {
			return true
		}
		if h.objectSelector != nil && len(metav1validation.ValidateLabelSelector(h.objectSelector, strict, nil)) > 0 {
			return true
		}
	}
	return false
}

func validateConfiguration(meta *metav1.ObjectMeta, hooks []webhookFields, opts options) field.ErrorList {
	all := genericvalidation.ValidateObjectMeta(meta, false, genericvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	names := map[string]bool{}
	for i := range hooks {
		path := field.NewPath("webhooks").Index(i)
		all = append(all, validateWebhook(&hooks[i], opts, path)...)
		all = append(all, validateReviewVersions(hooks[i].reviewVersions, opts.requireRecognizedReviewVersion, path.Child("admissionReviewVersions"))...)
		if opts.requireUniqueWebhookNames && hooks[i].name != "" {
			if names[hooks[i].name] {
				all = append(all, field.Duplicate(path.Child("name"), hooks[i].name))
			}
			names[hooks[i].name] = true
		}
	}
	return all
}

var (
	supportedFailurePolicies = []string{string(admissionregistrationv1.Fail), string(admissionregistrationv1.Ignore)}
	supportedMatchPolicies   = []string{string(admissionregistrationv1.Equivalent), string(admissionregistrationv1.Exact)}
	supportedSideEffects     = []string{
		string(admissionregistrationv1.SideEffectClassNone), string(admissionregistrationv1.SideEffectClassNoneOnDryRun),
		string(admissionregistrationv1.SideEffectClassSome), string(admissionregistrationv1.SideEffectClassUnknown),
	}
	noSideEffectClasses = map[admissionregistrationv1.SideEffectClass]bool{
		admissionregistrationv1.SideEffectClassNone: true, admissionregistrationv1.SideEffectClassNoneOnDryRun: true,
	}
	supportedOperations = []string{
		string(admissionregistrationv1.OperationAll), string(admissionregistrationv1.Connect), string(admissionregistrationv1.Create),
		string(admissionregistrationv1.Delete), string(admissionregistrationv1.Update),
	}
	supportedReinvocationPolicies = []string{string(admissionregistrationv1.IfNeededReinvocationPolicy), string(admissionregistrationv1.NeverReinvocationPolicy)}
	supportedScopes               = []string{string(admissionregistrationv1.AllScopes), string(admissionregistrationv1.ClusterScope), string(admissionregistrationv1.NamespacedScope)}
)

func sortedList(values []string) []string {
	out := append([]string(nil), values...)
	sort.Strings(out)
	return out
}

func has(values []string, v string) bool {
	for _, x := range values {
		if x == v {
			return true
		}
	}
	return false
}

func validateWebhook(h *webhookFields, opts options, path *field.Path) field.ErrorList {
	// Webhook names are fully qualified: a DNS subdomain of at least three segments.
	all := utilvalidation.IsFullyQualifiedName(path.Child("name"), h.name)
	for i := range h.rules {
		all = append(all, validateRuleWithOperations(&h.rules[i], path.Child("rules").Index(i))...)
	}
	if h.failurePolicy != nil && !has(supportedFailurePolicies, string(*h.failurePolicy)) {
		all = append(all, field.NotSupported(path.Child("failurePolicy"), *h.failurePolicy, sortedList(supportedFailurePolicies)))
	}
	if h.matchPolicy != nil && !has(supportedMatchPolicies, string(*h.matchPolicy)) {
		all = append(all, field.NotSupported(path.Child("matchPolicy"), *h.matchPolicy, sortedList(supportedMatchPolicies)))
	}
	allowedSideEffects := supportedSideEffects
	if opts.requireNoSideEffects {
		allowedSideEffects = []string{string(admissionregistrationv1.SideEffectClassNone), string(admissionregistrationv1.SideEffectClassNoneOnDryRun)}
	}
	allowedSideEffects = sortedList(allowedSideEffects)
	if h.sideEffects == nil {
		all = append(all, field.Required(path.Child("sideEffects"), fmt.Sprintf("must specify one of %v", strings.Join(allowedSideEffects, ", "))))
	} else if !has(allowedSideEffects, string(*h.sideEffects)) {
		all = append(all, field.NotSupported(path.Child("sideEffects"), *h.sideEffects, allowedSideEffects))
	}
	if h.timeoutSeconds != nil && (*h.timeoutSeconds > 30 || *h.timeoutSeconds < 1) {
		all = append(all, field.Invalid(path.Child("timeoutSeconds"), *h.timeoutSeconds, "the timeout value must be between 1 and 30 seconds"))
	}
	selOpts := metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: opts.allowInvalidLabelValueInSelector}
	if h.namespaceSelector != nil {
		all = append(all, metav1validation.ValidateLabelSelector(h.namespaceSelector, selOpts, path.Child("namespaceSelector"))...)
	}
	if h.objectSelector != nil {
		all = append(all, metav1validation.ValidateLabelSelector(h.objectSelector, selOpts, path.Child("objectSelector"))...)
	}
	if h.mutating && h.reinvocationPolicy != nil && !has(supportedReinvocationPolicies, string(*h.reinvocationPolicy)) {
		all = append(all, field.NotSupported(path.Child("reinvocationPolicy"), *h.reinvocationPolicy, sortedList(supportedReinvocationPolicies)))
	}
	cc := h.clientConfig
	switch {
	case (cc.URL == nil) == (cc.Service == nil):
		all = append(all, field.Required(path.Child("clientConfig"), "exactly one of url or service is required"))
	case cc.URL != nil:
		all = append(all, ValidateWebhookURL(path.Child("clientConfig").Child("url"), *cc.URL)...)
	case cc.Service != nil:
		port := int32(443)
		if cc.Service.Port != nil {
			port = *cc.Service.Port
		}
		all = append(all, ValidateWebhookService(path.Child("clientConfig").Child("service"), cc.Service.Namespace, cc.Service.Name, cc.Service.Path, port)...)
	}
	if len(cc.CABundle) > 0 {
		all = append(all, validateCABundle(cc.CABundle, path.Child("clientConfig").Child("caBundle"))...)
	}
	if !opts.ignoreMatchConditions {
		all = append(all, validateMatchConditions(h.matchConditions, path.Child("matchConditions"))...)
	}
	return all
}

func hasWildcard(values []string) bool { return has(values, "*") }

func validateRuleWithOperations(r *admissionregistrationv1.RuleWithOperations, path *field.Path) field.ErrorList {
	var all field.ErrorList
	ops := make([]string, len(r.Operations))
	for i, o := range r.Operations {
		ops[i] = string(o)
	}
	if len(ops) == 0 {
		all = append(all, field.Required(path.Child("operations"), ""))
	}
	if len(ops) > 1 && hasWildcard(ops) {
		all = append(all, field.Invalid(path.Child("operations"), r.Operations, "if '*' is present, must not specify other operations"))
	}
	for i, o := range ops {
		if !has(supportedOperations, o) {
			all = append(all, field.NotSupported(path.Child("operations").Index(i), r.Operations[i], sortedList(supportedOperations)))
		}
	}
	return append(all, validateRule(&r.Rule, path)...)
}

func validateRule(r *admissionregistrationv1.Rule, path *field.Path) field.ErrorList {
	var all field.ErrorList
	if len(r.APIGroups) == 0 {
		all = append(all, field.Required(path.Child("apiGroups"), ""))
	}
	if len(r.APIGroups) > 1 && hasWildcard(r.APIGroups) {
		all = append(all, field.Invalid(path.Child("apiGroups"), r.APIGroups, "if '*' is present, must not specify other API groups"))
	}
	// The group may be empty: the core group.
	if len(r.APIVersions) == 0 {
		all = append(all, field.Required(path.Child("apiVersions"), ""))
	}
	if len(r.APIVersions) > 1 && hasWildcard(r.APIVersions) {
		all = append(all, field.Invalid(path.Child("apiVersions"), r.APIVersions, "if '*' is present, must not specify other API versions"))
	}
	for i, v := range r.APIVersions {
		if v == "" {
			all = append(all, field.Required(path.Child("apiVersions").Index(i), ""))
		}
	}
	all = append(all, validateResources(r.Resources, path.Child("resources"))...)
	if r.Scope != nil && !has(supportedScopes, string(*r.Scope)) {
		all = append(all, field.NotSupported(path.Child("scope"), *r.Scope, sortedList(supportedScopes)))
	}
	return all
}

// validateResources checks the resource patterns: "res", "res/sub", "res/*", "*/sub", "*" and
// "*/*", without overlapping wildcards.
func validateResources(resources []string, path *field.Path) field.ErrorList {
	var all field.ErrorList
	if len(resources) == 0 {
		all = append(all, field.Required(path, ""))
	}
	resWithWildcardSub := map[string]bool{} // x/*
	subWithWildcardRes := map[string]bool{} // */x
	hasDoubleWildcard := false              // */*
	hasSingleWildcard := false              // *
	hasResourceWithoutSub := false          // x
	for i, rs := range resources {
		if rs == "" {
			all = append(all, field.Required(path.Index(i), ""))
			continue
		}
		if rs == "*/*" {
			hasDoubleWildcard = true
		}
		if rs == "*" {
			hasSingleWildcard = true
		}
		res, sub, ok := strings.Cut(rs, "/")
		if !ok {
			hasResourceWithoutSub = rs != "*"
			continue
		}
		if resWithWildcardSub[res] {
			all = append(all, field.Invalid(path.Index(i), rs, fmt.Sprintf("if '%s/*' is present, must not specify %s", res, rs)))
		}
		if subWithWildcardRes[sub] {
			all = append(all, field.Invalid(path.Index(i), rs, fmt.Sprintf("if '*/%s' is present, must not specify %s", sub, rs)))
		}
		if sub == "*" {
			resWithWildcardSub[res] = true
		}
		if res == "*" {
			subWithWildcardRes[sub] = true
		}
	}
	if len(resources) > 1 && hasDoubleWildcard {
		all = append(all, field.Invalid(path, resources, "if '*/*' is present, must not specify other resources"))
	}
	if hasSingleWildcard && hasResourceWithoutSub {
		all = append(all, field.Invalid(path, resources, "if '*' is present, must not specify other resources without subresources"))
	}
	return all
}

func isAcceptedReviewVersion(v string) bool { return has(AcceptedAdmissionReviewVersions, v) }

func validateReviewVersions(versions []string, requireRecognized bool, path *field.Path) field.ErrorList {
	var all field.ErrorList
	if len(versions) < 1 {
		return append(all, field.Required(path, fmt.Sprintf("must specify one of %v", strings.Join(AcceptedAdmissionReviewVersions, ", "))))
	}
	seen := map[string]bool{}
	accepted := false
	for i, v := range versions {
		if seen[v] {
			all = append(all, field.Invalid(path.Index(i), v, "duplicate version"))
			continue
		}
		seen[v] = true
		for _, msg := range utilvalidation.IsDNS1035Label(v) {
			all = append(all, field.Invalid(path.Index(i), v, msg))
		}
		if isAcceptedReviewVersion(v) {
			accepted = true
		}
	}
	if requireRecognized && !accepted {
		all = append(all, field.Invalid(path, versions, fmt.Sprintf("must include at least one of %v", strings.Join(AcceptedAdmissionReviewVersions, ", "))))
	}
	return all
}

// ValidateWebhookURL checks a webhook's clientConfig.url: https, a host, no user information,
// fragment or query (upstream's messages).
func ValidateWebhookURL(path *field.Path, rawURL string) field.ErrorList {
	var all field.ErrorList
	const form = "; desired format: https://host[/path]"
	u, err := url.Parse(rawURL)
	if err != nil {
		return append(all, field.Required(path, "url must be a valid URL: "+err.Error()+form))
	}
	if u.Scheme != "https" {
		all = append(all, field.Invalid(path, u.Scheme, "'https' is the only allowed URL scheme"+form))
	}
	if u.Host == "" {
		all = append(all, field.Invalid(path, u.Host, "host must be provided"+form))
	}
	if u.User != nil {
		all = append(all, field.Invalid(path, u.User.String(), "user information is not permitted in the URL"))
	}
	if u.Fragment != "" {
		all = append(all, field.Invalid(path, u.Fragment, "fragments are not permitted in the URL"))
	}
	if u.RawQuery != "" {
		all = append(all, field.Invalid(path, u.RawQuery, "query parameters are not permitted in the URL"))
	}
	return all
}

// ValidateWebhookService checks a webhook's clientConfig.service: name and namespace set, port
// 1-65535, and a path of DNS-subdomain segments starting with "/" (upstream's messages).
func ValidateWebhookService(path *field.Path, namespace, name string, urlPath *string, port int32) field.ErrorList {
	var all field.ErrorList
	if name == "" {
		all = append(all, field.Required(path.Child("name"), "service name is required"))
	}
	if namespace == "" {
		all = append(all, field.Required(path.Child("namespace"), "service namespace is required"))
	}
	if errs := utilvalidation.IsValidPortNum(int(port)); errs != nil {
		all = append(all, field.Invalid(path.Child("port"), port, "port is not valid: "+strings.Join(errs, ", ")))
	}
	if urlPath == nil {
		return all
	}
	p := *urlPath
	if p == "/" || p == "" {
		return all
	}
	if p == "//" {
		return append(all, field.Invalid(path.Child("path"), p, "segment[0] may not be empty"))
	}
	if !strings.HasPrefix(p, "/") {
		all = append(all, field.Invalid(path.Child("path"), p, "must start with a '/'"))
	}
	check := strings.TrimSuffix(p[1:], "/")
	for i, step := range strings.Split(check, "/") {
		if step == "" {
			all = append(all, field.Invalid(path.Child("path"), p, fmt.Sprintf("segment[%d] may not be empty", i)))
			continue
		}
		for _, failure := range utilvalidation.IsDNS1123Subdomain(step) {
			all = append(all, field.Invalid(path.Child("path"), p, fmt.Sprintf("segment[%d]: %v", i, failure)))
		}
	}
	return all
}

// validateCABundle requires a caBundle, when set, to hold at least one PEM certificate (the
// dispatcher could not use it otherwise; upstream fails such webhooks at call time).
func validateCABundle(ca []byte, path *field.Path) field.ErrorList {
	if err := checkPEMCertificates(ca); err != nil {
		return field.ErrorList{field.Invalid(path, "<bundle>", err.Error())}
	}
	return nil
}

func validateMatchConditions(conds []admissionregistrationv1.MatchCondition, path *field.Path) field.ErrorList {
	var all field.ErrorList
	if len(conds) > matchconditions.MaxConditions {
		all = append(all, field.TooMany(path, len(conds), matchconditions.MaxConditions))
	}
	names := map[string]bool{}
	for i, c := range conds {
		p := path.Index(i)
		expr := strings.TrimSpace(c.Expression)
		if expr == "" {
			all = append(all, field.Required(p.Child("expression"), ""))
		} else if _, err := matchconditions.Compile(expr); err != nil {
			all = append(all, field.Invalid(p.Child("expression"), expr, err.Error()))
		}
		if c.Name == "" {
			all = append(all, field.Required(p.Child("name"), ""))
		} else {
			for _, msg := range utilvalidation.IsQualifiedName(c.Name) {
				all = append(all, field.Invalid(p.Child("name"), c.Name, msg))
			}
			if names[c.Name] {
				all = append(all, field.Duplicate(p.Child("name"), c.Name))
			}
			names[c.Name] = true
		}
	}
	return all
}
