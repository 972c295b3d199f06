package webhook

import (
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/types"
)

// FuzzVerifyResponse feeds arbitrary webhook answers to the response parser: it must never panic,
// and an accepted v1 answer carries the uid sent.
func FuzzVerifyResponse(f *testing.F) {
	f.Add("v1", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u","allowed":true}}`), true)
	f.Add("v1", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u","allowed":true,"patchType":"JSONPatch","patch":"W10="}}`), true)
	f.Add("v1beta1", []byte(`{"response":{"allowed":false,"status":{"code":403}}}`), false)
	f.Add("v1", []byte(`null`), false)
	f.Fuzz(func(t *testing.T, version string, body []byte, mutating bool) {
		r, err := verifyResponse(version, body, types.UID("u"), mutating)
		if err == nil && r == nil {
			t.Fatal("no response and no error")
		}
		if err == nil && !mutating && len(r.patch) > 0 {
			t.Fatal("a validating answer with a patch was accepted")
		}
	})
}

// FuzzPatchedObject applies arbitrary patches to a pod and decodes the result: errors, never
// panics (the patch library's own panics included), and a decoded object keeps its kind.
func FuzzPatchedObject(f *testing.F) {
	f.Add([]byte(`[{"op":"add","path":"/metadata/labels/a","value":"b"}]`))
	f.Add([]byte(`[{"op":"replace","path":"/spec","value":null}]`))
	f.Add([]byte(`[{"op":"replace","path":"/kind","value":"Node"}]`))
	f.Add([]byte(`[{"op":"move","from":"/spec","path":"/metadata"}]`))
	attrs := createPod(newPod("p", nil))
	st := &requestState{a: attrs}
	if err := st.encode(); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, patch []byte) {
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return
		}
		out, err := applyPatch(p, st.objJSON)
		if err != nil {
			return
		}
		obj, err := decodeObject(attrs, st.objJSON, out)
		if err == nil && obj.GetObjectKind().GroupVersionKind() != attrs.Kind {
			t.Fatalf("kind changed to %v", obj.GetObjectKind().GroupVersionKind())
		}
	})
}
