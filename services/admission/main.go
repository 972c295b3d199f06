// Command admission runs the admission service: the built-in admission plugins and the dispatcher
// of admission webhooks, over gRPC for the gateway, which asks it on every write some enabled
// plugin or webhook may act on. See docs/operations.md.
package main

import (
	"context"
	"log/slog"

	"platform.io/libs/service"
	"platform.io/services/admission/server"
)

func main() {
	cfg := server.DefaultConfig()
	service.Main("admission", &cfg, func(ctx context.Context, log *slog.Logger) error { return server.Run(ctx, cfg, log) })
}
