package webhook

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"

	"platform.io/services/admission/admission"
)

func jsonPatch(ops ...map[string]any) *admissionv1.AdmissionResponse {
	b, _ := json.Marshal(ops)
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: b, PatchType: &pt}
}

func podOf(t *testing.T, req *admissionv1.AdmissionRequest) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &p); err != nil {
		t.Fatalf("webhook got an undecodable object: %v", err)
	}
	return &p
}

// Upstream: mutating webhooks run in order, each one seeing the previous one's patch; a webhook
// with reinvocationPolicy IfNeeded that ran before a later change is called again in the
// reinvocation round; the webhook that made the last change and Never webhooks are not.
func TestMutatingPatchesAndReinvocation(t *testing.T) {
	// In order: a (IfNeeded) marks the pod once; c (Never) adds label c; b (IfNeeded) adds label
	// b, the last change; d (IfNeeded) only looks.
	a := newHookServer(t, []string{"127.0.0.1"}, func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		if podOf(t, req).Annotations["a"] != "" {
			return nil
		}
		return jsonPatch(map[string]any{"op": "add", "path": "/metadata/annotations", "value": map[string]string{"a": "1"}})
	})
	b := newHookServer(t, []string{"127.0.0.1"}, addLabel(t, "b"))
	c := newHookServer(t, []string{"127.0.0.1"}, addLabel(t, "c"))
	d := newHookServer(t, []string{"127.0.0.1"}, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse { return nil })

	e := newEnv(t)
	e.addMutating("1-a", hookSpec{name: "a.example.com", url: a.url(), reinvocation: admissionregistrationv1.IfNeededReinvocationPolicy})
	e.addMutating("2-cb",
		hookSpec{name: "c.example.com", url: c.url()},
		hookSpec{name: "b.example.com", url: b.url(), reinvocation: admissionregistrationv1.IfNeededReinvocationPolicy})
	e.addMutating("3-d", hookSpec{name: "d.example.com", url: d.url(), reinvocation: admissionregistrationv1.IfNeededReinvocationPolicy})

	attrs := createPod(newPod("p", map[string]string{"app": "x"}))
	if err := e.run(attrs); err != nil {
		t.Fatalf("admission failed: %v", err)
	}
	pod := attrs.Object.(*corev1.Pod)
	if pod.Labels["b"] != "1" || pod.Labels["c"] != "1" || pod.Annotations["a"] != "1" {
		t.Fatalf("final pod labels %v annotations %v: want b=1, c=1 and a=1", pod.Labels, pod.Annotations)
	}
	for _, tc := range []struct {
		name string
		srv  *hookServer
		want int64
	}{
		{"a (IfNeeded, before the changes)", a, 2},
		{"c (Never)", c, 1},
		{"b (IfNeeded, made the last change itself)", b, 1},
		{"d (IfNeeded, after every change)", d, 1},
	} {
		if got := tc.srv.calls.Load(); got != tc.want {
			t.Errorf("%s called %d times, want %d", tc.name, got, tc.want)
		}
	}
	// Patches are applied before the next webhook is called, and the reinvocation round sees
	// the final object.
	if got := podOf(t, c.lastRequest(t)).Annotations["a"]; got != "1" {
		t.Errorf("c did not see a's patch")
	}
	if got := podOf(t, a.lastRequest(t)).Labels; got["b"] != "1" || got["c"] != "1" {
		t.Errorf("a's reinvocation saw labels %v, want b and c", got)
	}

	ann := attrs.Annotations()
	wantMutation := map[string]mutationAnnotation{
		"round_0_index_0": {"1-a", "a.example.com", true},
		"round_0_index_1": {"2-cb", "c.example.com", true},
		"round_0_index_2": {"2-cb", "b.example.com", true},
		"round_0_index_3": {"3-d", "d.example.com", false},
		"round_1_index_0": {"1-a", "a.example.com", false},
	}
	for suffix, want := range wantMutation {
		raw, ok := ann[mutationAnnotationPrefix+suffix]
		if !ok {
			t.Errorf("missing audit annotation %s%s (have %v)", mutationAnnotationPrefix, suffix, keys(ann))
			continue
		}
		var got mutationAnnotation
		if err := json.Unmarshal([]byte(raw), &got); err != nil || got != want {
			t.Errorf("annotation %s = %s, want %+v", suffix, raw, want)
		}
	}
	for _, i := range []string{"1", "2", "3"} {
		if _, ok := ann[mutationAnnotationPrefix+"round_1_index_"+i]; ok {
			t.Errorf("webhook %s was reinvoked: %v", i, keys(ann))
		}
	}
	raw := ann[patchAnnotationPrefix+"round_0_index_2"]
	var p struct {
		Configuration, Webhook, PatchType string
		Patch                             []map[string]any
	}
	if err := json.Unmarshal([]byte(raw), &p); err != nil || p.Configuration != "2-cb" || p.Webhook != "b.example.com" || p.PatchType != "JSONPatch" ||
		len(p.Patch) != 1 || p.Patch[0]["path"] != "/metadata/labels/b" {
		t.Errorf("patch annotation = %s", raw)
	}
	if _, ok := ann[patchAnnotationPrefix+"round_0_index_3"]; ok {
		t.Errorf("a webhook that did not patch has a patch annotation")
	}
}

// Upstream: the reinvocation context carries over into the reinvocation round, so a change made
// there reinvokes the IfNeeded webhooks that ran (in the first round) since the last change.
func TestMutatingChangeInReinvocationRound(t *testing.T) {
	// a records whether it saw label b (changing its answer in the second round); b adds b.
	a := newHookServer(t, []string{"127.0.0.1"}, func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		p := podOf(t, req)
		seen := "no"
		if p.Labels["b"] != "" {
			seen = "yes"
		}
		if p.Annotations["a-saw-b"] == seen {
			return nil
		}
		if p.Annotations == nil {
			return jsonPatch(map[string]any{"op": "add", "path": "/metadata/annotations", "value": map[string]string{"a-saw-b": seen}})
		}
		return jsonPatch(map[string]any{"op": "replace", "path": "/metadata/annotations/a-saw-b", "value": seen})
	})
	b := newHookServer(t, []string{"127.0.0.1"}, addLabel(t, "b"))
	d := newHookServer(t, []string{"127.0.0.1"}, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse { return nil })
	e := newEnv(t)
	ifNeeded := admissionregistrationv1.IfNeededReinvocationPolicy
	e.addMutating("cfg",
		hookSpec{name: "a.example.com", url: a.url(), reinvocation: ifNeeded},
		hookSpec{name: "b.example.com", url: b.url(), reinvocation: ifNeeded},
		hookSpec{name: "d.example.com", url: d.url(), reinvocation: ifNeeded})
	attrs := createPod(newPod("p", nil))
	if err := e.run(attrs); err != nil {
		t.Fatal(err)
	}
	if got := attrs.Object.(*corev1.Pod).Annotations["a-saw-b"]; got != "yes" {
		t.Errorf("a-saw-b = %q, want yes", got)
	}
	if a.calls.Load() != 2 || b.calls.Load() != 2 || d.calls.Load() != 2 {
		t.Errorf("calls a=%d b=%d d=%d, want 2 each (a's second-round change reinvokes b and d)", a.calls.Load(), b.calls.Load(), d.calls.Load())
	}
}

func addLabel(t *testing.T, label string) reviewHandler {
	return func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		p := podOf(t, req)
		if p.Labels[label] != "" {
			return nil
		}
		if p.Labels == nil {
			return jsonPatch(map[string]any{"op": "add", "path": "/metadata/labels", "value": map[string]string{label: "1"}})
		}
		return jsonPatch(map[string]any{"op": "add", "path": "/metadata/labels/" + label, "value": "1"})
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Upstream: a patch that cannot be applied or makes an invalid object fails the request (500)
// whatever the failurePolicy, naming the webhook; a patch on a DELETE is refused.
func TestMutatingBrokenPatches(t *testing.T) {
	for _, tc := range []struct {
		name   string
		patch  *admissionv1.AdmissionResponse
		op     admission.Operation
		want   string
		failOK bool
	}{
		{name: "patch makes a field the wrong type", patch: jsonPatch(map[string]any{"op": "replace", "path": "/spec/containers", "value": "not-a-list"}),
			want: `admission webhook "breaker.example.com" returned a patch that makes an invalid object`},
		{name: "patch changes the kind", patch: jsonPatch(map[string]any{"op": "replace", "path": "/kind", "value": "Service"}),
			want: `admission webhook "breaker.example.com" returned a patch that makes an invalid object: the patch changes apiVersion/kind`},
		{name: "patch operation fails", patch: jsonPatch(map[string]any{"op": "remove", "path": "/spec/nothing/here"}),
			want: `admission webhook "breaker.example.com" returned a patch that cannot be applied`},
		{name: "patch replaces metadata with a string", patch: jsonPatch(map[string]any{"op": "replace", "path": "/metadata", "value": "x"}),
			want: `admission webhook "breaker.example.com" returned a patch that makes an invalid object`},
		{name: "patch that panics the patch library", patch: jsonPatch(map[string]any{"op": "replace", "path": ""}),
			want: `admission webhook "breaker.example.com" returned a patch that cannot be applied: invalid patch`},
		{name: "patch on a delete", patch: jsonPatch(map[string]any{"op": "add", "path": "/metadata/labels/x", "value": "y"}), op: admission.Delete,
			want: `admission webhook "breaker.example.com" attempted to modify the object, which is not supported for this operation`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newHookServer(t, []string{"127.0.0.1"}, func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse { return tc.patch })
			e := newEnv(t)
			e.addMutating("breaker", hookSpec{name: "breaker.example.com", url: srv.url(), failure: admissionregistrationv1.Ignore})
			attrs := createPod(newPod("p", nil))
			if tc.op == admission.Delete {
				attrs.Operation, attrs.OldObject, attrs.Object = admission.Delete, attrs.Object, nil
			}
			err := e.run(attrs)
			if err == nil {
				t.Fatal("the request was admitted")
			}
			se := statusOf(t, err)
			if se.ErrStatus.Code != http.StatusInternalServerError || !strings.Contains(se.ErrStatus.Message, tc.want) {
				t.Fatalf("got %d %q, want 500 containing %q", se.ErrStatus.Code, se.ErrStatus.Message, tc.want)
			}
		})
	}
}

// Upstream: a patch in a v1 answer needs patchType; an undecodable patch is a failed call.
func TestMutatingPatchTypeRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want string
	}{
		{"patch without patchType", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"UID","allowed":true,"patch":"W10="}}`,
			"webhook returned response.patch but not response.patchType"},
		{"patchType without patch", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"UID","allowed":true,"patchType":"JSONPatch"}}`,
			"webhook returned response.patchType but not response.patch"},
		{"undecodable patch", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"UID","allowed":true,"patchType":"JSONPatch","patch":"bm90IGpzb24="}}`,
			"received undecodable patch in webhook response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newRawServer(t, []string{"127.0.0.1"}, func(w http.ResponseWriter, review *admissionv1.AdmissionReview) {
				_, _ = w.Write([]byte(strings.ReplaceAll(tc.body, "UID", string(review.Request.UID))))
			})
			e := newEnv(t)
			e.addMutating("cfg", hookSpec{name: "patcher.example.com", url: srv.url()})
			err := e.run(createPod(newPod("p", nil)))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `failed calling webhook "patcher.example.com"`) {
				t.Fatalf("got %v, want a failed call: %s", err, tc.want)
			}
		})
	}
}
