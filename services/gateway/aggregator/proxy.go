package aggregator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/transport"

	"platform.io/libs/naming"
	"platform.io/libs/serviceresolve"
	"platform.io/services/gateway/aggregator/apiregistration"
	"platform.io/services/gateway/auth"
)

// userAgent is what the availability checks call extension servers as.
var userAgent = naming.Product + "-aggregator"

// remote is the proxy of one remote APIService, built from its spec and reused while the spec
// stays the same.
type remote struct {
	key  string
	name string
	// host is <service>.<namespace>.svc:<port>: the URL's host, the TLS server name, and what the
	// dialer resolves to the Service's address.
	host      string
	transport *http.Transport
	proxy     *httputil.ReverseProxy
	// svc is the stored APIService as last seen (its Available condition decides routing).
	svc atomic.Pointer[apiregistration.APIService]
	// buildErr is why no transport could be built (a malformed caBundle): requests get 503.
	buildErr error
}

func (r *remote) setAPIService(svc *apiregistration.APIService) { r.svc.Store(svc) }

func (r *remote) close() {
	if r.transport != nil {
		r.transport.CloseIdleConnections()
	}
}

// newRemote builds the transport and reverse proxy of a remote APIService: TLS with the proxy
// client certificate, the server verified against the caBundle (or not, with
// insecureSkipTLSVerify) under the Service's DNS name, and every new connection dialed to the
// address the Service resolves to now.
func (ag *Aggregator) newRemote(svc *apiregistration.APIService, key string) *remote {
	ref := svc.Spec.Service
	port := apiregistration.DefaultPort
	if ref.Port != nil {
		port = *ref.Port
	}
	serverName := serviceresolve.DNSName(ref.Namespace, ref.Name)
	rem := &remote{key: key, name: svc.Name, host: net.JoinHostPort(serverName, strconv.Itoa(int(port)))}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if ag.cert != nil {
		tlsConfig.Certificates = []tls.Certificate{*ag.cert}
	}
	switch {
	case svc.Spec.InsecureSkipTLSVerify:
		tlsConfig.InsecureSkipVerify = true
	case len(svc.Spec.CABundle) > 0:
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(svc.Spec.CABundle) {
			rem.buildErr = errors.New("unable to load the caBundle: no PEM certificate in it")
			return rem
		}
		tlsConfig.RootCAs = pool
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	namespace, name := ref.Namespace, ref.Name
	rem.transport = &http.Transport{
		TLSClientConfig:     tlsConfig,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 100,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == rem.host {
				resolved, err := ag.resolve(ctx, namespace, name, port)
				if err != nil {
					return nil, err
				}
				addr = resolved
			}
			return dialer.DialContext(ctx, network, addr)
		},
	}
	rem.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "https"
			pr.Out.URL.Host = rem.host
			pr.Out.Host = rem.host
			// The caller's credentials end here: the extension server trusts the gateway's
			// certificate and the identity it states.
			pr.Out.Header.Del("Authorization")
			for k := range pr.Out.Header {
				if strings.HasPrefix(k, "Impersonate-") {
					pr.Out.Header.Del(k)
				}
			}
			if u, ok := auth.UserFrom(pr.In.Context()); ok {
				transport.SetAuthProxyHeaders(pr.Out, u.Name, u.UID, u.Groups, u.Extra)
			}
		},
		Transport:     rem.transport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
				return // the client went away
			}
			ag.log.WarnContext(r.Context(), "proxying to an extension API server", "apiservice", rem.name, "error", err)
			select {
			case ag.recheck <- rem.name:
			default:
			}
			if errors.Is(r.Context().Err(), context.DeadlineExceeded) {
				// The gateway's --request-timeout, as for its own requests.
				ag.cfg.API.WriteError(w, r, apierrors.NewTimeoutError("the request did not complete in time", 0))
				return
			}
			ag.cfg.API.WriteError(w, r, apierrors.NewServiceUnavailable(fmt.Sprintf("error trying to reach service: %v", err)))
		},
		ErrorLog: nil,
	}
	return rem
}

// resolve finds the address of a Service's port: its cluster IP (the rule the webhook
// dispatcher uses too), or with endpoint routing one of its ready endpoints, picked at random.
func (ag *Aggregator) resolve(ctx context.Context, namespace, name string, port int32) (string, error) {
	svc, err := ag.store.Service(ctx, namespace, name)
	if err != nil {
		return "", fmt.Errorf("service %s/%s: %w", namespace, name, err)
	}
	if !ag.cfg.EndpointRouting || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return serviceresolve.Address(svc, port)
	}
	eps, err := ag.store.Endpoints(ctx, namespace, name)
	if err != nil {
		return "", fmt.Errorf("endpoints %s/%s: %w", namespace, name, err)
	}
	return serviceresolve.EndpointAddress(svc, eps, port, rand.IntN)
}

// serveRemote answers 503 when the APIService is not available, and otherwise proxies the
// request (authenticated, authorized and bounded by the request timeout in the handler chain, as
// upstream's aggregator runs its whole chain first) to the extension API server.
func (ag *Aggregator) serveRemote(w http.ResponseWriter, r *http.Request, rem *remote) {
	svc := rem.svc.Load()
	if rem.buildErr != nil {
		ag.cfg.API.WriteError(w, r, apierrors.NewServiceUnavailable(rem.buildErr.Error()))
		return
	}
	if !svc.IsAvailable() {
		ag.cfg.API.WriteError(w, r, apierrors.NewServiceUnavailable("service unavailable"))
		return
	}
	rem.proxy.ServeHTTP(w, r)
}
