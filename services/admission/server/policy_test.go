package server_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
	"platform.io/libs/storage"
	admissionv1 "platform.io/proto/admission/v1"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/server"
)

// startPolicies starts storage and the admission service with the real ValidatingAdmissionPolicy
// plugin alone.
func startPolicies(t *testing.T) *env {
	t.Helper()
	st, client := startStorage(t, "127.0.0.1:0")
	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Storage.Address = st.Addr().String()
	cfg.Authz.Address = "127.0.0.1:1"
	cfg.ShutdownTimeout = 5 * time.Second
	for _, n := range admission.DefaultEnabled {
		if n != admission.ValidatingAdmissionPolicy {
			cfg.DisablePlugins = append(cfg.DisablePlugins, n)
		}
	}
	adm, err := server.Start(context.Background(), cfg, server.Options{}, discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { adm.Stop(context.Background()) })
	conn, err := grpc.NewClient(adm.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	e := &env{adm: adm, store: client, client: admissionv1.NewAdmissionClient(conn), health: healthpb.NewHealthClient(conn)}
	e.waitReady(t)
	return e
}

// write creates or replaces a stored built-in object as the gateway stores it.
func (e *env) write(t *testing.T, group, resource, kind string, obj interface {
	storage.Marshaler
	GetNamespace() string
	GetName() string
}) {
	t.Helper()
	apiVersion := "v1"
	if group != "" {
		apiVersion = group + "/v1"
	}
	value, err := storage.EncodeStored(apiVersion, kind, obj)
	if err != nil {
		t.Fatal(err)
	}
	typ := &storagev1.ResourceType{Group: group, Resource: resource}
	o := &storagev1.Object{Namespace: obj.GetNamespace(), Name: obj.GetName(), Value: value}
	ctx := context.Background()
	if _, err := e.store.Create(ctx, &storagev1.CreateRequest{Type: typ, Object: o}); storage.IsAlreadyExists(err) {
		_, err = e.store.Update(ctx, &storagev1.UpdateRequest{Type: typ, Object: o})
		if err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
}

func (e *env) remove(t *testing.T, group, resource, namespace, name string) {
	t.Helper()
	if _, err := e.store.Delete(context.Background(), &storagev1.DeleteRequest{Type: &storagev1.ResourceType{Group: group, Resource: resource},
		Namespace: namespace, Name: name}); err != nil {
		t.Fatal(err)
	}
}

func hasRule(set *admissionv1.InterestSet, group, resource string) bool {
	for _, r := range set.GetRules() {
		if slices.Contains(r.GetApiGroups(), group) && slices.Contains(r.GetResources(), resource) {
			return true
		}
	}
	return false
}

// A policy and its binding stored as the gateway stores them: the bound rules join the interest
// stream, requests are denied with upstream's message, warned and audited per the binding's
// actions, params are read from storage and followed, and deleting the binding drops the
// interest.
func TestValidatingAdmissionPolicy(t *testing.T) {
	e := startPolicies(t)
	ctx := context.Background()
	group := naming.Group("admissionregistration.k8s.io")
	e.write(t, "", "namespaces", "Namespace", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"env": "test"}}})
	e.write(t, "", "configmaps", "ConfigMap", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "limits"}, Data: map[string]string{"max": "1"}})

	stream, err := e.client.WatchInterest(ctx, &admissionv1.WatchInterestRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if set := recvSet(t, stream); hasRule(set, "", "configmaps") {
		t.Fatalf("interest before any policy: %v", set)
	}
	fail := admissionregistrationv1.Fail
	e.write(t, group, "validatingadmissionpolicies", "ValidatingAdmissionPolicy", &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "max-keys"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			ParamKind:     &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				}}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "size(object.data) <= int(params.data.max)",
				MessageExpression: "'at most ' + params.data.max + ' keys'"}},
		},
	})
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "max-keys"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "max-keys",
			ParamRef:          &admissionregistrationv1.ParamRef{Name: "limits", ParameterNotFoundAction: ptrTo(admissionregistrationv1.DenyAction)},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
	e.write(t, group, "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", binding)
	for set := recvSet(t, stream); !hasRule(set, "", "configmaps"); set = recvSet(t, stream) {
	}

	two := configMap("two", nil)
	two.Data["k2"] = "v2"
	resp, err := e.client.Validate(ctx, createRequest(t, two))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Allowed || resp.Rejection.GetCode() != 422 || resp.Rejection.GetReason() != "Invalid" ||
		resp.Rejection.GetMessage() != `configmaps "two" is forbidden: ValidatingAdmissionPolicy 'max-keys' with binding 'max-keys' denied request: at most 1 keys` {
		t.Fatalf("Validate = %v", resp)
	}
	if resp, err := e.client.Validate(ctx, createRequest(t, configMap("one", nil))); err != nil || !resp.Allowed {
		t.Fatalf("one key: %v %v", resp, err)
	}

	// The param is followed: a larger limit lets two keys through.
	e.write(t, "", "configmaps", "ConfigMap", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "limits"}, Data: map[string]string{"max": "2"}})
	eventually(t, "the changed param", func() bool {
		resp, err := e.client.Validate(ctx, createRequest(t, two))
		return err == nil && resp.Allowed
	})

	// Warn and Audit instead of Deny: allowed, with the warning and the annotation.
	e.write(t, "", "configmaps", "ConfigMap", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "limits"}, Data: map[string]string{"max": "1"}})
	binding.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn, admissionregistrationv1.Audit}
	e.write(t, group, "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", binding)
	eventually(t, "the changed binding and param", func() bool {
		resp, err = e.client.Validate(ctx, createRequest(t, two))
		return err == nil && resp.Allowed && len(resp.Warnings) > 0
	})
	if !slices.Equal(resp.Warnings, []string{"Validation failed for ValidatingAdmissionPolicy 'max-keys' with binding 'max-keys': at most 1 keys"}) {
		t.Errorf("warnings %q", resp.Warnings)
	}
	if a := resp.AuditAnnotations["validation.policy.admission."+naming.GroupSuffix+"/validation_failure"]; !strings.Contains(a, `"message":"at most 1 keys"`) ||
		!strings.Contains(a, `"validationActions":["Warn","Audit"]`) {
		t.Errorf("audit annotations %v", resp.AuditAnnotations)
	}

	// Without its binding the policy does nothing, and the interest goes.
	e.remove(t, group, "validatingadmissionpolicybindings", "", "max-keys")
	for set := recvSet(t, stream); hasRule(set, "", "configmaps"); set = recvSet(t, stream) {
	}
	if resp, err := e.client.Validate(ctx, createRequest(t, two)); err != nil || !resp.Allowed || len(resp.Warnings) != 0 {
		t.Fatalf("after the binding's deletion: %v %v", resp, err)
	}
}

func ptrTo[T any](v T) *T { return &v }
