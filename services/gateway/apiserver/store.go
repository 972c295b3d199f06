package apiserver

import (
	"context"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/gateway/registry"
)

// storageType is the storage identity of a resource: one per group and resource, whatever the version.
func storageType(res *registry.Resource) *storagev1.ResourceType {
	if s := res.StoredAs; s != nil {
		return &storagev1.ResourceType{Group: s.Group, Resource: s.Resource}
	}
	return &storagev1.ResourceType{Group: res.Group, Resource: res.Resource}
}

// toStored turns an object into the storage service's form: its encoding without a
// resourceVersion (storage assigns it), plus the labels and fields storage indexes for selectors.
func (a *API) toStored(res *registry.Resource, obj runtime.Object) (*storagev1.Object, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	rv := acc.GetResourceVersion()
	acc.SetResourceVersion("")
	st := res.Strategy()
	value, err := st.EncodeStored(obj)
	acc.SetResourceVersion(rv)
	if err != nil {
		return nil, err
	}
	return &storagev1.Object{
		Namespace: acc.GetNamespace(),
		Name:      acc.GetName(),
		Value:     value,
		Uid:       string(acc.GetUID()),
		Labels:    acc.GetLabels(),
		Fields:    st.Fields(obj),
	}, nil
}

// fromStored decodes a stored object and sets its resourceVersion.
func (a *API) fromStored(res *registry.Resource, o *storagev1.Object) (runtime.Object, error) {
	obj, err := a.codec.decodeStored(o.Value, res)
	if err != nil {
		return nil, err
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	acc.SetResourceVersion(strconv.FormatInt(o.ResourceVersion, 10))
	return obj, nil
}

// getCurrent reads the most recent version of an object (a consistent read).
func (a *API) getCurrent(ctx context.Context, res *registry.Resource, namespace, name string) (runtime.Object, error) {
	resp, err := a.store.Get(ctx, &storagev1.GetRequest{Type: storageType(res), Namespace: namespace, Name: name})
	if err != nil {
		return nil, fromStorage(err, res.GroupResource(), name)
	}
	return a.fromStored(res, resp.Object)
}
