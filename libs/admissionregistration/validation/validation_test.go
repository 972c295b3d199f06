package validation

import (
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/pki"
)

func ptr[T any](v T) *T { return &v }

func validHook() admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name:                    "check.example.com",
		ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr("https://hooks.example.com/check")},
		Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE"}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
		SideEffects:             ptr(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
	}
}

func validating(hooks ...admissionregistrationv1.ValidatingWebhook) *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "config"}, Webhooks: hooks}
}

func with(f func(h *admissionregistrationv1.ValidatingWebhook)) *admissionregistrationv1.ValidatingWebhookConfiguration {
	h := validHook()
	f(&h)
	return validating(h)
}

func rules(ops []string, groups, versions, resources []string) []admissionregistrationv1.RuleWithOperations {
	r := admissionregistrationv1.RuleWithOperations{Rule: admissionregistrationv1.Rule{APIGroups: groups, APIVersions: versions, Resources: resources}}
	for _, o := range ops {
		r.Operations = append(r.Operations, admissionregistrationv1.OperationType(o))
	}
	return []admissionregistrationv1.RuleWithOperations{r}
}

func conditions(n int) []admissionregistrationv1.MatchCondition {
	var out []admissionregistrationv1.MatchCondition
	for i := 0; i < n; i++ {
		out = append(out, admissionregistrationv1.MatchCondition{Name: fmt.Sprintf("c%d", i), Expression: "true"})
	}
	return out
}

// Upstream's ValidateValidatingWebhookConfiguration (v1) rules and messages, on create.
func TestValidateValidatingWebhookConfiguration(t *testing.T) {
	ca, err := pki.NewCA("ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		obj  *admissionregistrationv1.ValidatingWebhookConfiguration
		want []string // substrings of the aggregated errors; none means valid
	}{
		{"valid", validating(validHook()), nil},
		{"no webhooks", validating(), nil},
		{"configuration name must be a DNS subdomain", func() *admissionregistrationv1.ValidatingWebhookConfiguration {
			c := validating(validHook())
			c.Name = "Bad_Name"
			return c
		}(), []string{"metadata.name: Invalid value: \"Bad_Name\""}},
		{"webhook names unique", validating(validHook(), validHook()), []string{`webhooks[1].name: Duplicate value: "check.example.com"`}},
		{"webhook name needs three segments", with(func(h *admissionregistrationv1.ValidatingWebhook) { h.Name = "example.com" }),
			[]string{`webhooks[0].name: Invalid value: "example.com": should be a domain with at least three segments separated by dots`}},
		{"webhook name required", with(func(h *admissionregistrationv1.ValidatingWebhook) { h.Name = "" }), []string{"webhooks[0].name: Required value"}},
		{"webhook name a DNS subdomain", with(func(h *admissionregistrationv1.ValidatingWebhook) { h.Name = "Check.Example.Com" }), []string{"webhooks[0].name: Invalid value"}},
		{"operations required", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.Rules = rules(nil, []string{""}, []string{"v1"}, []string{"pods"})
		}),
			[]string{"webhooks[0].rules[0].operations: Required value"}},
		{"operation * alone", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.Rules = rules([]string{"*", "CREATE"}, []string{""}, []string{"v1"}, []string{"pods"})
		}), []string{"if '*' is present, must not specify other operations"}},
		{"unknown operation", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.Rules = rules([]string{"PATCH"}, []string{""}, []string{"v1"}, []string{"pods"})
		}),
			[]string{`webhooks[0].rules[0].operations[0]: Unsupported value: "PATCH": supported values: "*", "CONNECT", "CREATE", "DELETE", "UPDATE"`}},
		{"apiGroups required", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.Rules = rules([]string{"*"}, nil, []string{"v1"}, []string{"pods"})
		}),
			[]string{"webhooks[0].rules[0].apiGroups: Required value"}},
		{"apiGroups * alone", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.Rules = rules([]string{"*"}, []string{"*", "apps"}, []string{"v1"}, []string{"pods"})
		}),
			[]string{"if '*' is present, must not specify other API groups"}},
		{"apiVersions required", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.Rules = rules([]string{"*"}, []string{""}, nil, []string{"pods"})
		}),
			[]string{"webhooks[0].rules[0].apiVersions: Required value"}},
		{"empty apiVersion", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.Rules = rules([]string{"*"}, []string{""}, []string{""}, []string{"pods"})
		}),
			[]string{"webhooks[0].rules[0].apiVersions[0]: Required value"}},
		{"apiVersions * alone", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.Rules = rules([]string{"*"}, []string{""}, []string{"*", "v1"}, []string{"pods"})
		}),
			[]string{"if '*' is present, must not specify other API versions"}},
		{"resources required", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.Rules = rules([]string{"*"}, []string{""}, []string{"v1"}, nil)
		}),
			[]string{"webhooks[0].rules[0].resources: Required value"}},
		{"*/* alone", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.Rules = rules([]string{"*"}, []string{""}, []string{"v1"}, []string{"*/*", "pods"})
		}),
			[]string{"if '*/*' is present, must not specify other resources"}},
		{"* with a resource", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.Rules = rules([]string{"*"}, []string{""}, []string{"v1"}, []string{"*", "pods"})
		}),
			[]string{"if '*' is present, must not specify other resources without subresources"}},
		{"* with subresources is fine", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.Rules = rules([]string{"*"}, []string{""}, []string{"v1"}, []string{"*", "pods/status"})
		}), nil},
		{"pods/* then pods/status", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.Rules = rules([]string{"*"}, []string{""}, []string{"v1"}, []string{"pods/*", "pods/status"})
		}), []string{"if 'pods/*' is present, must not specify pods/status"}},
		{"*/status then pods/status", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.Rules = rules([]string{"*"}, []string{""}, []string{"v1"}, []string{"*/status", "pods/status"})
		}), []string{"if '*/status' is present, must not specify pods/status"}},
		{"scope", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.Rules[0].Scope = ptr(admissionregistrationv1.ScopeType("Everywhere"))
		}),
			[]string{`Unsupported value: "Everywhere": supported values: "*", "Cluster", "Namespaced"`}},
		{"clientConfig: neither url nor service", with(func(h *admissionregistrationv1.ValidatingWebhook) { h.ClientConfig.URL = nil }),
			[]string{"webhooks[0].clientConfig: Required value: exactly one of url or service is required"}},
		{"clientConfig: both", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.ClientConfig.Service = &admissionregistrationv1.ServiceReference{Namespace: "ns", Name: "svc"}
		}), []string{"exactly one of url or service is required"}},
		{"url: http", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.ClientConfig.URL = ptr("http://hooks.example.com/")
		}),
			[]string{`webhooks[0].clientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path]`}},
		{"url: no host", with(func(h *admissionregistrationv1.ValidatingWebhook) { h.ClientConfig.URL = ptr("https:///path") }), []string{"host must be provided"}},
		{"url: user info", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.ClientConfig.URL = ptr("https://u:p@hooks.example.com/")
		}),
			[]string{"user information is not permitted in the URL"}},
		{"url: fragment", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.ClientConfig.URL = ptr("https://hooks.example.com/#f")
		}),
			[]string{"fragments are not permitted in the URL"}},
		{"url: query", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.ClientConfig.URL = ptr("https://hooks.example.com/?a=b")
		}),
			[]string{"query parameters are not permitted in the URL"}},
		{"service: name and namespace required", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.ClientConfig.URL, h.ClientConfig.Service = nil, &admissionregistrationv1.ServiceReference{}
		}), []string{"clientConfig.service.name: Required value: service name is required", "clientConfig.service.namespace: Required value: service namespace is required"}},
		{"service: port", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.ClientConfig.URL, h.ClientConfig.Service = nil, &admissionregistrationv1.ServiceReference{Namespace: "ns", Name: "svc", Port: ptr(int32(70000))}
		}), []string{"clientConfig.service.port: Invalid value: 70000: port is not valid: must be between 1 and 65535, inclusive"}},
		{"service: path segments", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.ClientConfig.URL, h.ClientConfig.Service = nil, &admissionregistrationv1.ServiceReference{Namespace: "ns", Name: "svc", Path: ptr("/a//B")}
		}), []string{"segment[1] may not be empty", "segment[2]: a lowercase RFC 1123 subdomain"}},
		{"service: path must start with /", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.ClientConfig.URL, h.ClientConfig.Service = nil, &admissionregistrationv1.ServiceReference{Namespace: "ns", Name: "svc", Path: ptr("validate")}
		}), []string{"must start with a '/'"}},
		{"service: valid path", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.ClientConfig.URL, h.ClientConfig.Service = nil, &admissionregistrationv1.ServiceReference{Namespace: "ns", Name: "svc", Path: ptr("/validate/pods/")}
		}), nil},
		{"caBundle must be PEM", with(func(h *admissionregistrationv1.ValidatingWebhook) { h.ClientConfig.CABundle = []byte("garbage") }),
			[]string{"webhooks[0].clientConfig.caBundle: Invalid value", "must be a PEM-encoded bundle of CA certificates"}},
		{"caBundle PEM", with(func(h *admissionregistrationv1.ValidatingWebhook) { h.ClientConfig.CABundle = ca.CertPEM }), nil},
		{"sideEffects required", with(func(h *admissionregistrationv1.ValidatingWebhook) { h.SideEffects = nil }),
			[]string{"webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun"}},
		{"sideEffects Some refused", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.SideEffects = ptr(admissionregistrationv1.SideEffectClassSome)
		}),
			[]string{`webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"`}},
		{"sideEffects Unknown refused", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.SideEffects = ptr(admissionregistrationv1.SideEffectClassUnknown)
		}),
			[]string{`Unsupported value: "Unknown"`}},
		{"sideEffects NoneOnDryRun", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.SideEffects = ptr(admissionregistrationv1.SideEffectClassNoneOnDryRun)
		}), nil},
		{"timeout 0", with(func(h *admissionregistrationv1.ValidatingWebhook) { h.TimeoutSeconds = ptr(int32(0)) }),
			[]string{"webhooks[0].timeoutSeconds: Invalid value: 0: the timeout value must be between 1 and 30 seconds"}},
		{"timeout 31", with(func(h *admissionregistrationv1.ValidatingWebhook) { h.TimeoutSeconds = ptr(int32(31)) }), []string{"the timeout value must be between 1 and 30 seconds"}},
		{"timeout 30", with(func(h *admissionregistrationv1.ValidatingWebhook) { h.TimeoutSeconds = ptr(int32(30)) }), nil},
		{"failurePolicy", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.FailurePolicy = ptr(admissionregistrationv1.FailurePolicyType("Retry"))
		}),
			[]string{`webhooks[0].failurePolicy: Unsupported value: "Retry": supported values: "Fail", "Ignore"`}},
		{"matchPolicy", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.MatchPolicy = ptr(admissionregistrationv1.MatchPolicyType("Loose"))
		}),
			[]string{`webhooks[0].matchPolicy: Unsupported value: "Loose": supported values: "Equivalent", "Exact"`}},
		{"admissionReviewVersions required", with(func(h *admissionregistrationv1.ValidatingWebhook) { h.AdmissionReviewVersions = nil }),
			[]string{"webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1"}},
		{"no supported admissionReviewVersion", with(func(h *admissionregistrationv1.ValidatingWebhook) { h.AdmissionReviewVersions = []string{"v2"} }),
			[]string{`webhooks[0].admissionReviewVersions: Invalid value: []string{"v2"}: must include at least one of v1, v1beta1`}},
		{"duplicate admissionReviewVersion", with(func(h *admissionregistrationv1.ValidatingWebhook) { h.AdmissionReviewVersions = []string{"v1", "v1"} }),
			[]string{`webhooks[0].admissionReviewVersions[1]: Invalid value: "v1": duplicate version`}},
		{"admissionReviewVersion a DNS label", with(func(h *admissionregistrationv1.ValidatingWebhook) { h.AdmissionReviewVersions = []string{"v1", "V_2"} }),
			[]string{`admissionReviewVersions[1]: Invalid value: "V_2"`}},
		{"namespaceSelector", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "In"}}}
		}), []string{"webhooks[0].namespaceSelector.matchExpressions[0].values: Required value"}},
		{"objectSelector label value", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "not valid!"}}
		}), []string{"webhooks[0].objectSelector.matchLabels: Invalid value: \"not valid!\""}},
		{"matchConditions: valid", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "not-system", Expression: "!request.userInfo.username.startsWith('system:')"}}
		}), nil},
		{"matchConditions: at most 64", with(func(h *admissionregistrationv1.ValidatingWebhook) { h.MatchConditions = conditions(65) }),
			[]string{"webhooks[0].matchConditions: Too many: 65: must have at most 64 items"}},
		{"matchConditions: 64", with(func(h *admissionregistrationv1.ValidatingWebhook) { h.MatchConditions = conditions(64) }), nil},
		{"matchConditions: names unique", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "a", Expression: "true"}, {Name: "a", Expression: "false"}}
		}), []string{`webhooks[0].matchConditions[1].name: Duplicate value: "a"`}},
		{"matchConditions: name required and qualified", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.MatchConditions = []admissionregistrationv1.MatchCondition{{Expression: "true"}, {Name: "not a name", Expression: "true"}}
		}), []string{"webhooks[0].matchConditions[0].name: Required value", `webhooks[0].matchConditions[1].name: Invalid value: "not a name"`}},
		{"matchConditions: expression required", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "a", Expression: "  "}}
		}), []string{"webhooks[0].matchConditions[0].expression: Required value"}},
		{"matchConditions: must compile", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "a", Expression: "object.metadata.name =="}}
		}), []string{`webhooks[0].matchConditions[0].expression: Invalid value: "object.metadata.name ==": compilation failed: ERROR: <input>:1:24: Syntax error`}},
		{"matchConditions: must be boolean", with(func(h *admissionregistrationv1.ValidatingWebhook) {
			h.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "a", Expression: "object.metadata.name"}}
		}), []string{"must evaluate to bool"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := ValidateValidatingWebhookConfiguration(tc.obj, nil)
			got := errs.ToAggregate()
			if len(tc.want) == 0 {
				if got != nil {
					t.Fatalf("unexpected errors: %v", got)
				}
				return
			}
			if got == nil {
				t.Fatalf("no errors, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(got.Error(), w) {
					t.Errorf("errors %q do not contain %q", got.Error(), w)
				}
			}
		})
	}
}

// The mutating configuration adds reinvocationPolicy.
func TestValidateMutatingWebhookConfiguration(t *testing.T) {
	v := validHook()
	h := admissionregistrationv1.MutatingWebhook{Name: v.Name, ClientConfig: v.ClientConfig, Rules: v.Rules, SideEffects: v.SideEffects, AdmissionReviewVersions: v.AdmissionReviewVersions}
	obj := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Webhooks: []admissionregistrationv1.MutatingWebhook{h}}
	if errs := ValidateMutatingWebhookConfiguration(obj, nil); len(errs) != 0 {
		t.Fatalf("valid: %v", errs)
	}
	obj.Webhooks[0].ReinvocationPolicy = ptr(admissionregistrationv1.ReinvocationPolicyType("Always"))
	errs := ValidateMutatingWebhookConfiguration(obj, nil).ToAggregate()
	if errs == nil || !strings.Contains(errs.Error(), `webhooks[0].reinvocationPolicy: Unsupported value: "Always": supported values: "IfNeeded", "Never"`) {
		t.Errorf("got %v", errs)
	}
	obj.Webhooks[0].ReinvocationPolicy = ptr(admissionregistrationv1.IfNeededReinvocationPolicy)
	obj.Webhooks = append(obj.Webhooks, obj.Webhooks[0])
	errs = ValidateMutatingWebhookConfiguration(obj, nil).ToAggregate()
	if errs == nil || !strings.Contains(errs.Error(), `webhooks[1].name: Duplicate value`) {
		t.Errorf("got %v", errs)
	}
}

// Upstream's update rules: what the stored object already had stays allowed.
func TestValidateUpdate(t *testing.T) {
	legacy := validHook()
	legacy.SideEffects = ptr(admissionregistrationv1.SideEffectClassSome)
	legacy.AdmissionReviewVersions = []string{"v2"}
	legacy.ObjectSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "In", Values: []string{"not valid!"}}}}
	legacy.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "a", Expression: "object.metadata.name"}} // stored before a rule tightened
	old := validating(legacy, legacy)

	updated := old.DeepCopy()
	updated.Webhooks[0].TimeoutSeconds = ptr(int32(5))
	if errs := ValidateValidatingWebhookConfiguration(updated, old); len(errs) != 0 {
		t.Errorf("an update keeping what the stored object had: %v", errs)
	}
	if errs := ValidateValidatingWebhookConfiguration(updated, nil); len(errs) == 0 {
		t.Error("the same object is accepted on create")
	}
	// Changed matchConditions are compiled again.
	changed := updated.DeepCopy()
	changed.Webhooks[0].MatchConditions[0].Expression = "object.metadata.namespace"
	if errs := ValidateValidatingWebhookConfiguration(changed, old).ToAggregate(); errs == nil || !strings.Contains(errs.Error(), "must evaluate to bool") {
		t.Errorf("changed conditions: %v", errs)
	}
	// A stored object that met the create rules is held to them.
	good := validating(validHook())
	bad := good.DeepCopy()
	bad.Webhooks[0].SideEffects = ptr(admissionregistrationv1.SideEffectClassSome)
	if errs := ValidateValidatingWebhookConfiguration(bad, good); len(errs) == 0 {
		t.Error("side effects introduced by an update were accepted")
	}
}
