// Command authz runs the authorization service: may this user do this? RBAC compiled into OPA
// policies, the Node and Webhook modes, over gRPC for the gateway. `authz --dump-policy` prints the
// Rego policy and the data compiled from the stored RBAC objects. See docs/operations.md.
package main

import (
	"context"
	"log/slog"
	"os"

	"platform.io/libs/service"
	"platform.io/services/authz/server"
)

func main() {
	cfg := server.DefaultConfig()
	service.Main("authz", &cfg, func(ctx context.Context, log *slog.Logger) error {
		if cfg.DumpPolicy {
			return server.DumpPolicy(ctx, cfg, os.Stdout, log)
		}
		return server.Run(ctx, cfg, log)
	})
}
