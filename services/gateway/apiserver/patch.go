package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strconv"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/services/gateway/negotiation"
	"platform.io/services/gateway/registry/generic"
)

// Patch media types.
const (
	mediaJSONPatch      = "application/json-patch+json"
	mediaMergePatch     = "application/merge-patch+json"
	mediaStrategicPatch = "application/strategic-merge-patch+json"
)

// mediaApplyPatch is server-side apply (YAML or JSON bodies).
const mediaApplyPatch = "application/apply-patch+yaml"

// patchTypes are the patch media types PATCH accepts, listed in its 415.
var patchTypes = []string{mediaJSONPatch, mediaMergePatch, mediaStrategicPatch, mediaApplyPatch}

// patch serves PATCH on an item or its status: the patch is applied to the current object, the
// result goes through the stages of an update (decoding with field validation, defaulting,
// metadata rules, validation) and is stored with compare-and-swap, retried against the newest
// version unless the patch itself names a resourceVersion.
func (a *API) patch(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	out, err := negotiation.Negotiate(r, writeOptions.ForResource(info.res))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	ct := r.Header.Get("Content-Type")
	mediaType, _, err := mime.ParseMediaType(ct)
	if err != nil || !contains(patchTypes, mediaType) {
		a.writeError(w, r, negotiation.UnsupportedMediaType(patchTypes...))
		return
	}
	if mediaType == mediaStrategicPatch && !info.res.Strategy().StrategicMerge() {
		// Strategic merge needs Go struct tags; custom resources have none, as upstream says.
		a.writeError(w, r, negotiation.UnsupportedMediaType(mediaJSONPatch, mediaMergePatch, mediaApplyPatch))
		return
	}
	dry, err := parseDryRun(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	fv, err := parseFieldValidation(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	body, err := readBody(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	manager, err := fieldManagerName(r, mediaType == mediaApplyPatch)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if mediaType == mediaApplyPatch {
		force, err := parseForce(r)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		obj, created, warnings, err := a.applyObject(r.Context(), info, body, manager, force, fv, dry)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		warn(r, warnings)
		code := http.StatusOK
		if created {
			code = http.StatusCreated
		}
		a.writeObject(w, r, code, info.res, obj, out)
		return
	}
	if r.URL.Query().Has("force") {
		a.writeError(w, r, apierrors.NewInvalid(metav1.SchemeGroupVersion.WithKind("PatchOptions").GroupKind(), "", field.ErrorList{
			field.Forbidden(field.NewPath("force"), "may not be specified for non-apply patch"),
		}))
		return
	}
	p, err := parsePatch(mediaType, body)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	obj, warnings, err := a.patchObject(r.Context(), info, p, manager, fv, dry)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	warn(r, warnings)
	a.writeObject(w, r, http.StatusOK, info.res, obj, out)
}

// parseForce reads ?force, which only apply may use.
func parseForce(r *http.Request) (bool, error) {
	v := r.URL.Query().Get("force")
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, apierrors.NewBadRequest("force must be true or false")
	}
	return b, nil
}

// parsedPatch is a patch document ready to apply to JSON.
type parsedPatch struct {
	mediaType string
	body      []byte
	jsonPatch jsonpatch.Patch
}

// parsePatch checks the patch document itself: malformed documents are 400 before anything is read.
func parsePatch(mediaType string, body []byte) (*parsedPatch, error) {
	p := &parsedPatch{mediaType: mediaType, body: body}
	switch mediaType {
	case mediaJSONPatch:
		ops, err := jsonpatch.DecodePatch(body)
		if err != nil {
			return nil, apierrors.NewBadRequest("the JSON patch is malformed: " + err.Error())
		}
		for i, op := range ops {
			switch op.Kind() {
			case "add", "remove", "replace", "move", "copy", "test":
			default:
				return nil, apierrors.NewBadRequest(fmt.Sprintf("the JSON patch's operation %d has no valid \"op\" (add, remove, replace, move, copy or test)", i))
			}
			if _, err := op.Path(); err != nil {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("the JSON patch's operation %d has no \"path\"", i))
			}
		}
		p.jsonPatch = ops
	default:
		var doc map[string]any
		if err := json.Unmarshal(body, &doc); err != nil {
			return nil, apierrors.NewBadRequest("the patch is not a JSON object: " + err.Error())
		}
	}
	return p, nil
}

// apply applies the patch to an object's JSON. A patch that cannot be applied to this object
// (a failed test op, a path that does not exist) is 422, as upstream answers.
func (p *parsedPatch) apply(current []byte, into runtime.Object) ([]byte, error) {
	var out []byte
	var err error
	switch p.mediaType {
	case mediaJSONPatch:
		out, err = p.jsonPatch.Apply(current)
	case mediaMergePatch:
		out, err = jsonpatch.MergePatch(current, p.body)
	case mediaStrategicPatch:
		out, err = strategicpatch.StrategicMergePatch(current, p.body, into)
	}
	if err != nil {
		return nil, negotiation.StatusError(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "the patch cannot be applied to the object: "+err.Error())
	}
	return out, nil
}

// patchObject applies the patch to the newest version of the object and stores the result: the
// store's transform applies it to the current object's JSON and reads the result as a body is
// read (field validation, the kind's normalization, defaults, required fields). A
// resourceVersion or uid the patch sets is a precondition. It returns the unknown fields found,
// as warnings for the client.
func (a *API) patchObject(ctx context.Context, info *requestInfo, p *parsedPatch, manager string, fv fieldValidation, dry bool) (runtime.Object, []string, error) {
	res := info.res
	st := res.Strategy()
	var warnings []string
	obj, _, err := a.gen.Update(ctx, &generic.Update{
		Res: res, Namespace: info.namespace, Name: info.name, Subresource: info.subresource,
		Manager: manager, DryRun: dry,
		Transform: func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
			curJSON, err := json.Marshal(cur)
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			patched, err := p.apply(curJSON, st.New())
			if err != nil {
				return nil, err
			}
			obj := st.New()
			strict, err := decodeJSON(patched, obj, false)
			if err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			if len(strict) > 0 && fv == validationStrict {
				return nil, strictDecodingError(res, strict)
			}
			if fv == validationIgnore {
				strict = nil
			}
			if err := checkKind(obj, res); err != nil {
				return nil, err
			}
			unknown, err := st.Normalize(obj)
			if err != nil {
				return nil, err
			}
			if len(unknown) > 0 && fv == validationStrict {
				return nil, strictDecodingError(res, unknown)
			}
			if fv != validationIgnore {
				strict = append(strict, unknown...)
			}
			m, curMeta := mustMeta(obj), mustMeta(cur)
			if m.GetName() != info.name || m.GetNamespace() != curMeta.GetNamespace() {
				return nil, apierrors.NewBadRequest("a patch cannot change the object's name or namespace")
			}
			applyDefaults(res, obj)
			if err := checkRequired(res, obj); err != nil {
				return nil, err
			}
			warnings = strict
			return obj, nil
		},
	})
	if err != nil {
		return nil, nil, err
	}
	return obj, warnings, nil
}
