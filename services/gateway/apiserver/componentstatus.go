package apiserver

import (
	"context"
	"net/http"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"platform.io/services/gateway/negotiation"
)

// Component is one service behind the gateway as core componentstatuses report it: its name and
// its health check (the same check /readyz runs for it).
type Component struct {
	Name  string
	Check func(ctx context.Context) error
}

// Core componentstatuses (deprecated upstream since 1.19, still served by 1.33) answer what the
// gateway knows of the health of its components, computed on each request and never stored:
// one ComponentStatus per Config.Components entry (storage, authentication, authorization,
// admission), with upstream's single Healthy condition: "True" with message "ok", or "False"
// with the check's error. Only get and list are served, as upstream.

// serveComputed answers get and list of a computed resource (Resource.Computed).
func (a *API) serveComputed(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	out, err := negotiation.Negotiate(r, readOptions.ForResource(info.res))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	var keep func(*corev1.ComponentStatus) bool
	if info.verb == "list" {
		p, err := parseListParams(r, info.res)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		lsel, _ := labels.Parse(p.labelSelector) // parseListParams checked both
		fsel, _ := fields.ParseSelector(p.fieldSelector)
		keep = func(cs *corev1.ComponentStatus) bool {
			return lsel.Matches(labels.Set(cs.Labels)) && fsel.Matches(fields.Set{"metadata.name": cs.Name})
		}
	} else {
		found := false
		for _, c := range a.cfg.Components {
			found = found || c.Name == info.name
		}
		if !found {
			a.writeError(w, r, apierrors.NewNotFound(info.res.GroupResource(), info.name))
			return
		}
		keep = func(cs *corev1.ComponentStatus) bool { return cs.Name == info.name }
	}
	var items []runtime.Object
	for _, cs := range a.componentStatuses(r.Context(), keep) {
		cs.SetGroupVersionKind(info.res.GroupVersionKind())
		items = append(items, cs)
	}
	if info.verb == "get" {
		a.writeObject(w, r, http.StatusOK, info.res, items[0], out)
		return
	}
	a.writeList(w, r, info.res, items, metav1.ListMeta{}, out)
}

// componentStatuses checks the components keep selects, concurrently, in their configured order.
func (a *API) componentStatuses(ctx context.Context, keep func(*corev1.ComponentStatus) bool) []*corev1.ComponentStatus {
	var out []*corev1.ComponentStatus
	var wg sync.WaitGroup
	for _, c := range a.cfg.Components {
		cs := &corev1.ComponentStatus{ObjectMeta: metav1.ObjectMeta{Name: c.Name}}
		if !keep(cs) {
			continue
		}
		out = append(out, cs)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cond := corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionTrue, Message: "ok"}
			if err := c.Check(ctx); err != nil {
				cond = corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionFalse, Error: err.Error()}
			}
			cs.Conditions = []corev1.ComponentCondition{cond}
		}()
	}
	wg.Wait()
	return out
}
