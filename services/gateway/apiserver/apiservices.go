package apiserver

import (
	"context"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/gateway/aggregator/apiregistration"
	"platform.io/services/gateway/registry"
	apiregistrationkind "platform.io/services/gateway/registry/apiregistration"
	"platform.io/services/gateway/registry/generic"
)

// The aggregator package reaches the stored APIServices (registry/apiregistration holds their
// rules), Services and Endpoints through Aggregation.

// Aggregation is the aggregator's access to what the gateway stores: APIServices (listed,
// followed, written as a controller), and the Services and Endpoints they name.
type Aggregation struct {
	a   *API
	res *registry.Resource
}

// Aggregation returns the aggregator's access, or nil when APIServices are not served
// (--runtime-config turned them off).
func (a *API) Aggregation() *Aggregation {
	res, ok := a.reg.Resource(apiregistrationkind.GroupVersion.WithResource("apiservices"))
	if !ok {
		return nil
	}
	return &Aggregation{a: a, res: res}
}

// Follow lists the stored APIServices and follows their changes until ctx ends, calling fn with
// the complete set (by name) after the list and after every batch of changes. It relists when
// the watch ends.
func (g *Aggregation) Follow(ctx context.Context, fn func(map[string]*apiregistration.APIService)) {
	for ctx.Err() == nil {
		if err := g.followOnce(ctx, fn); err != nil && ctx.Err() == nil {
			g.a.log.WarnContext(ctx, "following APIServices", "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (g *Aggregation) followOnce(ctx context.Context, fn func(map[string]*apiregistration.APIService)) error {
	list, err := g.a.store.List(ctx, &storagev1.ListRequest{Type: generic.StorageType(g.res)})
	if err != nil {
		return err
	}
	known := map[string]*apiregistration.APIService{}
	for _, o := range list.Items {
		obj, err := g.a.gen.Decode(g.res, o)
		if err != nil {
			continue
		}
		known[o.Name] = obj.(*apiregistration.APIService)
	}
	fn(copySet(known))
	stream, err := g.a.store.Watch(ctx, &storagev1.WatchRequest{Type: generic.StorageType(g.res), ResourceVersion: strconv.FormatInt(list.ResourceVersion, 10)})
	if err != nil {
		return err
	}
	events, errc := receive(ctx, stream)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return err
		case evs := <-events:
			changed := false
			for _, ev := range evs {
				if ev.Object == nil || ev.Type == storagev1.EventType_BOOKMARK {
					continue
				}
				changed = true
				if ev.Type == storagev1.EventType_DELETED {
					delete(known, ev.Object.Name)
					continue
				}
				obj, err := g.a.gen.Decode(g.res, ev.Object)
				if err != nil {
					continue
				}
				known[ev.Object.Name] = obj.(*apiregistration.APIService)
			}
			if changed {
				fn(copySet(known))
			}
		}
	}
}

func copySet(m map[string]*apiregistration.APIService) map[string]*apiregistration.APIService {
	out := make(map[string]*apiregistration.APIService, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Get reads one stored APIService.
func (g *Aggregation) Get(ctx context.Context, name string) (*apiregistration.APIService, error) {
	obj, err := g.a.gen.Get(ctx, g.res, "", name)
	if err != nil {
		return nil, err
	}
	return obj.(*apiregistration.APIService), nil
}

// Create stores a new APIService as manager (through the create path: defaults, validation,
// field ownership).
func (g *Aggregation) Create(ctx context.Context, obj *apiregistration.APIService, manager string) error {
	obj = obj.DeepCopy()
	obj.SetGroupVersionKind(g.res.GroupVersionKind())
	_, err := g.a.gen.Create(ctx, g.res, &generic.Create{Obj: obj, Manager: manager})
	return err
}

// Update stores next's spec and labels in place of cur's (compare-and-swap on cur's
// resourceVersion), as manager; the status is kept.
func (g *Aggregation) Update(ctx context.Context, cur, next *apiregistration.APIService, manager string) error {
	out := cur.DeepCopy()
	out.Spec = next.Spec
	out.Labels = next.Labels
	apiregistration.Default(out)
	if errs := apiregistration.Validate(out); len(errs) > 0 {
		return apierrors.NewInvalid(g.res.GroupVersionKind().GroupKind(), out.Name, errs)
	}
	return g.write(ctx, "", cur, out, manager)
}

// UpdateStatus stores next's status in place of cur's (compare-and-swap), as manager; nothing
// is written when the status is unchanged.
func (g *Aggregation) UpdateStatus(ctx context.Context, cur, next *apiregistration.APIService, manager string) error {
	if jsonEqual(cur.Status, next.Status) {
		return nil
	}
	out := cur.DeepCopy()
	out.Status = next.Status
	return g.write(ctx, "status", cur, out, manager)
}

// write stores next through subresource in place of cur: a conflict when the APIService
// changed since cur was read.
func (g *Aggregation) write(ctx context.Context, subresource string, cur, next *apiregistration.APIService, manager string) error {
	_, _, err := g.a.gen.Update(ctx, &generic.Update{
		Res: g.res, Name: cur.Name, Subresource: subresource, Manager: manager,
		Transform: func(context.Context, runtime.Object) (runtime.Object, error) {
			out := next.DeepCopy()
			out.SetGroupVersionKind(g.res.GroupVersionKind())
			out.ResourceVersion = cur.ResourceVersion
			return out, nil
		},
	})
	return err
}

// Delete removes an APIService if it still is at resourceVersion rv (through the store: a
// conflict when it changed since).
func (g *Aggregation) Delete(ctx context.Context, name, rv string) error {
	_, _, err := g.a.gen.Delete(ctx, g.res, "", name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	return err
}

// Service reads a Service (a 404 StatusError when it does not exist).
func (g *Aggregation) Service(ctx context.Context, namespace, name string) (*corev1.Service, error) {
	res, ok := g.a.reg.Resource(schema.GroupVersionResource{Version: "v1", Resource: "services"})
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, name)
	}
	obj, err := g.a.gen.Get(ctx, res, namespace, name)
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Service), nil
}

// Endpoints reads an Endpoints object (a 404 StatusError when it does not exist).
func (g *Aggregation) Endpoints(ctx context.Context, namespace, name string) (*corev1.Endpoints, error) {
	res, ok := g.a.reg.Resource(schema.GroupVersionResource{Version: "v1", Resource: "endpoints"})
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "endpoints"}, name)
	}
	obj, err := g.a.gen.Get(ctx, res, namespace, name)
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Endpoints), nil
}

// WriteError answers err as a Status in the format the request negotiated.
func (a *API) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	a.writeError(w, r, err)
}

// SetDiscoveryExtension adds the groups served elsewhere (the aggregator's remote APIServices)
// to /apis and /apis/<group>: f returns them in discovery order, versions preferred first.
func (a *API) SetDiscoveryExtension(f func() []metav1.APIGroup) {
	a.remoteGroups.Store(&f)
}

// remoteDiscovery returns the groups of SetDiscoveryExtension (none without one).
func (a *API) remoteDiscovery() []metav1.APIGroup {
	if f := a.remoteGroups.Load(); f != nil {
		return (*f)()
	}
	return nil
}

// mergeGroups adds the remote groups to the local ones: a remote version of a local group
// follows the local versions, a remote group follows the local groups.
func mergeGroups(local, remote []metav1.APIGroup) []metav1.APIGroup {
	if len(remote) == 0 {
		return local
	}
	out := append([]metav1.APIGroup(nil), local...)
	for _, rg := range remote {
		merged := false
		for i := range out {
			if out[i].Name != rg.Name {
				continue
			}
			merged = true
			for _, v := range rg.Versions {
				if !hasDiscoveryVersion(out[i].Versions, v.Version) {
					out[i].Versions = append(out[i].Versions, v)
				}
			}
		}
		if !merged {
			out = append(out, rg)
		}
	}
	return out
}

func hasDiscoveryVersion(list []metav1.GroupVersionForDiscovery, v string) bool {
	for _, x := range list {
		if x.Version == v {
			return true
		}
	}
	return false
}
