package apiserver

import (
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// serveTokenRequest answers POST serviceaccounts/<name>/token: a bound token for the account,
// signed by the authentication service, never stored.
func (a *API) serveTokenRequest(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	if info.verb != "create" {
		a.writeError(w, r, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "serviceaccounts/token"}, info.verb))
		return
	}
	trInfo := *info
	trInfo.res = a.reg.TokenRequest()
	wr, err := a.readWrite(r, &trInfo)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	req := wr.obj.(*authenticationv1.TokenRequest)
	resp, warnings, err := a.tokens.Issue(r.Context(), info.namespace, info.name, req, wr.dryRun)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	// Answer in the group the body named (kubectl sends upstream's authentication.k8s.io).
	if sameGroup(wr.bodyGV, trInfo.res.GroupVersion()) && !wr.bodyGV.Empty() {
		resp.SetGroupVersionKind(wr.bodyGV.WithKind(trInfo.res.Kind))
	}
	warn(r, append(wr.warnings, warnings...))
	a.writeObject(w, r, http.StatusCreated, trInfo.res, resp, wr.out)
}
