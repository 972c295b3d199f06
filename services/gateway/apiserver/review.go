package apiserver

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"platform.io/services/gateway/registry"
)

// review serves the create-only review kinds (Resource.Virtual): the kind's strategy answers
// them from the request's identity and the services behind the gateway (registry.Reviewer), and
// nothing is stored.
func (a *API) review(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	reviewer, ok := info.res.Strategy().(registry.Reviewer)
	if !ok {
		a.writeError(w, r, apierrors.NewMethodNotSupported(info.res.GroupResource(), "create"))
		return
	}
	wr, err := a.readWrite(r, info)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if err := reviewer.Review(r.Context(), wr.obj, info.namespace); err != nil {
		a.writeError(w, r, err)
		return
	}
	// Nothing is stored: the answer carries no server-assigned identity.
	mustMeta(wr.obj).SetUID(types.UID(""))
	warn(r, wr.warnings)
	a.writeObject(w, r, http.StatusCreated, info.res, wr.obj, wr.out)
}
