package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"platform.io/libs/naming"
	"platform.io/libs/telemetry"
)

// Flags is a service's configuration as its command sees it.
type Flags interface {
	RegisterFlags(fs *pflag.FlagSet)
	Validate() error
}

// Main is a service command's main: it tunes the garbage collector (TuneGC), parses the flags into cfg, logs JSON to stderr (with the
// service's name, at --log-level, each line with its trace context), exits 2 on an invalid
// configuration, sets up tracing, and runs the service until SIGINT or SIGTERM ends ctx; a run
// error exits 1.
func Main(name string, cfg Flags, run func(ctx context.Context, log *slog.Logger) error) {
	TuneGC()
	fs := pflag.NewFlagSet(name, pflag.ExitOnError)
	cfg.RegisterFlags(fs)
	AddNamingProfileFlag(fs)
	level := telemetry.AddLogLevelFlag(fs)
	_ = fs.Parse(os.Args[1:])
	log := telemetry.NewLogger(os.Stderr, level).With("service", name)
	if err := errors.Join(NamingProfileError(), cfg.Validate()); err != nil {
		fmt.Fprintln(os.Stderr, name+": invalid configuration:\n"+err.Error())
		os.Exit(2)
	}
	os.Exit(runMain(name, log, run))
}

func runMain(name string, log *slog.Logger, run func(ctx context.Context, log *slog.Logger) error) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	shutdownTracing, err := telemetry.Setup(ctx, naming.Product+"-"+name)
	if err != nil {
		log.Error("tracing setup failed", "err", err)
		return 1
	}
	defer func() { _ = shutdownTracing(context.Background()) }()
	if err := run(ctx, log); err != nil {
		log.Error(name+" service failed", "err", err)
		return 1
	}
	return 0
}
