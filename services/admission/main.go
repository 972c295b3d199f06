// Command admission runs the admission service: the built-in admission plugins and the dispatcher
// of admission webhooks, over gRPC for the gateway, which asks it on every write some enabled
// plugin or webhook may act on. See docs/operations.md.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"platform.io/libs/naming"
	"platform.io/libs/telemetry"
	"platform.io/services/admission/server"
)

func main() {
	cfg := server.DefaultConfig()
	fs := pflag.NewFlagSet("admission", pflag.ExitOnError)
	cfg.RegisterFlags(fs)
	_ = fs.Parse(os.Args[1:])
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("service", "admission")
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "admission: invalid configuration:\n"+err.Error())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	shutdownTracing, err := telemetry.Setup(ctx, naming.Product+"-admission")
	if err != nil {
		log.Error("tracing setup failed", "err", err)
		os.Exit(1)
	}
	defer func() { _ = shutdownTracing(context.Background()) }()
	if err := server.Run(ctx, cfg, log); err != nil {
		log.Error("admission service failed", "err", err)
		os.Exit(1)
	}
}
