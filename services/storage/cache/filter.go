package cache

import (
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
)

// filter selects objects by namespace, labels and fields. A nil *filter (or one with no
// selectors) selects everything under its namespace prefix.
type filter struct {
	prefix string // key prefix: "<namespace>/" or "" for all namespaces
	labels labels.Selector
	fields fields.Selector
}

func newFilter(namespace, labelSelector, fieldSelector string) (*filter, error) {
	f := &filter{}
	if namespace != "" {
		f.prefix = namespace + "/"
	}
	if s := strings.TrimSpace(labelSelector); s != "" {
		sel, err := labels.Parse(s)
		if err != nil {
			return nil, storage.NewInvalid("labelSelector", "%v", err)
		}
		if !sel.Empty() {
			f.labels = sel
		}
	}
	if s := strings.TrimSpace(fieldSelector); s != "" {
		sel, err := fields.ParseSelector(s)
		if err != nil {
			return nil, storage.NewInvalid("fieldSelector", "%v", err)
		}
		if !sel.Empty() {
			f.fields = sel
		}
	}
	return f, nil
}

// hasSelectors reports whether the filter looks beyond the namespace.
func (f *filter) hasSelectors() bool { return f.labels != nil || f.fields != nil }

// matches reports whether obj passes the selectors (the namespace is matched by key prefix).
func (f *filter) matches(obj *storagev1.Object) bool {
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
