package apiserver

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"platform.io/services/gateway/registry"
)

// mustMeta returns an object's metadata (registry.Meta).
func mustMeta(obj runtime.Object) metav1.Object { return registry.Meta(obj) }
