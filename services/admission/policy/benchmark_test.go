package policy

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// BenchmarkValidate is the plugin's own cost per config map create, in process (no service, no
// gRPC): with no policy, and matched by one policy with two validations (one with a
// messageExpression) that admits it (upstream's dispatcher, matcher and CEL evaluation, and the
// glue: the hook set, the attributes).
func BenchmarkValidate(b *testing.B) {
	e := newEnv(&testing.T{}, nil)
	cm := configMap("default", "obj", map[string]string{"app": "bench"}, map[string]string{"key1": "value-one", "key2": "value-two"})
	run := func(b *testing.B) {
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if err := e.plugin.Validate(ctx, createCM(cm)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("none", run)
	e.policy("bench", func(s *admissionregistrationv1.ValidatingAdmissionPolicySpec) {
		s.Validations = []admissionregistrationv1.Validation{
			{Expression: "!has(object.data) || size(object.data) <= 16", MessageExpression: "'too many keys: ' + string(size(object.data))"},
			validation("!object.metadata.name.startsWith('denied')", "denied names"),
		}
	})
	e.binding("bench", "bench", nil)
	b.Run("one-policy", run)
}
