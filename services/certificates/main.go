// Command certificates runs the certificates service: the built-in CSR signers. It watches
// CertificateSigningRequests through the storage service and issues the certificates of approved
// requests addressed to its signers, or marks them Failed when they break the signer's rules. See
// docs/operations.md.
package main

import (
	"context"
	"log/slog"

	"platform.io/libs/service"
	"platform.io/services/certificates/server"
)

func main() {
	cfg := server.DefaultConfig()
	service.Main("certificates", &cfg, func(ctx context.Context, log *slog.Logger) error { return server.Run(ctx, cfg, log) })
}
