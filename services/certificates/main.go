// Command certificates runs the certificates service: the built-in CSR signers. It watches
// CertificateSigningRequests through the storage service and issues the certificates of approved
// requests addressed to its signers, or marks them Failed when they break the signer's rules. See
// docs/operations.md.
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
	"platform.io/services/certificates/server"
)

func main() {
	cfg := server.DefaultConfig()
	fs := pflag.NewFlagSet("certificates", pflag.ExitOnError)
	cfg.RegisterFlags(fs)
	_ = fs.Parse(os.Args[1:])
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("service", "certificates")
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "certificates: invalid configuration:\n"+err.Error())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	shutdownTracing, err := telemetry.Setup(ctx, naming.Product+"-certificates")
	if err != nil {
		log.Error("tracing setup failed", "err", err)
		os.Exit(1)
	}
	defer func() { _ = shutdownTracing(context.Background()) }()
	if err := server.Run(ctx, cfg, log); err != nil {
		log.Error("certificates service failed", "err", err)
		os.Exit(1)
	}
}
