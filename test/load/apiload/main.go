// Command apiload generates load against the gateway's HTTP resource API and prints the
// throughput and latency percentiles it measured, per operation and client count.
//
// It targets a running server (--server and/or --kubeconfig, or --ca-file, --cert-file and
// --key-file; the gateway authenticates client certificates) or starts the whole system with
// test/stack in a temporary directory (--start=split: redis-server, the storage service and the
// gateway as processes; --start=allinone: the all-in-one binary) and stops it at the end.
//
// Scenarios, each against objects of one kind (--kind) in a namespace of its own
// (<--namespace>-<scenario>) that the tool creates, and deletes at the end:
//
//	create  every client POSTs objects of unique names as fast as it can
//	get     every client GETs objects of a pre-created set of 100, round-robin
//	patch   every client merge-patches a key of objects of a pre-created set of 100, round-robin
//	apply   the same with a server-side apply of the whole object by one field manager
//	list    every client GETs the collection of --objects objects, unpaged (JSON); a list
//	        with another number of items is a failure
//	watch   --watchers watches from a list's resourceVersion, one writer updating an object at
//	        --rate with its send time in the data; reports the writes (watch-write) and the
//	        delivery delay (watch-deliver, one op per event delivered to one watch); every watch
//	        must deliver every acknowledged write exactly once, in order. It runs once, with
//	        any --clients
//
// The collect scenario (not part of --scenario=all) measures the garbage collector: one owner and
// --objects dependents naming it in an owner reference, the owner deleted in the background, and
// the time until no dependent is left.
//
// Two floor scenarios, not part of --scenario=all, measure what a request costs below the resource
// API, for comparison with the rows above (they need no objects and no namespace):
//
//	version every client GETs /version as the run's identity: TLS, HTTP/2, authentication,
//	        authorization and a small JSON answer, no storage
//	null    every client GETs a fixed ConfigMap-sized JSON answer from a do-nothing HTTPS server
//	        that apiload serves itself (HTTP/2 unless --http1): the client, TLS, HTTP and the
//	        kernel, with no server work; that server's CPU is part of apiload's
//
// The kind is ConfigMap (--kind=configmap, the default) or a custom kind (--kind=custom):
// LoadObject in apiload.example.com/v1, JSON only, which the tool defines before the scenarios
// with the CustomResourceDefinition loadobjects.apiload.example.com (its schema makes "data" a
// map of strings, as a ConfigMap's is) and deletes at the end; a definition that exists already is
// reused and left in place. The output names a custom kind in its header line (and "kind" with
// --json).
//
// Every object carries about 300 bytes of data in four keys. Each client is a goroutine; all
// share one http.Transport, so over HTTP/2 (unless --http1) their requests are streams of one
// connection, as client-go's are. Each run (scenario × client count) warms up for --warmup, then
// measures for --duration: an operation counts if it completes inside that window.
//
// With --start the tool also notes the CPU (in cores) that it and each process it started used
// during each measured window, and how busy the whole machine was (Linux, from /proc): more
// machine than process time means something else ran meanwhile and disturbed the numbers.
//
// With --start=split, --replicas=N starts N gateways, each talking to a storage replica of its own,
// all on the one redis-server (the one authentication, authorization, admission, certificates and
// controllers services), and spreads the clients over the gateways round-robin (the watch
// scenario stays on the first); a comma-separated list (--replicas=1,2) starts one stack per
// count, one after another, and reports each. The CPU notes then name every gateway and storage
// process.
//
// Exit codes: 0 success, 1 the run found failures (failed requests, wrong list counts, lost,
// duplicated or reordered watch events), 2 usage or setup error.
//
//	go run ./test/load/apiload --start=split --scenario=create,get,list --clients=1,16 --duration=10s
//	go run ./test/load/apiload --start=split --kind=custom --scenario=create,get,patch,apply --clients=1,16
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"platform.io/test/stack"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

// allScenarios in the order --scenario=all runs them (floorScenarios are not part of all).
var allScenarios = []string{"create", "get", "patch", "apply", "list", "watch"}

// options are the command's flags.
type options struct {
	server, kubeconfig        string
	caFile, certFile, keyFile string
	start                     string
	clients                   []int
	// replicas are the gateway (and storage replica) counts of --start=split, one stack each;
	// servers the started stack's other gateways, which the load is spread over.
	replicas                []int
	servers                 []string
	scenarios               []string
	kind                    *objectKind
	duration, warmup, drain time.Duration
	objects                 int
	namespace               string
	http1                   bool
	// gzip: the load's requests accept gzip-encoded answers, as Go's transport and client-go ask
	// by default (upstream compresses answers over 128 KiB for such clients).
	gzip     bool
	watchers int
	rate     float64
	jsonOut  bool
	// identity the scenarios run as; authorizationMode the --authorization-mode of a started
	// stack; userCert and userKey the client certificate of --identity=user.
	identity, authorizationMode string
	userCert, userKey           []byte
	// webhook is "noop" to register a webhook that allows everything for the measured writes;
	// admission is "off" to start the stack with every admission plugin disabled.
	webhook, admission string
	// controllers is "off" to start the stack with no controller running (as a kube-apiserver
	// measured without a controller manager).
	controllers string
	// meter names processes (by command name) whose CPU each run reports, beside the tool's
	// own and the started stack's.
	meter []string
	// profileDir receives CPU profiles of the started stack's gateway and storage per run.
	profileDir string
	// metricsURLs are the started stack's services' /metrics URLs (with --profile-dir).
	metricsURLs map[string]string
}

// namespacePrefix: a DNS label short enough for the "-<scenario>" suffix.
var namespacePrefix = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,48}[a-z0-9])?$`)

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("apiload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.server, "server", "", "https://host:port of a running gateway (default: the kubeconfig's server)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig with the server, its CA and a client certificate (current context)")
	fs.StringVar(&o.caFile, "ca-file", "", "CA bundle that verifies the server (overrides the kubeconfig's)")
	fs.StringVar(&o.certFile, "cert-file", "", "client certificate, PEM (overrides the kubeconfig's)")
	fs.StringVar(&o.keyFile, "key-file", "", "client key, PEM (overrides the kubeconfig's)")
	fs.StringVar(&o.start, "start", "", "start the system instead, in a temporary directory: split or allinone")
	replicas := fs.String("replicas", "1", "with --start=split: gateways, each with a storage replica of its own on the one Redis, the clients spread over them; "+
		"a comma-separated list starts one stack per count, one after another")
	clients := fs.String("clients", "16", "concurrent clients; a comma-separated list runs each scenario once per count")
	scenario := fs.String("scenario", "all", "create, get, patch, apply, list, watch, or all (those six); version (GET /version) or null (a do-nothing HTTPS server in apiload): "+
		"floors to compare with; collect (--objects dependents of one owner, deleted in the background: the garbage collector's time); "+
		"a comma-separated list runs several")
	kind := fs.String("kind", "configmap", "kind of the objects every scenario works on: configmap, or custom (LoadObject of apiload.example.com/v1, "+
		"defined by a CustomResourceDefinition that the tool creates and deletes, or reuses if it exists)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time of each run")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "time each run warms up before it measures")
	fs.IntVar(&o.objects, "objects", 2000, "list: the number of objects listed")
	fs.StringVar(&o.namespace, "namespace", "", "prefix of the namespaces the run creates, <prefix>-<scenario> (default apiload-<random>)")
	fs.BoolVar(&o.http1, "http1", false, "use HTTP/1.1 (default: HTTP/2 when the server offers it)")
	fs.BoolVar(&o.gzip, "gzip", true, "the load's requests accept gzip-encoded answers (Accept-Encoding: gzip), as Go's transport and client-go do by default; "+
		"--gzip=false asks for identity answers")
	fs.IntVar(&o.watchers, "watchers", 100, "watch: concurrent watches")
	fs.Float64Var(&o.rate, "rate", 100, "watch: updates per second")
	fs.DurationVar(&o.drain, "drain", 30*time.Second, "watch: how long the watches may take to deliver the last write")
	fs.BoolVar(&o.jsonOut, "json", false, "print the results as JSON instead of a table")
	fs.StringVar(&o.identity, "identity", identityAdmin, "who the scenarios' requests are made as: admin (the kubeconfig's certificate, system:masters), "+
		"serviceaccount (a service account token, allowed by a RoleBinding), or user (a client certificate outside system:masters, allowed by a RoleBinding; --start only)")
	fs.StringVar(&o.authorizationMode, "authorization-mode", "", "with --start: the stack's --authorization-mode (default: the services' default, Node,RBAC)")
	fs.StringVar(&o.webhook, "webhook", "", "noop: register a validating webhook (HTTPS on loopback, allows everything) for the measured kind's writes")
	fs.StringVar(&o.controllers, "controllers", "default", "with --start: default (the stack's controllers), nogc (those without the garbage collector) or off (no controller runs, "+
		"as for a kube-apiserver measured without a controller manager: no watch of the measured objects but the load's)")
	fs.StringVar(&o.admission, "admission", "default", "with --start: default (the spec's default plugins) or off (every default plugin disabled: no write is sent to admission)")
	meter := fs.String("meter", "", "comma-separated command-name prefixes of running processes whose CPU use each run reports (e.g. kube-apiserver,etcd for a server apiload did not start)")
	fs.StringVar(&o.profileDir, "profile-dir", "", "with --start: write a CPU profile of the gateway and of the storage service (split) for every measured run into this directory (go tool pprof reads them)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	remote := o.server != "" || o.kubeconfig != "" || o.caFile != "" || o.certFile != "" || o.keyFile != ""
	switch {
	case o.start == "" && !remote:
		return nil, errors.New("give --server/--kubeconfig for a running server, or --start=split|allinone")
	case o.start != "" && remote:
		return nil, errors.New("--start excludes --server, --kubeconfig, --ca-file, --cert-file and --key-file")
	case o.start != "" && o.start != string(stack.Split) && o.start != string(stack.AllInOne):
		return nil, fmt.Errorf("--start must be split or allinone, not %q", o.start)
	case o.identity != identityAdmin && o.identity != identityServiceAccount && o.identity != identityUser:
		return nil, fmt.Errorf("--identity must be admin, serviceaccount or user, not %q", o.identity)
	case o.identity == identityUser && o.start == "":
		return nil, errors.New("--identity=user needs --start (its certificate is issued by the started stack's CA)")
	case o.authorizationMode != "" && o.start == "":
		return nil, errors.New("--authorization-mode needs --start")
	case o.webhook != "" && o.webhook != "noop":
		return nil, fmt.Errorf("--webhook must be noop, not %q", o.webhook)
	case o.admission != "default" && o.admission != "off":
		return nil, fmt.Errorf("--admission must be default or off, not %q", o.admission)
	case o.admission == "off" && o.start == "":
		return nil, errors.New("--admission=off needs --start")
	case o.controllers != "default" && o.controllers != "nogc" && o.controllers != "off":
		return nil, fmt.Errorf("--controllers must be default, nogc or off, not %q", o.controllers)
	case o.controllers == "off" && o.start == "":
		return nil, errors.New("--controllers=off needs --start")
	case o.profileDir != "" && o.start == "":
		return nil, errors.New("--profile-dir needs --start")
	}
	for m := range strings.SplitSeq(*meter, ",") {
		if m = strings.TrimSpace(m); m != "" {
			o.meter = append(o.meter, m)
		}
	}
	if o.server != "" {
		if err := checkServerURL(o.server); err != nil {
			return nil, fmt.Errorf("--server: %w", err)
		}
	}
	var err error
	if o.clients, err = parseClients(*clients); err != nil {
		return nil, err
	}
	if o.replicas, err = parseReplicas(*replicas); err != nil {
		return nil, err
	}
	if o.start != string(stack.Split) && (len(o.replicas) > 1 || o.replicas[0] != 1) {
		return nil, errors.New("--replicas needs --start=split")
	}
	if o.scenarios, err = parseScenarios(*scenario); err != nil {
		return nil, err
	}
	if o.kind, err = parseKind(*kind); err != nil {
		return nil, err
	}
	switch {
	case o.duration <= 0 || o.duration > time.Hour:
		return nil, errors.New("--duration must be in (0, 1h]")
	case o.warmup < 0 || o.warmup > 10*time.Minute:
		return nil, errors.New("--warmup must be in [0, 10m]")
	case o.drain <= 0 || o.drain > 10*time.Minute:
		return nil, errors.New("--drain must be in (0, 10m]")
	case o.objects < 1 || o.objects > 1_000_000:
		return nil, errors.New("--objects must be in [1, 1000000]")
	case o.watchers < 1 || o.watchers > 10_000:
		return nil, errors.New("--watchers must be in [1, 10000]")
	case !(o.rate > 0 && o.rate <= 10_000):
		return nil, errors.New("--rate must be in (0, 10000]")
	case o.namespace != "" && !namespacePrefix.MatchString(o.namespace):
		return nil, fmt.Errorf("--namespace %q: want lower-case letters, digits and '-', at most 50, starting and ending alphanumeric", o.namespace)
	}
	if slices.Contains(o.scenarios, "watch") {
		if mem := float64(o.watchers) * (o.rate*(o.warmup+o.duration).Seconds()*1.5 + 1024) * 24; mem > 4<<30 {
			return nil, fmt.Errorf("%d watches × %.0f events would take %.1f GiB to verify: lower --watchers, --rate or --duration",
				o.watchers, o.rate*(o.warmup+o.duration).Seconds(), mem/(1<<30))
		}
	}
	return o, nil
}

func parseClients(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 10_000 {
			return nil, fmt.Errorf("--clients %q: want client counts in [1, 10000], comma-separated", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func parseReplicas(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 8 {
			return nil, fmt.Errorf("--replicas %q: want counts in [1, 8], comma-separated", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func parseScenarios(s string) ([]string, error) {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		var add []string
		switch {
		case f == "all":
			add = allScenarios
		case slices.Contains(allScenarios, f) || slices.Contains(floorScenarios, f) || f == scenarioCollect:
			add = []string{f}
		default:
			return nil, fmt.Errorf("--scenario %q: want create, get, patch, apply, list, watch, all, version, null or collect, comma-separated", s)
		}
		for _, a := range add {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "apiload:", err)
		}
		return exitUsage
	}
	// Every run, the watch's drain, setup and cleanup end by this deadline.
	runs := len(o.clients) * len(o.scenarios) * len(o.replicas)
	budget := time.Duration(runs)*(o.warmup+o.duration) + time.Duration(len(o.replicas))*(o.drain+15*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	if o.start == "" {
		return measure(ctx, o, "", stdout, stderr)
	}
	code := exitOK
	for _, n := range o.replicas {
		c := runStarted(ctx, o, n, stdout, stderr)
		if c == exitUsage {
			return c
		}
		code = max(code, c)
	}
	return code
}

// runStarted starts the stack (with n gateways and storage replicas), measures and stops it.
func runStarted(ctx context.Context, o *options, n int, stdout, stderr io.Writer) int {
	dir, err := os.MkdirTemp("", "apiload-")
	if err != nil {
		fmt.Fprintln(stderr, "apiload:", err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "apiload: starting the %s stack in %s\n", o.start, dir)
	so := stack.Options{Mode: stack.Mode(o.start), Dir: dir}
	if o.authorizationMode != "" {
		if o.start == string(stack.Split) {
			so.AuthzArgs = []string{"--authorization-mode", o.authorizationMode}
		} else {
			so.GatewayArgs = []string{"--authorization-mode", o.authorizationMode}
		}
	}
	if o.admission == "off" {
		off := []string{"--disable-admission-plugins", strings.Join(defaultAdmissionPlugins, ",")}
		if o.start == string(stack.Split) {
			so.AdmissionArgs = off
		} else {
			so.GatewayArgs = append(so.GatewayArgs, off...)
		}
	}
	if o.controllers == "nogc" {
		nogc := []string{"--controllers", "*,tokencleaner,bootstrapsigner,-garbagecollector"}
		if o.start == string(stack.Split) {
			so.ControllersArgs = nogc
		} else {
			so.GatewayArgs = append(so.GatewayArgs, nogc...)
		}
	}
	if o.controllers == "off" {
		// Upstream's --controllers rule: without "*", only the controllers named are on, and a
		// "-name" names none.
		off := []string{"--controllers", "-csrcleaner"}
		if o.start == string(stack.Split) {
			so.ControllersArgs = off
		} else {
			so.GatewayArgs = append(so.GatewayArgs, off...)
		}
	}
	if o.profileDir != "" {
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			fmt.Fprintln(stderr, "apiload:", err)
			return exitUsage
		}
		so.Metrics = true
		so.StorageArgs = append(so.StorageArgs, "--profiling")
	}
	s, err := stack.Start(so)
	if err != nil {
		fmt.Fprintf(stderr, "apiload: starting the %s stack: %v (logs in %s)\n", o.start, err, dir)
		return exitUsage
	}
	keepLogs := true
	defer func() {
		s.Stop()
		if keepLogs {
			fmt.Fprintf(stderr, "apiload: the services' logs are in %s\n", dir)
		} else {
			_ = os.RemoveAll(dir)
		}
	}()
	o.kubeconfig = s.Kubeconfig
	o.metricsURLs = s.MetricsURLs
	o.servers = nil
	for range n - 1 {
		_, addr, err := s.StartStorageReplica()
		if err != nil {
			fmt.Fprintln(stderr, "apiload: starting a storage replica:", err)
			return exitUsage
		}
		url, err := s.StartGatewayReplicaOn(addr)
		if err != nil {
			fmt.Fprintln(stderr, "apiload: starting a gateway replica:", err)
			return exitUsage
		}
		o.servers = append(o.servers, url)
	}
	if o.identity == identityUser {
		if o.userCert, o.userKey, err = s.ClientCert(loadUser); err != nil {
			fmt.Fprintln(stderr, "apiload:", err)
			return exitUsage
		}
	}
	code := measure(ctx, o, o.start, stdout, stderr)
	keepLogs = code != exitOK
	return code
}

// defaultAdmissionPlugins is the default admission plugin set (the spec's, plus
// ValidatingAdmissionPolicy), which --admission=off disables.
var defaultAdmissionPlugins = []string{
	"CertificateApproval", "CertificateSigning", "CertificateSubjectRestriction", "DefaultIngressClass",
	"DefaultStorageClass", "DefaultTolerationSeconds", "LimitRanger", "MutatingAdmissionWebhook",
	"NamespaceLifecycle", "PersistentVolumeClaimResize", "PodSecurity", "Priority", "ResourceQuota",
	"RuntimeClass", "ServiceAccount", "StorageObjectInUseProtection", "TaintNodesByCondition",
	"ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook",
}

// measure runs the scenarios against the server o names and reports.
func measure(ctx context.Context, o *options, started string, stdout, stderr io.Writer) int {
	cr, err := loadCredentials(o)
	if err != nil {
		fmt.Fprintln(stderr, "apiload:", err)
		return exitUsage
	}
	tc, err := cr.tlsConfig()
	if err != nil {
		fmt.Fprintln(stderr, "apiload:", err)
		return exitUsage
	}
	conns := slices.Max(o.clients) + 16
	if slices.Contains(o.scenarios, "watch") {
		conns += o.watchers
	}
	tr := newTransport(tc, o.http1, true, conns)
	defer tr.CloseIdleConnections()
	api := &apiClient{base: strings.TrimSuffix(cr.server, "/"), hc: &http.Client{Transport: tr}}
	proto, err := api.probe(ctx, "/api/v1/namespaces/default")
	if err != nil {
		fmt.Fprintln(stderr, "apiload:", err)
		return exitUsage
	}
	g, err := api.discoverGroups(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "apiload:", err)
		return exitUsage
	}
	useGroups(g)

	prefix := o.namespace
	if prefix == "" {
		prefix = "apiload-" + strconv.FormatInt(time.Now().UnixNano()%(1<<40), 36)
	}
	r := &runner{o: o, api: api, nsPrefix: prefix, progress: stderr, meterCPU: (started != "" || len(o.meter) > 0) && runtime.GOOS == "linux"}
	if o.profileDir != "" {
		r.profiles = profileTargets(api, o.metricsURLs)
	}
	// The load's own transport: a token must not travel with the administrator's certificate
	// (the certificate would authenticate the request).
	loadTLS := tc.Clone()
	switch o.identity {
	case identityServiceAccount:
		loadTLS.Certificates = nil
	case identityUser:
		cert, err := tls.X509KeyPair(o.userCert, o.userKey)
		if err != nil {
			fmt.Fprintln(stderr, "apiload:", err)
			return exitUsage
		}
		loadTLS.Certificates = []tls.Certificate{cert}
	}
	loadTr := newTransport(loadTLS, o.http1, o.gzip, conns)
	defer loadTr.CloseIdleConnections()
	// cleanup deletes what the run created, however far it got.
	cleanup := func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		if err := r.cleanup(cctx); err != nil {
			fmt.Fprintln(stderr, "apiload: deleting what the run created:", err)
		}
	}
	if err := r.setupIdentity(ctx, loadTr); err != nil {
		cleanup()
		fmt.Fprintln(stderr, "apiload:", err)
		return exitUsage
	}
	if len(o.servers) > 0 {
		r.loads = []*apiClient{r.load}
		for _, url := range o.servers {
			r.loads = append(r.loads, &apiClient{base: url, hc: r.load.hc})
		}
	}
	desc := "server " + api.base
	if started != "" {
		desc += " (" + started + " stack started by apiload)"
	}
	if len(o.servers) > 0 {
		desc += fmt.Sprintf(" and %s: %d gateways, each on a storage replica of its own, one Redis; clients spread round-robin", strings.Join(o.servers, ", "), len(o.servers)+1)
	}
	header := fmt.Sprintf("apiload: %s over %s; namespaces %s-*", desc, proto, prefix)
	if o.kind != configMapKind {
		header += fmt.Sprintf("; kind %s (%s, --kind=%s)", o.kind.kind, o.kind.apiVersion, o.kind.flag)
	}
	header += fmt.Sprintf("; as %s", o.identity)
	if o.authorizationMode != "" {
		header += ", --authorization-mode=" + o.authorizationMode
	}
	if o.admission == "off" {
		header += "; admission plugins off"
	}
	if o.controllers == "nogc" {
		header += "; no garbage collector"
	}
	if o.controllers == "off" {
		header += "; no controllers"
	}
	if o.webhook != "" {
		header += "; a no-op validating webhook on the measured writes"
	}
	header += fmt.Sprintf("; %d CPUs, GOMAXPROCS=%d; each run %s after %s of warm-up", runtime.NumCPU(), runtime.GOMAXPROCS(0), o.duration, o.warmup)
	if !o.jsonOut {
		fmt.Fprintln(stdout, header)
	} else {
		fmt.Fprintln(stderr, header)
	}
	runErr := r.run(ctx)
	cleanup()
	if runErr != nil {
		// What was measured before the error is still worth seeing.
		writeTable(stderr, r.rows)
		fmt.Fprintln(stderr, "apiload:", runErr)
		return exitUsage
	}

	if o.jsonOut {
		rep := &report{Server: api.base, Started: started, Gateways: len(o.servers) + 1, Protocol: proto, CPUs: runtime.NumCPU(), Notes: r.notes, Failures: r.failures,
			Passed:  len(r.failures) == 0,
			Options: jsonOptions{Duration: o.duration.String(), Warmup: o.warmup.String(), Objects: o.objects, Watchers: o.watchers, Rate: o.rate}}
		if o.kind != configMapKind {
			rep.Kind = o.kind.flag
		}
		if err := writeJSON(stdout, rep, r.rows); err != nil {
			fmt.Fprintln(stderr, "apiload:", err)
			return exitUsage
		}
	} else {
		writeTable(stdout, r.rows)
		for _, n := range r.notes {
			fmt.Fprintln(stdout, n)
		}
		for _, f := range r.failures {
			fmt.Fprintln(stdout, "FAIL:", f)
		}
		if len(r.failures) == 0 {
			fmt.Fprintln(stdout, "PASS")
		}
	}
	if len(r.failures) > 0 {
		return exitFailed
	}
	return exitOK
}
