package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
)

// ClientConfig is how a process reaches another service: its address and the mutual TLS
// credentials. Flags are --<prefix>-address, --<prefix>-ca-file, --<prefix>-cert-file and
// --<prefix>-key-file.
type ClientConfig struct {
	// Address is host:port or unix:///path.
	Address string
	// CAFile verifies the service's certificate; CertFile and KeyFile are this process's client
	// certificate (re-read when they change).
	CAFile, CertFile, KeyFile string

	prefix string
}

// RegisterFlags registers the client's flags under prefix; what names the service in the help
// text and address is the default address.
func (c *ClientConfig) RegisterFlags(fs *pflag.FlagSet, prefix, what, address string) {
	c.prefix = prefix
	fs.StringVar(&c.Address, prefix+"-address", address, "the "+what+": host:port or unix:///path")
	fs.StringVar(&c.CAFile, prefix+"-ca-file", "", "CA that verifies the "+what+"'s certificate")
	fs.StringVar(&c.CertFile, prefix+"-cert-file", "", "client certificate for mutual TLS to the "+what)
	fs.StringVar(&c.KeyFile, prefix+"-key-file", "", "private key of --"+prefix+"-cert-file")
}

// Validate reports the client's configuration errors: TCP addresses that are not loopback need
// mutual TLS, and the three file flags go together.
func (c *ClientConfig) Validate() []error {
	p := c.prefix
	if p == "" {
		p = "service"
	}
	var errs []error
	if c.Address == "" {
		errs = append(errs, fmt.Errorf("--%s-address is required", p))
	} else if !strings.HasPrefix(c.Address, "unix://") && c.CertFile == "" && !IsLoopback(c.Address) {
		errs = append(errs, fmt.Errorf("--%s-address %s is not loopback: set --%s-ca-file, --%s-cert-file and --%s-key-file for mutual TLS", p, c.Address, p, p, p))
	}
	if (c.CertFile == "") != (c.KeyFile == "") || (c.CertFile != "" && c.CAFile == "") {
		errs = append(errs, fmt.Errorf("--%s-cert-file, --%s-key-file and --%s-ca-file go together", p, p, p))
	}
	return errs
}

// connectParams bound how long a connection attempt to a service lasts and how far apart attempts
// are. gRPC holds a call while its channel is connecting and fails it (UNAVAILABLE) only once the
// attempt has failed; gRPC's default gives an attempt 20 s, and an attempt to the address of a
// vanished peer (a container or pod that is gone) does last that long, so callers held requests
// for 20 s instead of answering 503. Attempts get 3 s here (a TLS handshake on a busy 2-core
// machine takes milliseconds), and retries are at most 5 s apart (gRPC's default grows to 2 min),
// so a restarted peer is used again within seconds.
var connectParams = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 500 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second},
	MinConnectTimeout: 3 * time.Second,
}

// Dial connects to the service (lazily: the first call connects, and the connection is
// re-established by itself after the service restarts). opts add call options.
func (c *ClientConfig) Dial(opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	p := c.prefix
	if p == "" {
		p = "service"
	}
	creds := insecure.NewCredentials()
	if c.CertFile != "" || c.CAFile != "" {
		tc, err := ClientTLS(c.CAFile, c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--%s-ca-file/--%s-cert-file/--%s-key-file: %w", p, p, p, err)
		}
		creds = credentials.NewTLS(tc)
	}
	target := c.Address
	if path, ok := strings.CutPrefix(target, "unix://"); ok {
		target = "unix:" + path
	}
	base := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler()),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
		grpc.WithConnectParams(connectParams),
		grpc.WithInitialWindowSize(streamWindow),
		grpc.WithInitialConnWindowSize(connWindow),
	}
	conn, err := grpc.NewClient(target, append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("--%s-address: %w", p, err)
	}
	return conn, nil
}

// IsLoopback tells whether host:port names a loopback address.
func IsLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckHealth asks a service's gRPC health endpoint whether it serves, within timeout.
func CheckHealth(ctx context.Context, conn grpc.ClientConnInterface, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		return errors.New("the service reports " + resp.Status.String())
	}
	return nil
}
