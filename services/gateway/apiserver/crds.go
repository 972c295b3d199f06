package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/gateway/crd"
	"platform.io/services/gateway/negotiation"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/apiextensions"
	"platform.io/services/gateway/registry/generic"
)

// CustomResourceDefinitions are served by two loops over one storage watch of the definitions:
//
//   - the informer keeps the registry in step with the stored definitions: an Established
//     definition's served versions are in discovery and routing, anything else is not. Every
//     gateway runs it, so each replica serves what is stored.
//   - the controller (when controllers are enabled) does what upstream's apiextensions
//     controllers do: it accepts names that no other definition of the group uses
//     (status.acceptedNames, NamesAccepted), establishes definitions whose names are accepted
//     (Established), and on deletion removes every object of the kind before it lets the
//     definition go (Terminating, then the cleanup finalizer is dropped).

// crdControllerManager is the field manager of the controller's status writes.
const crdControllerManager = "platform-apiextensions-controller"

// crdState is what the gateway knows of the stored definitions.
type crdState struct {
	mu sync.Mutex
	// registered is the fingerprint of what the registry serves per definition name.
	registered map[string]string
	// terminating names the definitions being deleted: their kinds take no new objects.
	terminating map[string]bool
	// synced is closed after the first complete list.
	synced     chan struct{}
	syncedOnce sync.Once
}

func (s *crdState) init() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.registered == nil {
		s.registered = map[string]string{}
		s.terminating = map[string]bool{}
		s.synced = make(chan struct{})
	}
}

// crdsResource is apiextensions.platform.io/v1 customresourcedefinitions.
func (a *API) crdsResource() *registry.Resource {
	res, _ := a.reg.Resource(schema.GroupVersionResource{Group: naming.Group("apiextensions.k8s.io"), Version: "v1", Resource: "customresourcedefinitions"})
	return res
}

// CRDsSynced is closed once the stored definitions have been read and their kinds are served.
func (a *API) CRDsSynced() <-chan struct{} {
	a.crds.init()
	return a.crds.synced
}

// RunCRDInformer keeps the registry serving the established definitions, and, when controller
// is true, runs the definitions' controller too. It runs until ctx ends.
func (a *API) RunCRDInformer(ctx context.Context, controller bool) {
	a.crds.init()
	res := a.crdsResource()
	if res == nil {
		// apiextensions is turned off (--runtime-config): nothing to serve.
		a.crds.syncedOnce.Do(func() { close(a.crds.synced) })
		return
	}
	for ctx.Err() == nil {
		if err := a.crdPass(ctx, res, controller); err != nil && ctx.Err() == nil {
			a.log.WarnContext(ctx, "custom resource definitions", "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// crdPass lists the definitions, reconciles each, then follows the watch until it ends.
// Definitions being deleted are retried every second until their objects are gone.
func (a *API) crdPass(ctx context.Context, res *registry.Resource, controller bool) error {
	list, err := a.store.List(ctx, &storagev1.ListRequest{Type: generic.StorageType(res)})
	if err != nil {
		return err
	}
	known := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, o := range list.Items {
		obj, err := a.gen.Decode(res, o)
		if err != nil {
			a.log.WarnContext(ctx, "decoding a stored custom resource definition", "name", o.Name, "error", err)
			continue
		}
		known[o.Name] = obj.(*apiextensionsv1.CustomResourceDefinition)
	}
	// Definitions that went away while no watch was open stop being served.
	a.crds.mu.Lock()
	var gone []string
	for name := range a.crds.registered {
		if known[name] == nil {
			gone = append(gone, name)
		}
	}
	a.crds.mu.Unlock()
	for _, name := range gone {
		a.unregisterCRD(name)
	}
	for _, name := range sortedNames(known) {
		a.reconcileCRD(ctx, res, known[name], known, controller)
	}
	a.crds.syncedOnce.Do(func() { close(a.crds.synced) })

	stream, err := a.store.Watch(ctx, &storagev1.WatchRequest{Type: generic.StorageType(res), ResourceVersion: fmt.Sprint(list.ResourceVersion), AllowBookmarks: true, BookmarkIntervalMs: 1000})
	if err != nil {
		return err
	}
	events, errc := receive(ctx, stream)
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	for {
		changed := map[string]bool{}
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return err
		case evs := <-events:
			for _, ev := range evs {
				if ev.Object == nil || ev.Type == storagev1.EventType_BOOKMARK {
					continue
				}
				name := ev.Object.Name
				if ev.Type == storagev1.EventType_DELETED {
					delete(known, name)
					a.unregisterCRD(name)
					// Another definition of the group may now get the names.
					for other := range known {
						changed[other] = true
					}
					continue
				}
				obj, err := a.gen.Decode(res, ev.Object)
				if err != nil {
					continue
				}
				known[name] = obj.(*apiextensionsv1.CustomResourceDefinition)
				changed[name] = true
			}
		case <-retry.C:
			for name, c := range known {
				if c.DeletionTimestamp != nil || !apiextensions.IsEstablished(c) || !apiextensions.NamesAccepted(c) {
					changed[name] = true
				}
			}
		}
		for _, name := range sortedNames(known) {
			if changed[name] {
				a.reconcileCRD(ctx, res, known[name], known, controller)
			}
		}
	}
}

func sortedNames(m map[string]*apiextensionsv1.CustomResourceDefinition) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// reconcileCRD brings one definition's status and the registry in line with its spec.
func (a *API) reconcileCRD(ctx context.Context, res *registry.Resource, c *apiextensionsv1.CustomResourceDefinition, all map[string]*apiextensionsv1.CustomResourceDefinition, controller bool) {
	a.crds.mu.Lock()
	a.crds.terminating[c.Name] = c.DeletionTimestamp != nil
	a.crds.mu.Unlock()
	if controller {
		next, err := a.crdController(ctx, res, c, all)
		if err != nil {
			if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && ctx.Err() == nil {
				a.log.WarnContext(ctx, "custom resource definition controller", "name", c.Name, "error", err)
			}
		} else if next != nil {
			c = next
			all[c.Name] = c
		}
	}
	if apiextensions.IsEstablished(c) {
		a.registerCRD(c)
	} else {
		a.unregisterCRD(c.Name)
	}
}

// registerCRD serves a definition's versions, unless the registry already serves exactly them.
func (a *API) registerCRD(c *apiextensionsv1.CustomResourceDefinition) {
	print, _ := json.Marshal(struct {
		Spec  apiextensionsv1.CustomResourceDefinitionSpec
		Names apiextensionsv1.CustomResourceDefinitionNames
	}{c.Spec, c.Status.AcceptedNames})
	a.crds.mu.Lock()
	defer a.crds.mu.Unlock()
	if a.crds.registered[c.Name] == string(print) {
		return
	}
	a.crds.registered[c.Name] = string(print)
	a.reg.PutCustom(c.Name, registry.CustomResources(c))
	a.forgetStale(c.Name)
	a.log.Info("serving custom resource", "definition", c.Name)
}

func (a *API) unregisterCRD(name string) {
	a.crds.mu.Lock()
	defer a.crds.mu.Unlock()
	if _, ok := a.crds.registered[name]; !ok {
		return
	}
	delete(a.crds.registered, name)
	delete(a.crds.terminating, name)
	a.reg.DeleteCustom(name)
	a.forgetStale(name)
	a.log.Info("stopped serving custom resource", "definition", name)
}

// forgetStale drops what the gateway built for a definition's resources that are no longer
// served (watch hubs, direct watches), after the definition changed or went away.
func (a *API) forgetStale(crdName string) {
	stale := func(res *registry.Resource) bool {
		if def := res.Strategy().Definition(); def == nil || def.Name != crdName {
			return false
		}
		cur, ok := a.reg.Resource(res.GroupVersionResource)
		return !ok || cur != res
	}
	// Field managers and printers live in the resources' strategies and go with them.
	a.dropHubs(stale)
	a.customWatches.cancel(stale)
}

// watchCancels holds the cancel functions of the custom resources' direct storage watches.
type watchCancels struct {
	mu    sync.Mutex
	byRes map[*registry.Resource]map[*context.CancelFunc]struct{}
}

// add registers a watch's cancel function and returns the function that removes it.
func (w *watchCancels) add(res *registry.Resource, cancel context.CancelFunc) func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byRes == nil {
		w.byRes = map[*registry.Resource]map[*context.CancelFunc]struct{}{}
	}
	if w.byRes[res] == nil {
		w.byRes[res] = map[*context.CancelFunc]struct{}{}
	}
	key := &cancel
	w.byRes[res][key] = struct{}{}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.byRes[res], key)
		if len(w.byRes[res]) == 0 {
			delete(w.byRes, res)
		}
	}
}

// cancel ends the watches of the resources stale reports.
func (w *watchCancels) cancel(stale func(*registry.Resource) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for res, set := range w.byRes {
		if stale(res) {
			for c := range set {
				(*c)()
			}
		}
	}
}

// crdTerminating refuses creates of res's kind while its definition is being deleted (the
// store's create guard).
func (a *API) crdTerminating(res *registry.Resource) error {
	def := res.Strategy().Definition()
	if def == nil {
		return nil
	}
	a.crds.mu.Lock()
	defer a.crds.mu.Unlock()
	if a.crds.terminating[def.Name] {
		return negotiation.StatusError(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "create not allowed while custom resource definition is terminating")
	}
	return nil
}

// crdController writes a definition's status: names and conditions, and on deletion cleans up.
// It returns the definition as stored afterwards (nil when it is gone or unchanged).
func (a *API) crdController(ctx context.Context, res *registry.Resource, c *apiextensionsv1.CustomResourceDefinition, all map[string]*apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.CustomResourceDefinition, error) {
	if c.DeletionTimestamp != nil {
		return nil, a.cleanupCRD(ctx, res, c)
	}
	next := c.DeepCopy()
	var others []apiextensionsv1.CustomResourceDefinition
	for name, o := range all {
		if name != c.Name && o.Spec.Group == c.Spec.Group {
			others = append(others, *o)
		}
	}
	now := metav1.NewTime(a.now().Truncate(time.Second))
	if a.reg.BuiltinGroup(c.Spec.Group) {
		// Built-in types own their groups' names: the registry would not serve these.
		apiextensions.SetCondition(next, apiextensionsv1.NamesAccepted, apiextensionsv1.ConditionFalse, "NameConflict",
			fmt.Sprintf("group %q is served by built-in types", c.Spec.Group), now)
	} else if errs := crd.ValidateNamesNotTaken(c, others); len(errs) > 0 {
		msgs := make([]string, 0, len(errs))
		for _, e := range errs {
			msgs = append(msgs, e.Detail)
		}
		apiextensions.SetCondition(next, apiextensionsv1.NamesAccepted, apiextensionsv1.ConditionFalse, "NameConflict", strings.Join(msgs, "; "), now)
	} else {
		next.Status.AcceptedNames = c.Spec.Names
		if next.Status.AcceptedNames.ListKind == "" {
			next.Status.AcceptedNames.ListKind = c.Spec.Names.Kind + "List"
		}
		if next.Status.AcceptedNames.Singular == "" {
			next.Status.AcceptedNames.Singular = strings.ToLower(c.Spec.Names.Kind)
		}
		apiextensions.SetCondition(next, apiextensionsv1.NamesAccepted, apiextensionsv1.ConditionTrue, "NoConflicts", "no conflicts found", now)
	}
	if !apiextensions.IsEstablished(next) {
		if apiextensions.NamesAccepted(next) {
			apiextensions.SetCondition(next, apiextensionsv1.Established, apiextensionsv1.ConditionTrue, "InitialNamesAccepted", "the initial names have been accepted", now)
		} else {
			apiextensions.SetCondition(next, apiextensionsv1.Established, apiextensionsv1.ConditionFalse, "NotAccepted", "not all names are accepted", now)
		}
	}
	if apiextensions.IsEstablished(next) {
		// Serve before saying so: a client that sees Established must find the kind here.
		a.registerCRD(next)
	}
	return a.writeCRDStatus(ctx, res, c, next)
}

// writeCRDStatus stores next's status (and finalizers, which the status subresource of
// definitions writes, as upstream's) in place of c's through the store: a conflict when the
// definition changed since c was read (the next pass reconciles again); an unchanged status is
// not written.
func (a *API) writeCRDStatus(ctx context.Context, res *registry.Resource, c, next *apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.CustomResourceDefinition, error) {
	if jsonEqual(c.Status, next.Status) && jsonEqual(c.Finalizers, next.Finalizers) {
		return nil, nil
	}
	stored, _, err := a.gen.Update(ctx, &generic.Update{
		Res: res, Name: c.Name, Subresource: "status", Manager: crdControllerManager,
		Transform: func(context.Context, runtime.Object) (runtime.Object, error) {
			out := next.DeepCopy()
			out.ResourceVersion = c.ResourceVersion
			return out, nil
		},
	})
	if err != nil {
		return nil, err
	}
	out, _ := stored.(*apiextensionsv1.CustomResourceDefinition)
	return out, nil
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// cleanupCRD deletes every object of a terminating definition's kind; once none is left it
// drops the cleanup finalizer, which lets the definition go.
func (a *API) cleanupCRD(ctx context.Context, res *registry.Resource, c *apiextensionsv1.CustomResourceDefinition) error {
	if !slices.Contains(c.Finalizers, apiextensions.CleanupFinalizer) {
		return nil
	}
	now := metav1.NewTime(a.now().Truncate(time.Second))
	if cond := apiextensions.Condition(c, apiextensionsv1.Terminating); cond == nil || cond.Status != apiextensionsv1.ConditionTrue {
		next := c.DeepCopy()
		apiextensions.SetCondition(next, apiextensionsv1.Terminating, apiextensionsv1.ConditionTrue, "InstanceDeletionInProgress", "CustomResource deletion is in progress", now)
		stored, err := a.writeCRDStatus(ctx, res, c, next)
		if err != nil {
			return err
		}
		if stored != nil {
			c = stored
		}
	}
	var custom *registry.Resource
	for _, r := range a.reg.DefinitionResources(c) {
		custom = r
		break
	}
	if custom != nil {
		resp, err := a.store.List(ctx, &storagev1.ListRequest{Type: generic.StorageType(custom)})
		if err != nil {
			return err
		}
		if len(resp.Items) > 0 {
			for _, o := range resp.Items {
				if _, _, err := a.gen.Delete(ctx, custom, o.Namespace, o.Name, &metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
			// Deleted or marked (objects with finalizers wait for them); the next pass looks again.
			return nil
		}
	}
	next := c.DeepCopy()
	next.Finalizers = slices.DeleteFunc(next.Finalizers, func(f string) bool { return f == apiextensions.CleanupFinalizer })
	apiextensions.SetCondition(next, apiextensionsv1.Terminating, apiextensionsv1.ConditionTrue, "InstanceDeletionCompleted", "removed all instances", now)
	_, err := a.writeCRDStatus(ctx, res, c, next)
	return err
}
