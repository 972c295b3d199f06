package server_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/services/admission/admission"
)

// The test plugins stand in for built-in plugins (the registry only knows upstream's names), and
// are driven by annotations of the object under admission, so one running service covers every
// case.
const (
	// annMutate "yes" makes the mutator change the object; "same" makes it write a value the
	// object already has (no change).
	annMutate = "test/mutate"
	// annReject names the rejection the validator (or, with annRejectIn "admit", the mutator)
	// returns: forbidden, invalid, toomany, badrequest-wrapped, plain.
	annReject   = "test/reject"
	annRejectIn = "test/reject-in"
	// annBlock makes the validator wait for the test's release (in-flight calls during Stop).
	annBlock = "test/block"
	// annPanic "admit" makes the mutator panic, "validate" the validator (a plugin's bug on one
	// client's object).
	annPanic = "test/panic"
)

// plugins are one service's test plugins, and what they saw.
type plugins struct {
	mu       sync.Mutex
	deps     admission.Deps
	configs  map[string][]byte
	last     *admission.Attributes
	quota    *dynamicPlugin
	owners   *dynamicPlugin
	entered  chan struct{}
	release  chan struct{}
	enabled  []string
	disabled []string
}

func newPlugins() *plugins {
	p := &plugins{
		configs: map[string][]byte{},
		quota:   &dynamicPlugin{name: admission.ResourceQuota, changed: make(chan struct{}), namespaces: []string{"initial"}},
		owners:  &dynamicPlugin{name: admission.OwnerReferencesPermissionEnforcement, changed: make(chan struct{})},
		entered: make(chan struct{}, 1),
		release: make(chan struct{}),
	}
	// The service runs exactly these: two non-default plugins enabled, every default but two
	// disabled.
	p.enabled = []string{admission.AlwaysAdmit, admission.AlwaysDeny, admission.OwnerReferencesPermissionEnforcement}
	for _, n := range admission.DefaultEnabled {
		if n != admission.NamespaceLifecycle && n != admission.ResourceQuota {
			p.disabled = append(p.disabled, n)
		}
	}
	return p
}

// registry builds the test plugins: AlwaysAdmit is the mutator, AlwaysDeny the validator,
// NamespaceLifecycle keeps the deps and declares a static interest, ResourceQuota and
// OwnerReferencesPermissionEnforcement have dynamic interests.
func (p *plugins) registry() *admission.Registry {
	reg := admission.NewRegistry()
	keep := func(name string, plugin admission.Plugin) admission.Factory {
		return func(deps admission.Deps, config []byte) (admission.Plugin, error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.configs[name] = config
			if name == admission.NamespaceLifecycle {
				p.deps = deps
			}
			return plugin, nil
		}
	}
	reg.Register(admission.AlwaysAdmit, keep(admission.AlwaysAdmit, mutatorPlugin{p}))
	reg.Register(admission.AlwaysDeny, keep(admission.AlwaysDeny, validatorPlugin{p}))
	reg.Register(admission.NamespaceLifecycle, keep(admission.NamespaceLifecycle, staticPlugin{}))
	reg.Register(admission.ResourceQuota, keep(admission.ResourceQuota, p.quota))
	reg.Register(admission.OwnerReferencesPermissionEnforcement, keep(admission.OwnerReferencesPermissionEnforcement, p.owners))
	return reg
}

func (p *plugins) lastAttributes() *admission.Attributes {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func (p *plugins) getDeps() admission.Deps {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.deps
}

func annotations(obj any) map[string]string {
	if m, ok := obj.(interface{ GetAnnotations() map[string]string }); ok && m != nil {
		return m.GetAnnotations()
	}
	return nil
}

func rejection(a *admission.Attributes, kind string) error {
	switch kind {
	case "forbidden":
		return admission.Forbidden(a, errors.New("test says no"))
	case "invalid":
		return apierrors.NewInvalid(schema.GroupKind{Kind: a.Kind.Kind}, a.Name, field.ErrorList{
			field.Invalid(field.NewPath("data", "x"), "bad", "must be good"),
			field.Required(field.NewPath("data", "y"), ""),
		})
	case "toomany":
		return apierrors.NewTooManyRequests("limit reached", 7)
	case "badrequest-wrapped":
		return fmt.Errorf("plugin context: %w", apierrors.NewBadRequest("not like this"))
	case "plain":
		return errors.New("boom")
	}
	return nil
}

// pluginBug panics as a plugin's bug would: a write to a nil map.
func pluginBug() {
	var seen map[string]bool
	seen["x"] = true
}

type mutatorPlugin struct{ p *plugins }

func (mutatorPlugin) Name() string { return admission.AlwaysAdmit }

func (m mutatorPlugin) Admit(_ context.Context, a *admission.Attributes) error {
	m.p.mu.Lock()
	m.p.last = a
	m.p.mu.Unlock()
	a.AddAnnotation("test/admitted", string(a.Operation))
	ann := annotations(a.Object)
	if ann[annPanic] == "admit" {
		pluginBug()
	}
	if ann[annRejectIn] == "admit" {
		return rejection(a, ann[annReject])
	}
	switch ann[annMutate] {
	case "yes":
		a.AddWarning("mutated by the test plugin")
		switch o := a.Object.(type) {
		case *corev1.ConfigMap:
			if o.Data == nil {
				o.Data = map[string]string{}
			}
			o.Data["mutated"] = "true"
		case *unstructured.Unstructured:
			labels := o.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			labels["mutated"] = "true"
			o.SetLabels(labels)
		}
	case "same":
		if o, ok := a.Object.(*corev1.ConfigMap); ok {
			// A new map with the same content, and a value written over itself.
			labels := map[string]string{}
			for k, v := range o.Labels {
				labels[k] = v
			}
			o.Labels = labels
			o.Data["k"] = o.Data["k"]
		}
	}
	return nil
}

type validatorPlugin struct{ p *plugins }

func (validatorPlugin) Name() string { return admission.AlwaysDeny }

func (v validatorPlugin) Validate(ctx context.Context, a *admission.Attributes) error {
	v.p.mu.Lock()
	v.p.last = a
	v.p.mu.Unlock()
	ann := annotations(a.Object)
	if ann[annPanic] == "validate" {
		pluginBug()
	}
	if ann[annBlock] != "" {
		v.p.entered <- struct{}{}
		select {
		case <-v.p.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	a.AddWarning("validated by the test plugin")
	a.AddAnnotation("test/validated", "true")
	if ann[annRejectIn] == "" {
		return rejection(a, ann[annReject])
	}
	return nil
}

// staticPlugin declares a static interest only.
type staticPlugin struct{}

func (staticPlugin) Name() string { return admission.NamespaceLifecycle }

func (staticPlugin) Interests() []admission.Interest {
	return []admission.Interest{{
		Operations: []admission.Operation{admission.Create, admission.Delete},
		APIGroups:  []string{""},
		Resources:  []string{"configmaps", "namespaces"},
		Scope:      "*",
		UserGroups: []string{"system:authenticated"},
	}}
}

func (staticPlugin) Validate(context.Context, *admission.Attributes) error { return nil }

// dynamicPlugin's interest is set by the test, which then signals Changed.
type dynamicPlugin struct {
	name       string
	mu         sync.Mutex
	namespaces []string
	owners     bool
	changed    chan struct{}
}

func (d *dynamicPlugin) Name() string { return d.name }

func (d *dynamicPlugin) Validate(context.Context, *admission.Attributes) error { return nil }

func (d *dynamicPlugin) Namespaces() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.namespaces...)
}

func (d *dynamicPlugin) OwnerReferences() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.owners
}

func (d *dynamicPlugin) Changed() <-chan struct{} { return d.changed }

// set changes the interest and signals it (the send returns once the service took the signal).
func (d *dynamicPlugin) set(namespaces []string, owners bool) {
	d.mu.Lock()
	d.namespaces, d.owners = namespaces, owners
	d.mu.Unlock()
	d.changed <- struct{}{}
}
