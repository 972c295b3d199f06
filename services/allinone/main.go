// Command platform is the all-in-one: every Platform service in one process, with embedded
// storage, so `make run` needs neither Docker nor Redis. On first start it creates the cluster CA,
// the serving certificate and an admin kubeconfig in --data-dir.
package main

import (
	"context"
	"fmt"
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
	runtime.GOMAXPROCS(service.SyncProcs(os.Getenv("GOMAXPROCS"))) // its writes wait in fdatasync
	service.TuneGC()
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
	logOut := gateway.NewLogWriter(os.Stderr)
	log := telemetry.NewLogger(logOut, cfg.logLevel())
	cfg.logHealthy = logOut.Healthy
	// client-go (the controllers' informers) logs through klog: route it to the same handler.
	klog.SetSlogLogger(log.With("service", "controllers"))
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
