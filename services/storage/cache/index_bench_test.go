package cache

import (
	"fmt"
	"math/rand/v2"
	"testing"

	storagev1 "platform.io/proto/storage/v1"
)

// BenchmarkIndexAddNewKey adds new keys, in random order, to an index of one namespace that
// already holds 50,000 (a create in a busy namespace): the cost of keeping the keys in order.
func BenchmarkIndexAddNewKey(b *testing.B) {
	const existing = 50000
	rng := rand.New(rand.NewPCG(1, 2))
	ix := newIndex()
	obj := &storagev1.Object{Namespace: "ns", Name: "x", Value: []byte("v")}
	for i := range existing {
		ix.add(fmt.Sprintf("ns/%016x", rng.Uint64()), int64(i+1), obj)
	}
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = fmt.Sprintf("ns/%016x", rng.Uint64())
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		ix.add(keys[i], int64(existing+i+1), obj)
	}
}

// BenchmarkIndexScanNamespace lists one namespace of 2,000 keys among 50,000 (an unpaged list).
func BenchmarkIndexScanNamespace(b *testing.B) {
	ix := newIndex()
	obj := &storagev1.Object{Namespace: "ns", Name: "x", Value: []byte("v")}
	rev := int64(0)
	for n := range 25 {
		for i := range 2000 {
			rev++
			ix.add(fmt.Sprintf("ns-%02d/cm-%05d", n, i), rev, obj)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		count := 0
		ix.scan("ns-12/", "", rev, func(string, *version) bool { count++; return true })
		if count != 2000 {
			b.Fatalf("scanned %d keys, want 2000", count)
		}
	}
}
