package storage

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The stored form round-trips, and is the envelope apimachinery's runtime.Unknown reads (the
// gateway's codec).
func TestStoredEnvelope(t *testing.T) {
	in := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "n", UID: "u"}, Data: map[string][]byte{"k": []byte("v")}}
	value, err := EncodeStored("v1", "Secret", in)
	if err != nil {
		t.Fatal(err)
	}
	var out corev1.Secret
	if err := DecodeStored(value, &out); err != nil {
		t.Fatal(err)
	}
	if out.Name != "s" || out.Namespace != "n" || string(out.Data["k"]) != "v" {
		t.Errorf("round trip: %+v", out)
	}
	var unk runtime.Unknown
	if err := unk.Unmarshal(value[4:]); err != nil || unk.APIVersion != "v1" || unk.Kind != "Secret" {
		t.Errorf("not a runtime.Unknown envelope: %v %+v", err, unk.TypeMeta)
	}
	for _, bad := range [][]byte{nil, []byte("k8s"), []byte("{\"kind\":\"Secret\"}"), value[:len(value)-3], append(value[:4:4], 0x12)} {
		if err := DecodeStored(bad, &out); err == nil {
			t.Errorf("decoded %q", bad)
		}
	}
}
