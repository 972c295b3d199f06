package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A JSON list assembled from its items' encodings, in a buffer reused from an earlier, longer
// list, is byte for byte what encoding/json writes for the typed list.
func TestJSONListIsTheTypedListsEncoding(t *testing.T) {
	list := func(n int, rv string) (*corev1.ConfigMapList, [][]byte) {
		l := &corev1.ConfigMapList{TypeMeta: metav1.TypeMeta{Kind: "ConfigMapList", APIVersion: "v1"},
			ListMeta: metav1.ListMeta{ResourceVersion: rv, Continue: "<&>"}}
		var items [][]byte
		for i := range n {
			cm := corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm-", i), Namespace: "default", ResourceVersion: fmt.Sprint(i + 1)},
				Data:       map[string]string{"key": fmt.Sprint("value <", i, ">")}}
			l.Items = append(l.Items, cm)
			b, err := json.Marshal(&cm)
			if err != nil {
				t.Fatal(err)
			}
			items = append(items, b)
		}
		return l, items
	}
	a := &API{}
	for _, n := range []int{50, 3, 0, 20} {
		typed, items := list(n, fmt.Sprint(100+n))
		want, err := json.Marshal(typed)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			// encoding/json writes a nil slice as null; a list always has its items array, as
			// upstream writes it.
			want = bytes.Replace(want, []byte(`"items":null`), []byte(`"items":[]`), 1)
		}
		w := httptest.NewRecorder()
		a.writeJSONList(w, httptest.NewRequest(http.MethodGet, "/api/v1/configmaps", nil), "application/json", "ConfigMapList",
			corev1.SchemeGroupVersion, items, typed.ListMeta)
		if got := w.Body.Bytes(); !bytes.Equal(got, want) {
			t.Fatalf("list of %d:\n got %s\nwant %s", n, got, want)
		}
		if w.Header().Get("Content-Length") != fmt.Sprint(len(want)) {
			t.Fatalf("list of %d: Content-Length %q, want %d", n, w.Header().Get("Content-Length"), len(want))
		}
	}
}
