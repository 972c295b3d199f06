// Command authz runs the authorization service: may this user do this? RBAC compiled into OPA
// policies, the Node and Webhook modes, over gRPC for the gateway. `authz --dump-policy` prints the
// Rego policy and the data compiled from the stored RBAC objects. See docs/operations.md.
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
	"platform.io/services/authz/server"
)

func main() {
	cfg := server.DefaultConfig()
	fs := pflag.NewFlagSet("authz", pflag.ExitOnError)
	cfg.RegisterFlags(fs)
	_ = fs.Parse(os.Args[1:])
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("service", "authz")
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "authz: invalid configuration:\n"+err.Error())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if cfg.DumpPolicy {
		if err := server.DumpPolicy(ctx, cfg, os.Stdout, log); err != nil {
			fmt.Fprintln(os.Stderr, "authz:", err)
			os.Exit(1)
		}
		return
	}
	shutdownTracing, err := telemetry.Setup(ctx, naming.Product+"-authz")
	if err != nil {
		log.Error("tracing setup failed", "err", err)
		os.Exit(1)
	}
	defer func() { _ = shutdownTracing(context.Background()) }()
	if err := server.Run(ctx, cfg, log); err != nil {
		log.Error("authorization service failed", "err", err)
		os.Exit(1)
	}
}
