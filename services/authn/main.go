// Command authn runs the authentication service: who a request's credentials belong to (client
// certificates, bearer tokens of every kind the spec lists, an authenticating proxy's headers),
// over gRPC for the gateway. See docs/operations.md for its flags.
package main

import (
	"context"
	"log/slog"

	"platform.io/libs/service"
	"platform.io/services/authn/server"
)

func main() {
	cfg := server.DefaultConfig()
	service.Main("authn", &cfg, func(ctx context.Context, log *slog.Logger) error { return server.Run(ctx, cfg, log) })
}
