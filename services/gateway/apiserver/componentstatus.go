package apiserver

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"platform.io/services/gateway/negotiation"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/core"
)

// Component is one service behind the gateway as core componentstatuses report it.
type Component = core.Component

// serveComputed answers get and list of a computed resource (Resource.Computed): its strategy
// computes the objects (registry.Computer); only get and list are served, as upstream.
func (a *API) serveComputed(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	computer, ok := info.res.Strategy().(registry.Computer)
	if !ok {
		a.writeError(w, r, apierrors.NewMethodNotSupported(info.res.GroupResource(), info.verb))
		return
	}
	out, err := negotiation.Negotiate(r, readOptions.ForResource(info.res))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	keep := func(name string, _ map[string]string) bool { return name == info.name }
	if info.verb == "list" {
		p, err := parseListParams(r, info.res)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		lsel, _ := labels.Parse(p.labelSelector) // parseListParams checked both
		fsel, _ := fields.ParseSelector(p.fieldSelector)
		keep = func(name string, l map[string]string) bool {
			return lsel.Matches(labels.Set(l)) && fsel.Matches(fields.Set{"metadata.name": name})
		}
	}
	items, err := computer.Compute(r.Context(), keep)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if info.verb == "get" {
		if len(items) == 0 {
			a.writeError(w, r, apierrors.NewNotFound(info.res.GroupResource(), info.name))
			return
		}
		a.writeObject(w, r, http.StatusOK, info.res, items[0], out)
		return
	}
	a.writeList(w, r, info.res, items, metav1.ListMeta{}, out)
}
