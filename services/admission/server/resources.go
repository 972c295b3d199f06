package server

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"

	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/plugins/cluster"
)

// resources is admission.Resources over storage: kinds resolve as built in
// (admission.BuiltinMapping) or through the stored CustomResourceDefinitions, and each watched
// resource is one storage informer, shared by its users and stopped when the last one releases
// it.
type resources struct {
	client *storage.Client
	crds   *storage.Informer[*apiextensionsv1.CustomResourceDefinition]
	log    *slog.Logger
	// ctx ends every watch (objects.run cancels it when its own context ends).
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	watched map[schema.GroupVersionResource]*watchedResource
}

var (
	_ admission.Resources  = (*resources)(nil)
	_ cluster.KindResolver = (*objects)(nil)
)

func newResources(client *storage.Client, crds *storage.Informer[*apiextensionsv1.CustomResourceDefinition], log *slog.Logger) *resources {
	ctx, cancel := context.WithCancel(context.Background())
	return &resources{client: client, crds: crds, log: log, ctx: ctx, cancel: cancel, watched: map[schema.GroupVersionResource]*watchedResource{}}
}

// Mapping resolves a built-in kind, or the kind of a stored definition that serves the version.
// Objects of a custom kind are read as stored, so a version other than the storage version is
// only resolved when the definition converts with strategy None (only apiVersion differs).
func (r *resources) Mapping(gvk schema.GroupVersionKind) (admission.Mapping, error) {
	if m, err := admission.BuiltinMapping(gvk); err == nil {
		return m, nil
	}
	for _, crd := range r.crds.List() {
		if crd.Spec.Group != gvk.Group || crd.Spec.Names.Kind != gvk.Kind {
			continue
		}
		storageVersion := ""
		served := false
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				storageVersion = v.Name
			}
			if v.Name == gvk.Version && v.Served {
				served = true
			}
		}
		if !served {
			break
		}
		if gvk.Version != storageVersion && crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
			return admission.Mapping{}, fmt.Errorf("%s is converted by a webhook: name its storage version %s", gvk, storageVersion)
		}
		return admission.Mapping{Kind: gvk, Resource: gvk.GroupVersion().WithResource(crd.Spec.Names.Plural),
			Namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped}, nil
	}
	return admission.Mapping{}, fmt.Errorf("no matches for kind %q in version %q", gvk.Kind, gvk.GroupVersion().String())
}

// Watch starts (or joins) the watch of m's resource.
func (r *resources) Watch(m admission.Mapping) (admission.Copy, func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.watched[m.Resource]
	if w == nil {
		ctx, cancel := context.WithCancel(r.ctx)
		w = &watchedResource{inf: r.informer(m), cancel: cancel}
		r.watched[m.Resource] = w
		go w.inf.Run(ctx)
	}
	w.users++
	var once sync.Once
	return w, func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			w.users--
			if w.users == 0 {
				w.cancel()
				delete(r.watched, m.Resource)
			}
		})
	}
}

// informer reads m's objects into unstructured form (the form policies evaluate params in,
// converted once per stored revision rather than once per request): built-in ones from their
// Protobuf envelope through their Go type, custom ones from their JSON, with m's apiVersion.
func (r *resources) informer(m admission.Mapping) *storage.Informer[runtime.Object] {
	typ := &storagev1.ResourceType{Group: m.Resource.Group, Resource: m.Resource.Resource}
	return storage.NewInformer(r.client, typ, func(o *storagev1.Object) (runtime.Object, error) {
		rv := strconv.FormatInt(o.GetResourceVersion(), 10)
		if obj, ok := admission.NewObject(m.Kind); ok {
			u, ok := obj.(storage.Unmarshaler)
			if !ok {
				return nil, fmt.Errorf("%s has no Protobuf form", m.Kind)
			}
			if err := storage.DecodeStored(o.GetValue(), u); err != nil {
				return nil, err
			}
			content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			if err != nil {
				return nil, err
			}
			out := &unstructured.Unstructured{Object: content}
			out.SetGroupVersionKind(m.Kind)
			out.SetResourceVersion(rv)
			return out, nil
		}
		u := &unstructured.Unstructured{}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(o.GetValue(), &u.Object); err != nil {
			return nil, err
		}
		u.SetAPIVersion(m.Kind.GroupVersion().String())
		u.SetResourceVersion(rv)
		return u, nil
	}, r.log)
}

// watchedResource is one watched resource and its users.
type watchedResource struct {
	inf    *storage.Informer[runtime.Object]
	cancel context.CancelFunc
	users  int
}

func (w *watchedResource) Synced() bool {
	select {
	case <-w.inf.Synced():
		return true
	default:
		return false
	}
}

func (w *watchedResource) Get(namespace, name string) (runtime.Object, bool) {
	return w.inf.Get(storage.Key(namespace, name))
}

func (w *watchedResource) List(namespace string) []runtime.Object {
	all := w.inf.List()
	if namespace == "" {
		return all
	}
	out := all[:0:0]
	for _, o := range all {
		if acc := admission.Accessor(o); acc != nil && acc.GetNamespace() == namespace {
			out = append(out, o)
		}
	}
	return out
}

// ResourcesFor resolves owner references' kinds for OwnerReferencesPermissionEnforcement:
// custom kinds too.
func (o *objects) ResourcesFor(gvk schema.GroupVersionKind) ([]cluster.ResourceMapping, error) {
	m, err := o.resources.Mapping(gvk)
	if err != nil {
		return nil, err
	}
	return []cluster.ResourceMapping{{Resource: m.Resource, Namespaced: m.Namespaced}}, nil
}
