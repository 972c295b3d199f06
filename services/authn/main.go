// Command authn runs the authentication service: who a request's credentials belong to (client
// certificates, bearer tokens of every kind the spec lists, an authenticating proxy's headers),
// over gRPC for the gateway. See docs/operations.md for its flags.
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
	"platform.io/services/authn/server"
)

func main() {
	cfg := server.DefaultConfig()
	fs := pflag.NewFlagSet("authn", pflag.ExitOnError)
	cfg.RegisterFlags(fs)
	_ = fs.Parse(os.Args[1:])
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("service", "authn")
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "authn: invalid configuration:\n"+err.Error())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	shutdownTracing, err := telemetry.Setup(ctx, naming.Product+"-authn")
	if err != nil {
		log.Error("tracing setup failed", "err", err)
		os.Exit(1)
	}
	defer func() { _ = shutdownTracing(context.Background()) }()
	if err := server.Run(ctx, cfg, log); err != nil {
		log.Error("authentication service failed", "err", err)
		os.Exit(1)
	}
}
