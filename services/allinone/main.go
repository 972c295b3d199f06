// Command platform is the all-in-one: every Platform service in one process, with embedded
// storage, so `make run` needs neither Docker nor Redis. On first start it creates the cluster CA,
// the serving certificate and an admin kubeconfig in --data-dir.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"platform.io/libs/naming"
	"platform.io/libs/service"
	"platform.io/libs/telemetry"
	"platform.io/services/allinone/certs"
	gateway "platform.io/services/gateway/server"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "certs" { // `platform certs`: the split stack's service PKI
		os.Exit(certs.Main(os.Args[2:], os.Stdout, os.Stderr))
	}
	mode, args := standIn(os.Args) // kube-apiserver or etcd for envtest (envtest.go)
	if mode == etcdName {
		os.Exit(etcdMain(args))
	}
	runtime.GOMAXPROCS(service.SyncProcs(os.Getenv("GOMAXPROCS"))) // its writes wait in fdatasync
	service.TuneGC()
	if mode == kubeAPIServerName {
		os.Exit(kubeAPIServerMain(args))
	}
	cfg := defaultConfig()
	fs := pflag.NewFlagSet("platform", pflag.ExitOnError)
	cfg.registerFlags(fs)
	service.AddNamingProfileFlag(fs)
	_ = fs.Parse(os.Args[1:])
	if err := service.NamingProfileError(); err != nil {
		fmt.Fprintln(os.Stderr, "platform: invalid configuration:\n"+err.Error())
		os.Exit(2)
	}
	cfg.parsed(fs)
	log := cfg.logger()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	shutdownTracing, err := telemetry.Setup(ctx, naming.Product)
	if err != nil {
		log.Error("tracing setup failed", "err", err)
		os.Exit(1)
	}
	defer func() { _ = shutdownTracing(context.Background()) }()
	p, err := start(ctx, cfg, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "platform:", err)
		os.Exit(1)
	}
	fmt.Fprint(os.Stdout, p.banner())
	<-ctx.Done()
	p.stop(context.Background())
}

// logger is the process log on standard error (with the "log" health check's writer), which
// client-go (the controllers' informers) logs to through klog as well.
func (c *config) logger() *slog.Logger {
	logOut := gateway.NewLogWriter(os.Stderr)
	log := telemetry.NewLogger(logOut, c.logLevel())
	c.logHealthy = logOut.Healthy
	klog.SetSlogLogger(log.With("service", "controllers"))
	return log
}
