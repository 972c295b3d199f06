// Command controllers runs the controllers service: the controllers upstream runs in its
// controller manager (service accounts, service account tokens, namespace lifecycle, ClusterRole
// aggregation, bootstrap token cleaner and signer) against the gateway, as one leader among its
// replicas. See docs/operations.md for its flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"platform.io/libs/naming"
	"platform.io/libs/service"
	"platform.io/libs/telemetry"
	"platform.io/services/controllers/manager"
)

func main() {
	service.TuneGC()
	var cfg manager.Config
	fs := pflag.NewFlagSet("controllers", pflag.ExitOnError)
	cfg.RegisterFlags(fs)
	service.AddNamingProfileFlag(fs)
	level := telemetry.AddLogLevelFlag(fs)
	_ = fs.Parse(os.Args[1:])
	log := telemetry.NewLogger(os.Stderr, level).With("service", "controllers")
	// client-go (leader election, informers) logs through klog: route it to the same handler.
	klog.SetSlogLogger(log)
	if err := errors.Join(service.NamingProfileError(), cfg.Validate()); err != nil {
		fmt.Fprintln(os.Stderr, "controllers: invalid configuration:\n"+err.Error())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	shutdownTracing, err := telemetry.Setup(ctx, naming.Product+"-controllers")
	if err != nil {
		log.Error("tracing setup failed", "err", err)
		os.Exit(1)
	}
	if err := manager.Run(ctx, cfg, log); err != nil {
		if errors.Is(err, manager.ErrLeaderLost) {
			// As upstream: exit so that the process restarts with nothing left running.
			log.Error("leader election lost, exiting")
		} else {
			log.Error("controllers service failed", "err", err)
		}
		_ = shutdownTracing(context.Background())
		os.Exit(1)
	}
	_ = shutdownTracing(context.Background())
}
