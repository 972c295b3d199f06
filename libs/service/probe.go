package service

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// HealthProbeFlag, as the first argument of any binary built on this package (every service, the
// gateway, the all-in-one), turns the binary into a one-shot health probe instead of the service:
//
//	<binary> --health-probe <url> [--ca-file F] [--cert-file F --key-file F] [--timeout D]
//
// checks url once and exits 0 when it is healthy, 1 when not (the reason on stderr), 2 on bad
// flags. Container images are built FROM scratch, with no shell or curl, so a compose health
// check runs the service's own binary this way. URLs:
//
//   - grpc://host:port[/service]: the standard gRPC health service (Check for service, default
//     the server as a whole) must answer SERVING; TLS when --ca-file is set, mutual TLS with
//     --cert-file and --key-file (the services require a client certificate of their CA);
//   - https://host:port/path (or http://): a GET must answer 200, such as the gateway's /readyz.
//
// The mode is selected in an init function, before the binary's own main parses its flags, so
// that no service's main needs to know about it.
const HealthProbeFlag = "--health-probe"

func init() {
	if len(os.Args) > 1 && (os.Args[1] == HealthProbeFlag || strings.HasPrefix(os.Args[1], HealthProbeFlag+"=")) {
		os.Exit(probeMain(os.Args[1:], os.Stdout, os.Stderr))
	}
}

// ProbeConfig is one health probe.
type ProbeConfig struct {
	// URL is grpc://host:port[/service] or https://host:port/path.
	URL string
	// CAFile verifies the server; CertFile and KeyFile are the client certificate.
	CAFile, CertFile, KeyFile string
	// Timeout bounds the whole probe.
	Timeout time.Duration
}

func probeMain(args []string, stdout, stderr io.Writer) int {
	var c ProbeConfig
	fs := pflag.NewFlagSet("health-probe", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.URL, "health-probe", "", "grpc://host:port[/service] or https://host:port/path to check once")
	fs.StringVar(&c.CAFile, "ca-file", "", "CA that verifies the server's certificate (grpc://: enables TLS)")
	fs.StringVar(&c.CertFile, "cert-file", "", "client certificate (PEM) to present")
	fs.StringVar(&c.KeyFile, "key-file", "", "private key of --cert-file")
	fs.DurationVar(&c.Timeout, "timeout", 3*time.Second, "bound on the probe")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := Probe(context.Background(), c); err != nil {
		fmt.Fprintf(stderr, "health probe %s: %v\n", c.URL, err)
		var bad *probeConfigError
		if errors.As(err, &bad) {
			return 2
		}
		return 1
	}
	fmt.Fprintln(stdout, "ok")
	return 0
}

type probeConfigError struct{ err error }

func (e *probeConfigError) Error() string { return e.err.Error() }

// Probe checks c.URL once: nil when it is healthy.
func Probe(ctx context.Context, c ProbeConfig) error {
	u, err := url.Parse(c.URL)
	if err != nil || u.Host == "" {
		return &probeConfigError{fmt.Errorf("--health-probe %q is not a grpc://host:port or https://host:port URL", c.URL)}
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return &probeConfigError{errors.New("--cert-file and --key-file go together")}
	}
	if c.Timeout <= 0 {
		c.Timeout = 3 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	var tc *tls.Config
	if c.CAFile != "" || c.CertFile != "" {
		if c.CAFile == "" {
			return &probeConfigError{errors.New("--cert-file needs --ca-file")}
		}
		if tc, err = ClientTLS(c.CAFile, c.CertFile, c.KeyFile); err != nil {
			return &probeConfigError{err}
		}
	}
	switch u.Scheme {
	case "grpc":
		creds := insecure.NewCredentials()
		if tc != nil {
			creds = credentials.NewTLS(tc)
		}
		conn, err := grpc.NewClient(u.Host, grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer conn.Close()
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: strings.TrimPrefix(u.Path, "/")})
		if err != nil {
			return err
		}
		if resp.Status != healthpb.HealthCheckResponse_SERVING {
			return errors.New("the service reports " + resp.Status.String())
		}
		return nil
	case "https", "http":
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
		defer client.CloseIdleConnections()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL, nil)
		if err != nil {
			return &probeConfigError{err}
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
		}
		return nil
	}
	return &probeConfigError{fmt.Errorf("--health-probe %q: the scheme must be grpc, https or http", c.URL)}
}
