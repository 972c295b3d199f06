package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"platform.io/libs/naming"
)

// The all-in-one as the control plane of controller-runtime's envtest
// (sigs.k8s.io/controller-runtime/pkg/envtest), which starts the binaries kube-apiserver and
// etcd from KUBEBUILDER_ASSETS for every test suite. Invoked as kube-apiserver (a link to this
// binary of that name, or `platform kube-apiserver`), the all-in-one takes kube-apiserver's
// command line as envtest writes it: it serves in the kubernetes naming profile, with embedded
// storage in a temporary directory (the etcd flags are accepted and ignored), the serving
// certificate envtest wrote to --cert-dir (apiserver.crt, apiserver.key; created there when
// absent, as kube-apiserver does), envtest's --client-ca-file, service account keys and issuer,
// and --authorization-mode; no controllers run, as envtest runs no controller manager. Invoked as
// etcd, it is a stand-in that answers envtest's health check (GET /health on
// --listen-client-urls) until it is stopped.

// Stand-in names: the base name of the binary (or the first argument) that selects the modes.
const (
	kubeAPIServerName = "kube-apiserver"
	etcdName          = "etcd"
)

// standIn returns the stand-in mode the command line selects ("" for the all-in-one itself) and
// the mode's arguments.
func standIn(args []string) (string, []string) {
	switch filepath.Base(args[0]) {
	case kubeAPIServerName, etcdName:
		return filepath.Base(args[0]), args[1:]
	}
	if len(args) > 1 && (args[1] == kubeAPIServerName || args[1] == etcdName) {
		return args[1], args[2:]
	}
	return "", nil
}

// ignoredAPIServerFlags are kube-apiserver flags that envtest or test suites pass and that mean
// nothing here: etcd and storage (the storage is embedded), node ports, nodes and kubelets, flow
// control, the legacy insecure port. Accepted and ignored (with a log line).
// --service-cluster-ip-range, --advertise-address and --endpoint-reconciler-type are the
// gateway's own (the kubernetes Service).
var ignoredAPIServerFlags = []string{
	"etcd-servers", "etcd-servers-overrides", "etcd-prefix", "etcd-cafile", "etcd-certfile", "etcd-keyfile",
	"etcd-compaction-interval", "etcd-count-metric-poll-period", "etcd-db-metric-poll-interval", "etcd-healthcheck-timeout",
	"etcd-readycheck-timeout", "storage-backend", "storage-media-type", "watch-cache-sizes", "default-watch-cache-size",
	"delete-collection-workers", "enable-garbage-collector", "service-node-port-range",
	"allow-privileged", "apiserver-count", "kubelet-client-certificate",
	"kubelet-client-key", "kubelet-certificate-authority", "kubelet-preferred-address-types", "enable-priority-and-fairness",
	"event-ttl", "logging-format", "insecure-port", "insecure-bind-address",
}

// standInShutdownTimeout is the stand-in's default --shutdown-timeout.
const standInShutdownTimeout = "250ms"

// boolIgnored are the ignored flags that are booleans (given without a value).
var boolIgnored = map[string]bool{"allow-privileged": true, "enable-garbage-collector": true, "enable-priority-and-fairness": true}

// hiddenIgnored are not listed in --help: envtest asks kube-apiserver's help whether
// --insecure-port exists (removed in 1.20) and passes it only if so.
var hiddenIgnored = map[string]bool{"insecure-port": true, "insecure-bind-address": true}

// apiServerFlags registers the all-in-one's flags (the gateway's are kube-apiserver's names) and
// kube-apiserver's that envtest passes: --cert-dir, --v, and the ignored ones.
func apiServerFlags(c *config, certDir *string, verbosity *int, ignored map[string]*string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(kubeAPIServerName, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	// The all-in-one's flags but --verbose/-v: -v is kube-apiserver's --v.
	own := pflag.NewFlagSet("platform", pflag.ContinueOnError)
	c.registerFlags(own)
	own.VisitAll(func(f *pflag.Flag) {
		if f.Name != "verbose" {
			fs.AddFlag(f)
		}
	})
	_ = fs.MarkHidden("controllers") // none run (envtest runs no controller manager)
	// A test's control plane drains nothing at the end: without a short bound, HTTP/2's grace
	// for clients to leave after GOAWAY (1 s) would add to every suite's teardown.
	if f := fs.Lookup("shutdown-timeout"); f != nil {
		_ = f.Value.Set(standInShutdownTimeout)
		f.DefValue = standInShutdownTimeout
	}
	fs.Lookup("data-dir").Usage = "directory for the embedded storage and the control plane's own PKI (default: a temporary directory, removed on exit)"
	fs.StringVar(certDir, "cert-dir", "", "directory of the serving certificate apiserver.crt and apiserver.key (created there when absent; ignored with --tls-cert-file)")
	fs.IntVarP(verbosity, "v", "v", 0, "log verbosity, as kube-apiserver's (4 and more: debug)")
	for _, name := range ignoredAPIServerFlags {
		ignored[name] = fs.String(name, "", "kube-apiserver's flag, accepted and ignored")
		if boolIgnored[name] {
			fs.Lookup(name).NoOptDefVal = "true"
		}
		if hiddenIgnored[name] {
			_ = fs.MarkHidden(name)
		}
	}
	return fs
}

// kubeAPIServerMain runs the kube-apiserver stand-in.
func kubeAPIServerMain(args []string) int {
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" {
			c := defaultConfig()
			var certDir string
			var v int
			fs := apiServerFlags(&c, &certDir, &v, map[string]*string{})
			fmt.Fprintf(os.Stdout, "%s: the Platform all-in-one as kube-apiserver for envtest (kubernetes naming profile, embedded storage)\n\nFlags:\n%s",
				kubeAPIServerName, fs.FlagUsages())
			return 0
		}
	}
	if naming.ProfileName() != naming.KubernetesProfile {
		// Names are derived when packages initialise: start again in the kubernetes profile.
		if os.Getenv(envtestReexec) != "" {
			fmt.Fprintf(os.Stderr, "%s: the kubernetes naming profile is required (--%s or $%s chose %q)\n", kubeAPIServerName, naming.ProfileFlag, naming.ProfileEnv, naming.ProfileName())
			return 2
		}
		if err := reexecKubernetes(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: starting in the kubernetes naming profile: %v (set %s=kubernetes)\n", kubeAPIServerName, err, naming.ProfileEnv)
			return 1
		}
	}

	cfg := defaultConfig()
	cfg.dataDir = ""
	var certDir string
	var verbosity int
	ignored := map[string]*string{}
	fs := apiServerFlags(&cfg, &certDir, &verbosity, ignored)
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", kubeAPIServerName, err)
		return 2
	}
	cfg.parsed(fs)
	cfg.verbose = verbosity >= 4
	// No controller manager: the controllers service does not run.
	cfg.noControllers = true
	if p := *ignored["insecure-port"]; p != "" && p != "0" {
		fmt.Fprintf(os.Stderr, "%s: --insecure-port=%s: the insecure port is not served (kube-apiserver removed it in 1.20)\n", kubeAPIServerName, p)
		return 2
	}
	temporary := cfg.dataDir == ""
	if temporary {
		dir, err := os.MkdirTemp("", "platform-envtest-")
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", kubeAPIServerName, err)
			return 1
		}
		cfg.dataDir = dir
		defer os.RemoveAll(dir)
	}
	// The serving certificate: --tls-cert-file, or apiserver.crt and apiserver.key in --cert-dir.
	var writeServing bool
	if cfg.gateway.TLSCertFile == "" && certDir != "" {
		crt, key := filepath.Join(certDir, "apiserver.crt"), filepath.Join(certDir, "apiserver.key")
		if _, err := os.Stat(crt); err == nil {
			cfg.gateway.TLSCertFile, cfg.gateway.TLSPrivateKeyFile = crt, key
		} else {
			writeServing = true
		}
	}

	log := cfg.logger()
	var given []string
	for name, v := range ignored {
		if fs.Changed(name) {
			given = append(given, "--"+name+"="+*v)
		}
	}
	if len(given) > 0 {
		log.Info("kube-apiserver flags without effect here (embedded storage, no Services or nodes)", "flags", strings.Join(given, " "))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	started := time.Now()
	p, err := start(ctx, cfg, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", kubeAPIServerName, err)
		return 1
	}
	if writeServing {
		if err := copyServing(p.cfg.dataDir, certDir); err != nil {
			log.Warn("writing the serving certificate to --cert-dir", "error", err)
		}
	}
	log.Info("kube-apiserver stand-in serving", "url", p.url, "data-dir", cfg.dataDir, "startup", time.Since(started).String())
	<-ctx.Done()
	p.stop(context.Background())
	return 0
}

// envtestReexec marks the process started again in the kubernetes profile.
const envtestReexec = "PLATFORM_KUBE_APISERVER_REEXEC"

// reexecKubernetes replaces the process with itself in the kubernetes naming profile (the same
// arguments, argv[0] included, so the same mode is chosen).
func reexecKubernetes() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	env := append(os.Environ(), naming.ProfileEnv+"="+naming.KubernetesProfile, envtestReexec+"=1")
	return syscall.Exec(exe, os.Args, env)
}

// copyServing writes the all-in-one's serving certificate to certDir as kube-apiserver names it.
func copyServing(dataDir, certDir string) error {
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return err
	}
	for _, f := range []string{"apiserver.crt", "apiserver.key"} {
		data, err := os.ReadFile(filepath.Join(dataDir, "pki", f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(certDir, f), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// etcdMain runs the etcd stand-in: it serves GET /health ({"health":"true"}) on the first of
// --listen-client-urls (or --advertise-client-urls; default http://127.0.0.1:2379) until it is
// stopped. Nothing is stored: the kube-apiserver stand-in keeps its data itself.
func etcdMain(args []string) int {
	fs := pflag.NewFlagSet(etcdName, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	listen := fs.String("listen-client-urls", "", "URL to answer the health check on (the first of a comma-separated list)")
	advertise := fs.String("advertise-client-urls", "", "used when --listen-client-urls is not given")
	// Everything else etcd and envtest pass is accepted and ignored.
	fs.ParseErrorsAllowlist.UnknownFlags = true
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" {
			fmt.Fprintf(os.Stdout, "%s: a stand-in for envtest that answers GET /health; the Platform kube-apiserver stand-in keeps its data itself.\n\nFlags:\n%s", etcdName, fs.FlagUsages())
			return 0
		}
	}
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", etcdName, err)
		return 2
	}
	raw := *listen
	if raw == "" {
		raw = *advertise
	}
	if raw == "" {
		raw = "http://127.0.0.1:2379"
	}
	u, err := url.Parse(strings.Split(raw, ",")[0])
	if err != nil || u.Host == "" {
		fmt.Fprintf(os.Stderr, "%s: --listen-client-urls %q: not a URL\n", etcdName, raw)
		return 2
	}
	lis, err := net.Listen("tcp", u.Host)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", etcdName, err)
		return 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"health":"true","reason":""}`)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", etcdName, err)
		return 1
	}
	return 0
}
