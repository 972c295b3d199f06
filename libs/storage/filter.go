package storage

import (
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	storagev1 "platform.io/proto/storage/v1"
)

// Filter selects stored objects by namespace, labels and fields, as lists and watches do: the
// labels and fields are the index attributes writes carry (storagev1.Object's labels and
// fields), with metadata.name and metadata.namespace implicit. The storage service's cache and
// the gateway's list cache share it, so a selection means the same wherever it is made. A
// Filter without selectors selects everything under its namespace.
type Filter struct {
	prefix string // key prefix: "<namespace>/" or "" for all namespaces
	labels labels.Selector
	fields fields.Selector
}

// NewFilter parses a list's or watch's namespace and selectors; a malformed selector is an
// INVALID error naming its parameter.
func NewFilter(namespace, labelSelector, fieldSelector string) (*Filter, error) {
	f := &Filter{}
	if namespace != "" {
		f.prefix = namespace + "/"
	}
	if s := strings.TrimSpace(labelSelector); s != "" {
		sel, err := labels.Parse(s)
		if err != nil {
			return nil, NewInvalid("labelSelector", "%v", err)
		}
		if !sel.Empty() {
			f.labels = sel
		}
	}
	if s := strings.TrimSpace(fieldSelector); s != "" {
		sel, err := fields.ParseSelector(s)
		if err != nil {
			return nil, NewInvalid("fieldSelector", "%v", err)
		}
		if !sel.Empty() {
			f.fields = sel
		}
	}
	return f, nil
}

// Prefix is the key prefix of the filter's namespace ("<namespace>/"), or "" for every namespace.
func (f *Filter) Prefix() string { return f.prefix }

// HasSelectors reports whether the filter looks beyond the namespace.
func (f *Filter) HasSelectors() bool { return f.labels != nil || f.fields != nil }

// Matches reports whether obj passes the selectors (the namespace is matched by key prefix, by
// the caller).
func (f *Filter) Matches(obj *storagev1.Object) bool {
	if obj == nil {
		return false
	}
	if f.labels != nil && !f.labels.Matches(labels.Set(obj.GetLabels())) {
		return false
	}
	if f.fields != nil && !f.fields.Matches(objectFields{obj}) {
		return false
	}
	return true
}

// objectFields exposes an object's selectable fields without building a map per match.
type objectFields struct{ obj *storagev1.Object }

func (o objectFields) Has(field string) bool {
	switch field {
	case "metadata.name", "metadata.namespace":
		return true
	}
	_, ok := o.obj.GetFields()[field]
	return ok
}

func (o objectFields) Get(field string) string {
	switch field {
	case "metadata.name":
		return o.obj.GetName()
	case "metadata.namespace":
		return o.obj.GetNamespace()
	}
	return o.obj.GetFields()[field]
}
