package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/bits"
	"text/tabwriter"
	"time"
)

// latencies is a histogram of durations with fixed memory: every power of two (in nanoseconds)
// is split into subBuckets linear buckets, so a percentile read from it is within 1/subBuckets
// (about 1.6%) of the true value. The exact minimum and maximum are kept besides.
type latencies struct {
	buckets  [numBuckets]uint64
	n        uint64
	min, max time.Duration
}

const (
	subBits    = 6
	subBuckets = 1 << subBits
	// Values below 2*subBuckets get a bucket each; then subBuckets per power of two up to 2^63.
	numBuckets = 2*subBuckets + (63-subBits-1)*subBuckets
)

// bucketIndex maps a non-negative duration (in nanoseconds) to its bucket.
func bucketIndex(ns uint64) int {
	if ns < 2*subBuckets {
		return int(ns)
	}
	// Keep the top subBits+1 bits: ns>>shift lies in [subBuckets, 2*subBuckets).
	shift := bits.Len64(ns) - subBits - 1
	return subBuckets + shift*subBuckets + int(ns>>shift) - subBuckets
}

// bucketBounds is the range [lo, hi] of durations that land in bucket i.
func bucketBounds(i int) (lo, hi uint64) {
	if i < 2*subBuckets {
		return uint64(i), uint64(i)
	}
	shift := uint(i/subBuckets - 1)
	mant := uint64(subBuckets + i%subBuckets)
	lo = mant << shift
	return lo, lo + (1 << shift) - 1
}

func (h *latencies) record(d time.Duration) {
	d = max(d, 0)
	if h.n == 0 || d < h.min {
		h.min = d
	}
	h.max = max(h.max, d)
	h.buckets[bucketIndex(uint64(d))]++
	h.n++
}

func (h *latencies) merge(o *latencies) {
	if o.n == 0 {
		return
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	for i, c := range o.buckets {
		h.buckets[i] += c
	}
	h.n += o.n
}

// quantile returns the q-quantile (0 < q <= 1): the middle of the bucket holding the sample of
// rank ceil(q*n), clamped to the observed minimum and maximum.
func (h *latencies) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.999999)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.buckets {
		seen += c
		if seen >= rank {
			lo, hi := bucketBounds(i)
			mid := time.Duration(lo + (hi-lo)/2)
			return min(max(mid, h.min), h.max)
		}
	}
	return h.max
}

// outcome is one line of the result table: an operation measured at one client count.
type outcome struct {
	scenario string
	clients  int
	ops      uint64
	errors   uint64
	window   time.Duration // ops/s is ops / window
	lat      latencies
}

func (o *outcome) rate() float64 {
	if o.window <= 0 {
		return 0
	}
	return float64(o.ops) / o.window.Seconds()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// writeTable prints the outcomes as an aligned table.
func writeTable(w io.Writer, rows []*outcome) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tclients\tops\tops/s\tp50\tp90\tp99\tmax\terrors")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.2fms\t%.2fms\t%.2fms\t%.2fms\t%d\n", r.scenario, r.clients, r.ops, r.rate(),
			ms(r.lat.quantile(0.50)), ms(r.lat.quantile(0.90)), ms(r.lat.quantile(0.99)), ms(r.lat.max), r.errors)
	}
	_ = tw.Flush()
}

// report is what --json prints.
type report struct {
	Server   string      `json:"server"`
	Started  string      `json:"started,omitempty"`
	Gateways int         `json:"gateways"` // the gateways the load was spread over (--replicas)
	Protocol string      `json:"protocol"`
	CPUs     int         `json:"cpus"`
	Kind     string      `json:"kind,omitempty"` // --kind, when not configmap (the default)
	Results  []jsonRow   `json:"results"`
	Notes    []string    `json:"notes"`
	Failures []string    `json:"failures"`
	Passed   bool        `json:"passed"`
	Options  jsonOptions `json:"options"`
}

type jsonOptions struct {
	Duration string  `json:"duration"`
	Warmup   string  `json:"warmup"`
	Objects  int     `json:"objects"`
	Watchers int     `json:"watchers"`
	Rate     float64 `json:"rate"`
}

type jsonRow struct {
	Scenario  string  `json:"scenario"`
	Clients   int     `json:"clients"`
	Ops       uint64  `json:"ops"`
	OpsPerSec float64 `json:"opsPerSec"`
	P50ms     float64 `json:"p50ms"`
	P90ms     float64 `json:"p90ms"`
	P99ms     float64 `json:"p99ms"`
	MaxMs     float64 `json:"maxMs"`
	Errors    uint64  `json:"errors"`
}

func writeJSON(w io.Writer, rep *report, rows []*outcome) error {
	rep.Results = []jsonRow{}
	for _, r := range rows {
		rep.Results = append(rep.Results, jsonRow{Scenario: r.scenario, Clients: r.clients, Ops: r.ops, OpsPerSec: r.rate(),
			P50ms: ms(r.lat.quantile(0.50)), P90ms: ms(r.lat.quantile(0.90)), P99ms: ms(r.lat.quantile(0.99)), MaxMs: ms(r.lat.max), Errors: r.errors})
	}
	if rep.Notes == nil {
		rep.Notes = []string{}
	}
	if rep.Failures == nil {
		rep.Failures = []string{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
