package server

import (
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	storagev1 "platform.io/proto/storage/v1"
)

// The byte-wise checks agree with the library's on every string of up to four characters over
// an alphabet with each kind of character, and on random longer ones around the length limits.
func TestLabelChecksAgreeWithLibrary(t *testing.T) {
	alphabet := []byte("az09-.A_é")
	check := func(s string) {
		t.Helper()
		if got, want := isLabel(s), len(validation.IsDNS1123Label(s)) == 0; got != want {
			t.Fatalf("isLabel(%q) = %v, library %v", s, got, want)
		}
		if got, want := isSubdomain(s), len(validation.IsDNS1123Subdomain(s)) == 0; got != want {
			t.Fatalf("isSubdomain(%q) = %v, library %v", s, got, want)
		}
	}
	var walk func(prefix []byte)
	walk = func(prefix []byte) {
		check(string(prefix))
		if len(prefix) == 4 {
			return
		}
		for _, c := range alphabet {
			walk(append(prefix, c))
		}
	}
	walk(nil)
	rng := rand.New(rand.NewPCG(7, 11))
	for range 20000 {
		n := []int{62, 63, 64, 252, 253, 254}[rng.IntN(6)] - rng.IntN(3)
		var sb strings.Builder
		for sb.Len() < n {
			sb.WriteByte("abz019-."[rng.IntN(8)])
		}
		s := sb.String()
		check(s)
		check("a" + s[1:len(s)-1] + "z") // ends that pass, to reach the length limits
	}
}

func BenchmarkValidateKey(b *testing.B) {
	rt := &storagev1.ResourceType{Group: "apps.platform.io", Resource: "configmaps"}
	for range b.N {
		if err := validateKey(rt, "apiload-x1y2z3-get", "get-00042"); err != nil {
			b.Fatal(err)
		}
	}
}
