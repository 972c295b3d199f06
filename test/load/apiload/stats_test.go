package main

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestLatencyBuckets(t *testing.T) {
	// Bucket bounds tile the range without gaps, and every value lands in the bucket whose
	// bounds hold it.
	var prevHi uint64
	for i := range numBuckets {
		lo, hi := bucketBounds(i)
		if i > 0 && lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, the previous ends at %d", i, lo, prevHi)
		}
		if bucketIndex(lo) != i || bucketIndex(hi) != i {
			t.Fatalf("bucket %d = [%d, %d], but those land in %d and %d", i, lo, hi, bucketIndex(lo), bucketIndex(hi))
		}
		if i >= 2*subBuckets && float64(hi-lo+1)/float64(lo) > 1.0/subBuckets+1e-9 {
			t.Fatalf("bucket %d = [%d, %d] is wider than 1/%d of its values", i, lo, hi, subBuckets)
		}
		prevHi = hi
	}
	if prevHi != math.MaxUint64>>1 {
		t.Errorf("the last bucket ends at %d, want %d", prevHi, uint64(math.MaxUint64>>1))
	}
}

func TestLatencyQuantiles(t *testing.T) {
	var a, b latencies
	for i := 1; i <= 1000; i++ {
		d := time.Duration(i) * time.Millisecond
		if i%2 == 0 {
			a.record(d)
		} else {
			b.record(d)
		}
	}
	a.merge(&b)
	a.merge(&latencies{})
	if a.n != 1000 || a.min != time.Millisecond || a.max != time.Second {
		t.Fatalf("n=%d min=%v max=%v", a.n, a.min, a.max)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Millisecond}, {0.9, 900 * time.Millisecond}, {0.99, 990 * time.Millisecond}, {1, time.Second}, {0.0001, time.Millisecond}} {
		got := a.quantile(c.q)
		if diff := math.Abs(float64(got-c.want)) / float64(c.want); diff > 1.0/subBuckets {
			t.Errorf("quantile(%v) = %v, want %v within %.1f%%", c.q, got, c.want, 100.0/subBuckets)
		}
	}
	var one latencies
	one.record(1234 * time.Microsecond)
	if got := one.quantile(0.5); got != 1234*time.Microsecond {
		t.Errorf("a single sample's median = %v", got)
	}
	if got := (&latencies{}).quantile(0.5); got != 0 {
		t.Errorf("empty median = %v", got)
	}
}

func TestOutput(t *testing.T) {
	row := &outcome{scenario: "get", clients: 16, ops: 3000, errors: 2, window: 2 * time.Second}
	row.lat.record(time.Millisecond)
	var tbl bytes.Buffer
	writeTable(&tbl, []*outcome{row})
	lines := strings.Split(strings.TrimSpace(tbl.String()), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "scenario clients ops ops/s p50 p90 p99 max errors" ||
		strings.Join(strings.Fields(lines[1]), " ") != "get 16 3000 1500.0 1.00ms 1.00ms 1.00ms 1.00ms 2" {
		t.Errorf("table:\n%s", tbl.String())
	}
	var js bytes.Buffer
	if err := writeJSON(&js, &report{Server: "https://x"}, []*outcome{row}); err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(js.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 1 || rep.Results[0].OpsPerSec != 1500 || rep.Results[0].P99ms != 1 || rep.Failures == nil {
		t.Errorf("JSON: %s", js.String())
	}
}
