package core

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
)

// Component is one service behind the gateway as core componentstatuses report it: its name and
// its health check (the same check /readyz runs for it).
type Component struct {
	Name  string
	Check func(ctx context.Context) error
}

// ComponentStatus is the strategy of core componentstatuses (deprecated upstream since 1.19,
// still served by 1.33): what the gateway knows of the health of its components, computed on
// each read and never stored (registry.Computer): one ComponentStatus per component (storage,
// authentication, authorization, admission), with upstream's single Healthy condition: "True"
// with message "ok", or "False" with the check's error.
type ComponentStatus struct {
	*builtin.Strategy
	components []Component
}

// NewComponentStatus returns the strategy of componentstatuses reporting components.
func NewComponentStatus(b *builtin.Strategy, components []Component) registry.Strategy {
	return &ComponentStatus{Strategy: b, components: components}
}

// Compute checks the components keep selects, concurrently, and returns their statuses in the
// components' order.
func (s *ComponentStatus) Compute(ctx context.Context, keep func(name string, labels map[string]string) bool) ([]runtime.Object, error) {
	var out []runtime.Object
	var wg sync.WaitGroup
	for _, c := range s.components {
		if !keep(c.Name, nil) {
			continue
		}
		cs := &corev1.ComponentStatus{ObjectMeta: metav1.ObjectMeta{Name: c.Name}}
		cs.SetGroupVersionKind(s.Res.GroupVersionKind())
		out = append(out, cs)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cond := corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionTrue, Message: "ok"}
			if err := c.Check(ctx); err != nil {
				cond = corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionFalse, Error: err.Error()}
			}
			cs.Conditions = []corev1.ComponentCondition{cond}
		}()
	}
	wg.Wait()
	return out, nil
}
