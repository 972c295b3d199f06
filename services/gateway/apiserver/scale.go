package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/services/gateway/negotiation"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
	"platform.io/services/gateway/registry/generic"
)

// The scale subresource of deployments, replicasets, statefulsets and replicationcontrollers:
// an autoscaling/v1 Scale over the parent's spec.replicas (what kubectl scale and autoscalers
// use). GET reads it; PUT and PATCH (JSON, merge or strategic merge) change the replicas only.

// replicasOf returns a scalable object's desired and current replicas and its selector.
func replicasOf(res *registry.Resource, obj runtime.Object) (spec, status int32, selector string, err error) {
	return res.Strategy().Replicas(obj)
}

// setReplicas sets a scalable object's spec.replicas.
func setReplicas(res *registry.Resource, obj runtime.Object, n int32) error {
	return res.Strategy().SetReplicas(obj, n)
}

// scaleOf builds the Scale of a stored object.
func scaleOf(res *registry.Resource, obj runtime.Object) (*autoscalingv1.Scale, error) {
	spec, status, selector, err := replicasOf(res, obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	m := mustMeta(obj)
	s := &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(),
			ResourceVersion: m.GetResourceVersion(), CreationTimestamp: m.GetCreationTimestamp()},
		Spec:   autoscalingv1.ScaleSpec{Replicas: spec},
		Status: autoscalingv1.ScaleStatus{Replicas: status, Selector: selector},
	}
	s.SetGroupVersionKind(registry.ScaleGroupVersionKind)
	return s, nil
}

// serveScale handles get, update and patch of the scale subresource.
func (a *API) serveScale(w http.ResponseWriter, r *http.Request, info *requestInfo) {
	out, err := negotiation.Negotiate(r, writeOptions)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	var s *autoscalingv1.Scale
	switch info.verb {
	case "get":
		cur, err := a.gen.Get(r.Context(), info.res, info.namespace, info.name)
		if err == nil {
			s, err = scaleOf(info.res, cur)
		}
		if err != nil {
			a.writeError(w, r, err)
			return
		}
	case "update", "patch":
		s, err = a.writeScale(r, info)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
	default:
		a.writeError(w, r, apierrors.NewMethodNotSupported(info.res.GroupResource(), info.verb))
		return
	}
	a.writeObject(w, r, http.StatusOK, info.res, s, out)
}

// writeScale sets the parent's replicas from a PUT body or a patch of the current Scale.
func (a *API) writeScale(r *http.Request, info *requestInfo) (*autoscalingv1.Scale, error) {
	dry, err := parseDryRun(r)
	if err != nil {
		return nil, err
	}
	manager, err := fieldManagerName(r, false)
	if err != nil {
		return nil, err
	}
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		mediaType = negotiation.MediaJSON
	}
	var p *parsedPatch
	if info.verb == "patch" {
		if mediaType == mediaApplyPatch || !contains(patchTypes, mediaType) {
			return nil, negotiation.UnsupportedMediaType(mediaJSONPatch, mediaMergePatch, mediaStrategicPatch)
		}
		if p, err = parsePatch(mediaType, body); err != nil {
			return nil, err
		}
	}
	res := info.res
	stored, _, err := a.gen.Update(r.Context(), &generic.Update{
		Res: res, Namespace: info.namespace, Name: info.name, Subresource: info.subresource,
		Manager: manager, DryRun: dry,
		View: &generic.View{
			Kind:   registry.ScaleGroupVersionKind,
			Of:     func(obj runtime.Object) (runtime.Object, error) { return scaleOf(res, obj) },
			Decode: decodeAdmittedScale,
			Set: func(cur, v runtime.Object) (runtime.Object, error) {
				next := cur.DeepCopyObject()
				if err := setReplicas(res, next, v.(*autoscalingv1.Scale).Spec.Replicas); err != nil {
					return nil, apierrors.NewInternalError(err)
				}
				return next, nil
			},
		},
		Transform: func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
			want, err := a.requestedScale(mediaType, body, p, cur.(*autoscalingv1.Scale))
			if err != nil {
				return nil, err
			}
			if want.Name != "" && want.Name != info.name {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", want.Name, info.name))
			}
			if want.Spec.Replicas < 0 {
				return nil, apierrors.NewInvalid(registry.ScaleGroupVersionKind.GroupKind(), info.name, field.ErrorList{
					field.Invalid(field.NewPath("spec", "replicas"), want.Spec.Replicas, "must be greater than or equal to 0"),
				})
			}
			return want, nil
		},
	})
	if err != nil {
		return nil, err
	}
	return scaleOf(res, stored)
}

// decodeAdmittedScale reads the Scale mutating admission returned.
func decodeAdmittedScale(data []byte) (runtime.Object, error) {
	s := &autoscalingv1.Scale{}
	if err := json.Unmarshal(data, s); err != nil {
		return nil, apierrors.NewInternalError(errors.New("the Scale admission returned does not decode: " + err.Error()))
	}
	if s.Spec.Replicas < 0 {
		return nil, apierrors.NewInternalError(errors.New("admission set spec.replicas of the Scale below 0"))
	}
	return s, nil
}

// requestedScale is the Scale the request asks for: the PUT body, or the patch applied to the
// current Scale.
func (a *API) requestedScale(mediaType string, body []byte, p *parsedPatch, cur *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
	want := &autoscalingv1.Scale{}
	if p != nil {
		curJSON, err := json.Marshal(cur)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		patched, err := p.apply(curJSON, &autoscalingv1.Scale{})
		if err != nil {
			return nil, err
		}
		body, mediaType = patched, negotiation.MediaJSON
	}
	var err error
	switch mediaType {
	case negotiation.MediaProtobuf, negotiation.MediaUpstreamProtobuf:
		err = builtin.DecodeProtobuf(body, want)
	case negotiation.MediaYAML:
		_, err = decodeJSON(body, want, true)
	default:
		_, err = decodeJSON(body, want, false)
	}
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if k := want.Kind; k != "" && k != "Scale" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body must be a Scale, not %s", k))
	}
	return want, nil
}
