package registry

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Meta returns an object's metadata. Every object the registry's kinds make has it; anything
// else is a programming error (a panic, which the handler chain answers 500).
func Meta(obj runtime.Object) metav1.Object {
	if a, ok := obj.(metav1.ObjectMetaAccessor); ok {
		return a.GetObjectMeta()
	}
	if m, ok := obj.(metav1.Object); ok {
		return m
	}
	panic(fmt.Sprintf("%T has no object metadata", obj))
}
