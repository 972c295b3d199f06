package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/server"
)

// tableRates parses the rate/s column of the table printed by printTable, by operation.
func tableRates(out string) map[string]float64 {
	rates := map[string]float64{}
	inTable := false
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) == 8 && f[0] == "op" && f[3] == "rate/s" {
			inTable = true
			continue
		}
		if !inTable || len(f) != 8 {
			inTable = false
			continue
		}
		var rate float64
		if _, err := fmt.Sscan(f[3], &rate); err == nil {
			rates[f[0]] = rate
		}
	}
	return rates
}

func runTool(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	t.Logf("storageload %s -> exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
	return code, out.String()
}

// wantRates checks that the run passed and that each of ops has a non-zero rate.
func wantRates(t *testing.T, code int, out string, ops ...string) {
	t.Helper()
	if code != exitOK {
		t.Fatalf("exit code %d, want 0", code)
	}
	rates := tableRates(out)
	for _, op := range ops {
		if rates[op] <= 0 {
			t.Errorf("%s: rate %v, want > 0 (table rates: %v)", op, rates[op], rates)
		}
	}
}

// TestScenariosEmbedded runs every scenario for about a second against a service the tool starts
// on the embedded backend.
func TestScenariosEmbedded(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		args     []string
		ops      []string
	}{
		{"cas", []string{"--writers=4"}, []string{"update"}},
		{"list", []string{"--objects=300"}, []string{"list"}},
		{"watch", []string{"--watchers=40", "--conns=4", "--rate=50"}, []string{"update", "deliver", "deliver-ack"}},
		{"mixed", []string{"--writers=4", "--objects=200", "--watchers=10", "--rate=100"}, []string{"update", "list", "deliver"}},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			args := append([]string{"--start=embedded", "--scenario=" + tc.scenario, "--duration=1s", "--drain=20s"}, tc.args...)
			code, out := runTool(t, args...)
			wantRates(t, code, out, tc.ops...)
		})
	}
}

// TestCASRedis runs the cas scenario against a service on a redis-server the tool starts.
func TestCASRedis(t *testing.T) {
	code, out := runTool(t, "--start=redis", "--scenario=cas", "--writers=4", "--duration=1s")
	wantRates(t, code, out, "update")
}

// TestTarget runs the watch scenario against a service that is already running, and checks that
// the run deletes what it created.
func TestTarget(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Backend = "embedded"
	cfg.DataDir = t.TempDir()
	srv, err := server.Start(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Stop(ctx)
	})
	code, out := runTool(t, "--target="+srv.Addr().String(), "--scenario=list", "--objects=50", "--duration=500ms")
	wantRates(t, code, out, "list")
	code, out = runTool(t, "--target="+srv.Addr().String(), "--scenario=watch", "--watchers=20", "--rate=40", "--duration=1s")
	wantRates(t, code, out, "update", "deliver")

	_, rest, _ := strings.Cut(out, "namespace ")
	ns, _, _ := strings.Cut(rest, ";")
	conn, err := grpc.NewClient(srv.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := storage.NewClient(conn).List(t.Context(), &storagev1.ListRequest{Type: loadType, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.GetItems()); n != 0 || ns == "" {
		t.Errorf("namespace %q holds %d objects after the run, want 0", ns, n)
	}
}

// TestVerifyWatchers checks that lost, reordered, duplicated and unexpected events fail the run.
func TestVerifyWatchers(t *testing.T) {
	acks := []ack{{rev: 10, sent: 1, acked: 2}, {rev: 12, sent: 3, acked: 4}, {rev: 13, sent: 5, acked: 6}}
	for _, tc := range []struct {
		name string
		revs []int64
		fail string
	}{
		{"complete", []int64{10, 12, 13}, ""},
		{"lost", []int64{10, 13}, "lost 1,"},
		{"reordered", []int64{10, 13, 12}, "reordered 1,"},
		{"duplicated", []int64{10, 12, 12, 13}, "duplicated 1,"},
		{"unexpected", []int64{10, 11, 12, 13}, "unexpected 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &watcher{revs: tc.revs, recv: make([]int64, len(tc.revs))}
			for i := range w.recv {
				w.recv[i] = 100
			}
			res := &result{}
			verifyWatchers(res, &watchGroup{ws: []*watcher{w}}, acks, 10, time.Second)
			got := strings.Join(res.failures, "; ")
			if tc.fail == "" && got != "" || tc.fail != "" && !strings.Contains(got, tc.fail) {
				t.Errorf("failures %q, want one containing %q", got, tc.fail)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--target=10.0.0.1:7001"},
		{"--target=example.com:7001"},
		{"--start=embedded", "--target=127.0.0.1:7001"},
		{"--start=etcd"},
		{"--start=embedded", "--scenario=nope"},
		{"--start=embedded", "--duration=0s"},
		{"--start=embedded", "--scenario=watch", "--rate=0"},
	} {
		if code, _ := runTool(t, args...); code != exitUsage {
			t.Errorf("storageload %q: exit %d, want %d", args, code, exitUsage)
		}
	}
	for _, target := range []string{"127.0.0.1:7001", "localhost:7001", "[::1]:7001", "127.1.2.3:1"} {
		if err := checkLoopback(target); err != nil {
			t.Errorf("checkLoopback(%q): %v", target, err)
		}
	}
}

func TestHist(t *testing.T) {
	var h hist
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 500 * time.Microsecond}, {90, 900 * time.Microsecond}, {99, 990 * time.Microsecond}, {100, time.Millisecond}} {
		got := h.percentile(c.p)
		if got < c.want || float64(got) > float64(c.want)*1.04 {
			t.Errorf("p%v = %v, want %v (within 4%% above)", c.p, got, c.want)
		}
	}
	if h.max != time.Millisecond {
		t.Errorf("max = %v", h.max)
	}
	for _, d := range []time.Duration{0, 1, 63, 64, 65, 1000, time.Second, time.Hour, 1<<63 - 1} {
		if top := bucketTop(bucketOf(d)); top < d {
			t.Errorf("bucketTop(bucketOf(%d)) = %d < %d", d, top, d)
		}
		if i := bucketOf(d); i < 0 || i >= histBuckets {
			t.Errorf("bucketOf(%d) = %d out of range", d, i)
		}
	}
}
