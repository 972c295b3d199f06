package apiserver

import (
	"k8s.io/apimachinery/pkg/runtime"

	"platform.io/services/gateway/registry"
)

// A kind's rules are its strategy's (registry/builtin, registry/custom and the packages of kinds
// with rules of their own): the store and the verb handlers call them through res.Strategy() and
// never ask which kind they serve.

// checkRequired reports every missing required field of obj as one 400, as its kind's strategy
// finds them.
func checkRequired(res *registry.Resource, obj runtime.Object) error {
	return res.Strategy().CheckRequired(obj)
}

// applyDefaults applies the defaults of res's kind.
func applyDefaults(res *registry.Resource, obj runtime.Object) { res.Strategy().Default(obj) }
