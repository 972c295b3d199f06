package admission

import (
	"context"
	"fmt"
	"reflect"
	"time"
)

// Observer records each plugin's run (metrics): the plugin, "admit" or "validate", the
// operation, whether it rejected, and how long it took.
type Observer func(plugin, typ string, op Operation, rejected bool, d time.Duration)

// Chain is the enabled plugins, built, in Order.
type Chain struct {
	names      []string
	mutators   []Mutator
	validators []Validator
	interested []Interested
	dynamic    []DynamicInterest
	observe    Observer
}

// Build builds the enabled plugins (see Enabled) with their configurations. A plugin this binary
// has no factory for is an error.
func Build(reg *Registry, enabled []string, configs map[string][]byte, deps Deps, observe Observer) (*Chain, error) {
	if observe == nil {
		observe = func(string, string, Operation, bool, time.Duration) {}
	}
	c := &Chain{names: enabled, observe: observe}
	for _, name := range enabled {
		f, ok := reg.Factory(name)
		if !ok {
			return nil, fmt.Errorf("admission plugin %s is not built into this binary", name)
		}
		p, err := f(deps, configs[name])
		if err != nil {
			return nil, fmt.Errorf("admission plugin %s: %w", name, err)
		}
		if m, ok := p.(Mutator); ok {
			c.mutators = append(c.mutators, m)
		}
		if v, ok := p.(Validator); ok {
			c.validators = append(c.validators, v)
		}
		if i, ok := p.(Interested); ok {
			c.interested = append(c.interested, i)
		}
		if d, ok := p.(DynamicInterest); ok && !isNil(d) {
			c.dynamic = append(c.dynamic, d)
		}
	}
	return c, nil
}

func isNil(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// Names are the enabled plugins, in order.
func (c *Chain) Names() []string { return append([]string(nil), c.names...) }

// Admit runs the mutating phase: every mutating plugin in order; when one asks for it (a webhook
// changed the object after webhooks with reinvocationPolicy IfNeeded ran), a second round in which
// the built-in plugins run again and the webhook plugin reinvokes those webhooks. The first
// rejection ends it.
func (c *Chain) Admit(ctx context.Context, a *Attributes) error {
	if err := c.admitRound(ctx, a); err != nil {
		return err
	}
	if a.ReinvocationRequested() {
		a.Reinvocation = true
		defer func() { a.Reinvocation = false }()
		return c.admitRound(ctx, a)
	}
	return nil
}

func (c *Chain) admitRound(ctx context.Context, a *Attributes) error {
	for _, m := range c.mutators {
		start := time.Now()
		err := m.Admit(ctx, a)
		c.observe(m.Name(), "admit", a.Operation, err != nil, time.Since(start))
		if err != nil {
			return err
		}
	}
	return nil
}

// Validate runs the validating phase: every validating plugin in order (the webhook plugin calls
// its webhooks in parallel); the first rejection ends it.
func (c *Chain) Validate(ctx context.Context, a *Attributes) error {
	for _, v := range c.validators {
		start := time.Now()
		err := v.Validate(ctx, a)
		c.observe(v.Name(), "validate", a.Operation, err != nil, time.Since(start))
		if err != nil {
			return err
		}
	}
	return nil
}

// Interests is every plugin's static interest; those of plugins that do not mutate are
// ValidateOnly.
func (c *Chain) Interests() []Interest {
	var out []Interest
	for _, i := range c.interested {
		_, mutates := i.(Mutator)
		for _, in := range i.Interests() {
			in.ValidateOnly = !mutates
			out = append(out, in)
		}
	}
	return out
}

// Dynamic is the plugins whose interest changes at run time.
func (c *Chain) Dynamic() []DynamicInterest { return c.dynamic }
