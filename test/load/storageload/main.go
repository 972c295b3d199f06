// Command storageload generates load against the storage service's gRPC API and prints the
// throughput and latency percentiles it measured.
//
// It targets an already running service (--target host:port, loopback only) or starts one in its
// own process (--start=redis, which also starts a redis-server, or --start=embedded). Scenarios:
//
//	cas    --writers concurrent writers, each updating objects of its own with compare-and-swap
//	       on the revision it last got (a conflict is a failure: nobody else writes them)
//	list   --objects objects created, then unpaged consistent lists of them, one at a time
//	watch  --watchers watchers over --conns connections, one writer at --rate updates per second;
//	       delivery latency from the send time carried in the value (and from the write's
//	       acknowledgement); every watcher must receive every acknowledged revision exactly once,
//	       in order
//	mixed  all three at once: CAS writers at --rate in total, one lister, watchers that verify
//
// Every scenario runs for --duration, and every loop is bounded in time and in count. The exit
// code is 0 on success, 1 when the run found a failure (lost, reordered or duplicated watch
// events, conflicts, errors), 2 for a usage or setup error.
//
//	go run ./test/load/storageload --start=redis --scenario=cas --writers=16 --duration=10s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"platform.io/libs/redistest"
	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/server"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags.
type options struct {
	target     string
	start      string
	fsync      string
	scenario   string
	writers    int
	duration   time.Duration
	objects    int
	watchers   int
	conns      int
	rate       float64
	valueBytes int
	cleanup    bool
	drain      time.Duration
	set        map[string]bool // flags given on the command line
}

const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	maxDuration = time.Hour
	// maxOpsPerWorker bounds every loop by count as well as by time.
	maxOpsPerWorker = 50_000_000
)

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("storageload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.target, "target", "", "host:port of a running storage service (loopback only)")
	fs.StringVar(&o.start, "start", "", "start a service in this process instead: redis (also starts redis-server) or embedded")
	fs.StringVar(&o.fsync, "fsync", "everysec", "appendfsync of the redis-server --start=redis starts: everysec or always")
	fs.StringVar(&o.scenario, "scenario", "cas", "cas, list, watch or mixed")
	fs.IntVar(&o.writers, "writers", 16, "concurrent writers (cas, mixed)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "how long the measured phase runs")
	fs.IntVar(&o.objects, "objects", 0, "objects in the working set (list, mixed: listed, default 2000; cas: updated, spread over the writers, default one per writer)")
	fs.IntVar(&o.watchers, "watchers", 0, "watchers (watch: default 1000; mixed: default 50)")
	fs.IntVar(&o.conns, "conns", 8, "gRPC connections the clients are spread over")
	fs.Float64Var(&o.rate, "rate", 0, "writes per second (watch: default 100; mixed: in total, default 500; cas: 0 = as fast as possible)")
	fs.IntVar(&o.valueBytes, "value-bytes", 500, "size of an object's value")
	fs.BoolVar(&o.cleanup, "cleanup", true, "with --target, delete the objects the run created")
	fs.DurationVar(&o.drain, "drain", 30*time.Second, "watch, mixed: how long watchers may take to catch up after the last write")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })

	switch {
	case o.target == "" && o.start == "":
		return nil, errors.New("one of --target or --start is required")
	case o.target != "" && o.start != "":
		return nil, errors.New("--target and --start exclude each other")
	case o.target != "":
		if err := checkLoopback(o.target); err != nil {
			return nil, err
		}
	case o.start != "redis" && o.start != "embedded":
		return nil, fmt.Errorf("--start must be redis or embedded, not %q", o.start)
	}
	if o.fsync != "everysec" && o.fsync != "always" {
		return nil, fmt.Errorf("--fsync must be everysec or always, not %q", o.fsync)
	}
	switch o.scenario {
	case "cas", "list", "watch", "mixed":
	default:
		return nil, fmt.Errorf("--scenario must be cas, list, watch or mixed, not %q", o.scenario)
	}
	if o.duration <= 0 || o.duration > maxDuration {
		return nil, fmt.Errorf("--duration must be in (0, %s]", maxDuration)
	}
	if o.drain <= 0 || o.drain > 10*time.Minute {
		return nil, errors.New("--drain must be in (0, 10m]")
	}
	if o.writers < 1 || o.writers > 10000 {
		return nil, errors.New("--writers must be in [1, 10000]")
	}
	if o.conns < 1 || o.conns > 1000 {
		return nil, errors.New("--conns must be in [1, 1000]")
	}
	if o.valueBytes < 16 || o.valueBytes > 1<<20 {
		return nil, errors.New("--value-bytes must be in [16, 1MiB]")
	}
	if o.rate < 0 || o.rate > 1e6 {
		return nil, errors.New("--rate must be in [0, 1e6]")
	}
	if !o.set["rate"] {
		switch o.scenario {
		case "watch":
			o.rate = 100
		case "mixed":
			o.rate = 500
		}
	}
	if o.scenario == "watch" && o.rate == 0 {
		return nil, errors.New("--rate must be positive for the watch scenario")
	}
	if o.watchers == 0 {
		switch o.scenario {
		case "watch":
			o.watchers = 1000
		case "mixed":
			o.watchers = 50
		}
	}
	if o.watchers < 0 || o.watchers > 100000 {
		return nil, errors.New("--watchers must be in [0, 100000]")
	}
	if o.objects == 0 {
		o.objects = 2000
		if o.scenario == "cas" {
			o.objects = o.writers
		}
	}
	if o.objects < 1 || o.objects > 1_000_000 {
		return nil, errors.New("--objects must be in [1, 1000000]")
	}
	if o.scenario == "mixed" && o.objects < o.writers {
		return nil, errors.New("--objects must be at least --writers for the mixed scenario")
	}
	return o, nil
}

// checkLoopback refuses any target that is not on this machine's loopback.
func checkLoopback(target string) error {
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return fmt.Errorf("--target %q: %v", target, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("--target %q: invalid port", target)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--target %q: only loopback addresses (127.0.0.0/8, ::1, localhost) are allowed", target)
}

// env is the service under load and the clients that talk to it.
type env struct {
	desc    string
	clients []*storage.Client
	close   func()
}

// setup connects to --target, or starts redis-server and the service for --start.
func setup(ctx context.Context, o *options, stderr io.Writer) (*env, error) {
	e := &env{close: func() {}}
	addr := o.target
	e.desc = "target " + o.target
	if o.start != "" {
		dir, err := os.MkdirTemp("", "storageload-")
		if err != nil {
			return nil, err
		}
		closers := []func(){func() { _ = os.RemoveAll(dir) }}
		e.close = func() {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
		}
		cfg := server.DefaultConfig()
		cfg.Listen = "127.0.0.1:0"
		cfg.Backend = o.start
		e.desc = "in-process service, embedded backend"
		if o.start == "redis" {
			rs, err := redistest.StartProcess(dir, redistest.Options{AppendFsync: o.fsync})
			if err != nil {
				e.close()
				return nil, err
			}
			closers = append(closers, func() { _ = rs.Stop(false) })
			cfg.RedisURL = rs.URL()
			e.desc = "in-process service, redis backend (appendfsync " + o.fsync + ")"
		} else {
			cfg.DataDir = filepath.Join(dir, "data")
		}
		log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
		srv, err := server.Start(ctx, cfg, log)
		if err != nil {
			e.close()
			return nil, err
		}
		closers = append(closers, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			srv.Stop(sctx)
		})
		addr = srv.Addr().String()
	}
	for range o.conns {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), storage.CallOptions())
		if err != nil {
			e.close()
			return nil, err
		}
		prev := e.close
		e.close = func() { _ = conn.Close(); prev() }
		e.clients = append(e.clients, storage.NewClient(conn))
	}
	// Fail early, with a clear message, if nothing answers.
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := e.clients[0].Revision(pctx, &storagev1.RevisionRequest{Type: loadType}); err != nil {
		e.close()
		return nil, fmt.Errorf("storage service at %s does not answer: %w", addr, err)
	}
	return e, nil
}

// loadType is the resource type the tool writes; each run works in a namespace of its own.
var loadType = &storagev1.ResourceType{Group: "load.platform.io", Resource: "loadobjects"}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "storageload:", err)
		}
		return exitUsage
	}
	// Setup, the measured phase, the watchers' drain and the cleanup all end by this deadline.
	ctx, cancel := context.WithTimeout(context.Background(), o.duration+o.drain+10*time.Minute)
	defer cancel()
	e, err := setup(ctx, o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "storageload:", err)
		return exitUsage
	}
	defer e.close()

	l := &load{o: o, clients: e.clients, ns: "load-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	fmt.Fprintf(stdout, "storageload: scenario=%s %s; namespace %s; %d CPUs, GOMAXPROCS=%d, %d connections\n",
		o.scenario, e.desc, l.ns, runtime.NumCPU(), runtime.GOMAXPROCS(0), o.conns)
	res, err := l.run(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "storageload:", err)
		return exitUsage
	}
	printTable(stdout, res.rows)
	for _, n := range res.notes {
		fmt.Fprintln(stdout, n)
	}
	if o.target != "" && o.cleanup {
		if err := l.cleanup(ctx); err != nil {
			fmt.Fprintln(stderr, "storageload: cleanup:", err)
		}
	}
	if len(res.failures) > 0 {
		for _, f := range res.failures {
			fmt.Fprintln(stdout, "FAIL:", f)
		}
		return exitFailed
	}
	fmt.Fprintln(stdout, "PASS")
	return exitOK
}
