// Command gateway runs the HTTPS front door of Platform: the resource API over the storage
// service. See docs/operations.md for its flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"platform.io/libs/naming"
	"platform.io/libs/service"
	"platform.io/libs/telemetry"
	"platform.io/services/gateway/server"
)

func main() {
	service.TuneGC()
	var cfg server.Config
	fs := pflag.NewFlagSet("gateway", pflag.ExitOnError)
	cfg.RegisterFlags(fs)
	service.AddNamingProfileFlag(fs)
	level := telemetry.AddLogLevelFlag(fs)
	_ = fs.Parse(os.Args[1:])
	logOut := server.NewLogWriter(os.Stderr)
	log := telemetry.NewLogger(logOut, level).With("service", "gateway")
	if err := errors.Join(service.NamingProfileError(), cfg.Validate()); err != nil {
		fmt.Fprintln(os.Stderr, "gateway: invalid configuration:\n"+err.Error())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	shutdownTracing, err := telemetry.Setup(ctx, naming.Product+"-gateway")
	if err != nil {
		log.Error("tracing setup failed", "err", err)
		os.Exit(1)
	}
	defer func() { _ = shutdownTracing(context.Background()) }()
	if err := server.Run(ctx, cfg, server.Options{LogHealthy: logOut.Healthy}, log); err != nil {
		log.Error("gateway failed", "err", err)
		os.Exit(1)
	}
}
