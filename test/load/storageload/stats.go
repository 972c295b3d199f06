package main

import (
	"fmt"
	"io"
	"math"
	"math/bits"
	"text/tabwriter"
	"time"
)

// hist is a latency histogram with bounded memory: log-linear buckets (32 per power of two,
// so a reported percentile is within about 3% of the true value), plus the exact maximum.
type hist struct {
	counts [histBuckets]uint64
	n      uint64
	max    time.Duration
}

const histBuckets = 64 + 58*32

func bucketOf(d time.Duration) int {
	v := uint64(max(d, 0))
	if v < 64 {
		return int(v)
	}
	shift := bits.Len64(v) - 6 // keep the top 6 bits: v>>shift is in [32, 63]
	return 64 + (shift-1)*32 + int(v>>shift) - 32
}

// bucketTop is the largest duration that falls in bucket i.
func bucketTop(i int) time.Duration {
	if i < 64 {
		return time.Duration(i)
	}
	shift := (i-64)/32 + 1
	top := uint64(32+(i-64)%32+1)<<shift - 1
	return time.Duration(min(top, math.MaxInt64))
}

func (h *hist) add(d time.Duration) {
	h.counts[bucketOf(d)]++
	h.n++
	h.max = max(h.max, d)
}

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// percentile returns the p-th percentile (0 < p <= 100), never above the maximum.
func (h *hist) percentile(p float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(p / 100 * float64(h.n))
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(bucketTop(i), h.max)
		}
	}
	return h.max
}

// row is one line of the result table.
type row struct {
	op      string
	count   uint64
	errors  uint64
	elapsed time.Duration // the rate is count / elapsed
	lat     *hist
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

// printTable writes the result table: one row per operation with its rate and latency
// percentiles.
func printTable(w io.Writer, rows []row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "op\tcount\terrors\trate/s\tp50\tp90\tp99\tmax")
	for _, r := range rows {
		rate := 0.0
		if r.elapsed > 0 {
			rate = float64(r.count) / r.elapsed.Seconds()
		}
		h := r.lat
		if h == nil {
			h = &hist{}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%s\t%s\t%s\t%s\n", r.op, r.count, r.errors, rate,
			fmtDur(h.percentile(50)), fmtDur(h.percentile(90)), fmtDur(h.percentile(99)), fmtDur(h.max))
	}
	_ = tw.Flush()
}
