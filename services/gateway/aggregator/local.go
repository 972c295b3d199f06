package aggregator

import (
	"context"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	"platform.io/services/gateway/aggregator/apiregistration"
)

// fieldManager owns what the aggregator's controllers write.
var fieldManager = naming.Product + "-aggregator"

// The values of the automanaged label: "onstart" for the built-in group versions (upstream's
// autoregister on start), "true" for those of custom resources (kept while the definition is).
const (
	automanagedOnStart = "onstart"
	automanagedSync    = "true"
)

// priority is an APIService's group and version priority.
type priority struct{ group, version int32 }

// builtinPriorities are upstream's priorities of its built-in group versions (kube-apiserver's
// list), by upstream group name.
var builtinPriorities = map[schema.GroupVersion]priority{
	{Group: "", Version: "v1"}:                             {18000, 1},
	{Group: "apiregistration.k8s.io", Version: "v1"}:       {18000, 15},
	{Group: "apps", Version: "v1"}:                         {17800, 15},
	{Group: "events.k8s.io", Version: "v1"}:                {17750, 15},
	{Group: "authentication.k8s.io", Version: "v1"}:        {17700, 15},
	{Group: "authentication.k8s.io", Version: "v1beta1"}:   {17700, 9},
	{Group: "authentication.k8s.io", Version: "v1alpha1"}:  {17700, 1},
	{Group: "authorization.k8s.io", Version: "v1"}:         {17600, 15},
	{Group: "autoscaling", Version: "v1"}:                  {17500, 15},
	{Group: "autoscaling", Version: "v2"}:                  {17500, 30},
	{Group: "batch", Version: "v1"}:                        {17400, 15},
	{Group: "certificates.k8s.io", Version: "v1"}:          {17300, 15},
	{Group: "networking.k8s.io", Version: "v1"}:            {17200, 15},
	{Group: "policy", Version: "v1"}:                       {17100, 15},
	{Group: "rbac.authorization.k8s.io", Version: "v1"}:    {17000, 15},
	{Group: "storage.k8s.io", Version: "v1"}:               {16800, 15},
	{Group: "apiextensions.k8s.io", Version: "v1"}:         {16700, 15},
	{Group: "admissionregistration.k8s.io", Version: "v1"}: {16700, 15},
	{Group: "scheduling.k8s.io", Version: "v1"}:            {16600, 15},
	{Group: "coordination.k8s.io", Version: "v1"}:          {16500, 15},
	{Group: "node.k8s.io", Version: "v1"}:                  {16300, 15},
	{Group: "discovery.k8s.io", Version: "v1"}:             {16200, 15},
	{Group: "flowcontrol.apiserver.k8s.io", Version: "v1"}: {16100, 21},
}

// customPriority is what upstream gives the group versions of custom resources.
var customPriority = priority{1000, 100}

// servedPriorities are builtinPriorities under the groups' served names.
func servedPriorities() map[schema.GroupVersion]priority {
	out := make(map[schema.GroupVersion]priority, len(builtinPriorities))
	for gv, p := range builtinPriorities {
		out[schema.GroupVersion{Group: naming.Group(gv.Group), Version: gv.Version}] = p
	}
	return out
}

// desiredLocal is the local APIService of every group version the gateway serves: built-in
// ones with upstream's priorities (group versions upstream does not list are skipped, as
// upstream skips them) and custom resources' with upstream's custom priorities.
func (ag *Aggregator) desiredLocal() map[string]*apiregistration.APIService {
	prios := servedPriorities()
	out := map[string]*apiregistration.APIService{}
	for _, g := range ag.cfg.Registry.Groups() {
		builtin := ag.cfg.Registry.BuiltinGroup(g.Name)
		for _, v := range g.Versions {
			p, label := customPriority, automanagedSync
			if builtin {
				var ok bool
				if p, ok = prios[v.GroupVersion]; !ok {
					continue
				}
				label = automanagedOnStart
			}
			name := v.Version + "." + g.Name
			out[name] = &apiregistration.APIService{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{naming.AggregatorAutomanagedLabel: label}},
				Spec: apiregistration.APIServiceSpec{
					Group: g.Name, Version: v.Version, GroupPriorityMinimum: p.group, VersionPriority: p.version,
				},
			}
		}
	}
	return out
}

// runLocal keeps the local APIServices in step with what the gateway serves: created when a
// group version is served, updated when their spec drifts, removed (automanaged ones only,
// once the custom resources are known) when it is not served any more.
func (ag *Aggregator) runLocal(ctx context.Context) {
	// Compare with what is stored, never with nothing.
	select {
	case <-ag.synced:
	case <-ctx.Done():
		return
	}
	var lastGen uint64
	synced := false
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		crdsSynced := ag.cfg.CRDsSynced == nil
		if !crdsSynced {
			select {
			case <-ag.cfg.CRDsSynced:
				crdsSynced = true
			default:
			}
		}
		if gen := ag.cfg.Registry.Generation(); gen != lastGen || !synced {
			if err := ag.syncLocal(ctx, crdsSynced); err != nil {
				if ctx.Err() == nil && !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
					ag.log.WarnContext(ctx, "local APIServices", "error", err)
				}
				synced = false
			} else {
				lastGen, synced = gen, crdsSynced
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-ag.changed:
			synced = false
		}
	}
}

func (ag *Aggregator) syncLocal(ctx context.Context, removeStale bool) error {
	desired := ag.desiredLocal()
	have := ag.current().all
	var firstErr error
	keep := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for name, want := range desired {
		cur := have[name]
		switch {
		case cur == nil:
			keep(ag.store.Create(ctx, want, fieldManager))
		case cur.Labels[naming.AggregatorAutomanagedLabel] == "":
			// Created by someone else: theirs to keep.
		case !reflect.DeepEqual(cur.Spec, want.Spec) || cur.Labels[naming.AggregatorAutomanagedLabel] != want.Labels[naming.AggregatorAutomanagedLabel]:
			next := cur.DeepCopy()
			next.Spec = want.Spec
			next.Labels[naming.AggregatorAutomanagedLabel] = want.Labels[naming.AggregatorAutomanagedLabel]
			keep(ag.store.Update(ctx, cur, next, fieldManager))
		}
	}
	if removeStale {
		for name, cur := range have {
			if desired[name] != nil || cur.Spec.Service != nil || cur.Labels[naming.AggregatorAutomanagedLabel] == "" {
				continue
			}
			if err := ag.store.Delete(ctx, name, cur.ResourceVersion); err != nil && !apierrors.IsNotFound(err) {
				keep(err)
			}
		}
	}
	return firstErr
}
