// Command storage runs the storage service: the gRPC storage API over Redis Streams or the
// embedded backend. See docs/operations.md for its flags.
package main

import (
	"context"
	"log/slog"

	"platform.io/libs/service"
	"platform.io/services/storage/server"
)

func main() {
	var cfg server.Config
	service.Main("storage", &cfg, func(ctx context.Context, log *slog.Logger) error { return server.Run(ctx, cfg, log) })
}
