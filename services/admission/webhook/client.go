package webhook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	"platform.io/libs/service"
	"platform.io/libs/serviceresolve"
	"platform.io/services/admission/admission"
)

// MaxResponseBytes bounds a webhook's answer (the spec's request size limit): a longer body is a
// failed call.
const MaxResponseBytes = 3 * 1024 * 1024

// maxClients bounds the cached clients (one per distinct client configuration).
const maxClients = 200

// userAgent is what the dispatcher calls webhooks as (upstream kube-apiserver-admission).
var userAgent = naming.Product + "-apiserver-admission"

// hookClient calls one webhook endpoint.
type hookClient struct {
	endpoint  *url.URL
	http      *http.Client
	transport *http.Transport
	cred      *credential
}

// clients builds and caches hook clients. Service webhooks resolve their Service on every new
// connection, so a changed ClusterIP is picked up by the next connection.
type clients struct {
	objects admission.Objects
	creds   *credentials
	log     *slog.Logger

	mu    sync.Mutex
	cache map[string]*hookClient
}

func newClients(objects admission.Objects, creds *credentials, log *slog.Logger) *clients {
	return &clients{objects: objects, creds: creds, log: log, cache: map[string]*hookClient{}}
}

// clientKey identifies a client configuration (the CA bundle by its digest).
func clientKey(cc *admissionregistrationv1.WebhookClientConfig) string {
	sum := sha256.Sum256(cc.CABundle)
	k := struct {
		URL     *string
		Service *admissionregistrationv1.ServiceReference
		CA      string
	}{cc.URL, cc.Service, hex.EncodeToString(sum[:])}
	b, _ := json.Marshal(k)
	return string(b)
}

func (cs *clients) get(cc *admissionregistrationv1.WebhookClientConfig) (*hookClient, error) {
	key := clientKey(cc)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c, ok := cs.cache[key]; ok {
		return c, nil
	}
	c, err := cs.build(cc)
	if err != nil {
		return nil, err
	}
	if len(cs.cache) >= maxClients {
		for k, old := range cs.cache {
			old.transport.CloseIdleConnections()
			delete(cs.cache, k)
		}
	}
	cs.cache[key] = c
	return c, nil
}

func (cs *clients) build(cc *admissionregistrationv1.WebhookClientConfig) (*hookClient, error) {
	tlsConfig := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// HTTP/1.1, as upstream: HTTP/2 would multiplex every call on one connection and defeat
		// load balancing across a Service's backends.
		NextProtos: []string{"http/1.1"},
	}
	if len(cc.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cc.CABundle) {
			return nil, errors.New("unable to load root certificates: unable to parse bytes as PEM block")
		}
		tlsConfig.RootCAs = pool
	}
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	dial := dialer.DialContext
	var endpoint *url.URL
	var target string
	switch {
	case cc.Service != nil:
		port := int32(443)
		if cc.Service.Port != nil {
			port = *cc.Service.Port
		}
		serverName := cc.Service.Name + "." + cc.Service.Namespace + ".svc"
		host := net.JoinHostPort(serverName, strconv.Itoa(int(port)))
		path := "/"
		if cc.Service.Path != nil && *cc.Service.Path != "" {
			path = *cc.Service.Path
		}
		endpoint = &url.URL{Scheme: "https", Host: host, Path: path}
		tlsConfig.ServerName = serverName
		target = host
		ns, name := cc.Service.Namespace, cc.Service.Name
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == host {
				// The transport dials on a goroutine of its own, where a panic (of the Service
				// lister, say) would kill the service: it is a failure to connect instead.
				var resolved string
				if err := service.Recover(ctx, cs.log, func() (err error) {
					resolved, err = cs.resolveService(ns, name, port)
					return err
				}, "service", ns+"/"+name); err != nil {
					return nil, err
				}
				addr = resolved
			}
			return dialer.DialContext(ctx, network, addr)
		}
	case cc.URL != nil:
		u, err := url.Parse(*cc.URL)
		if err != nil {
			return nil, fmt.Errorf("Unparsable URL: %v", err)
		}
		if u.Scheme != "https" {
			return nil, fmt.Errorf("webhook URL %q: 'https' is the only allowed URL scheme", *cc.URL)
		}
		endpoint = u
		target = u.Host
		if u.Port() == "" {
			target = net.JoinHostPort(u.Hostname(), "443")
		}
	default:
		return nil, errors.New("webhook configuration must have either service or URL")
	}
	cred := cs.creds.lookup(target)
	if cred != nil && cred.cert != nil {
		tlsConfig.Certificates = []tls.Certificate{*cred.cert}
	}
	tr := &http.Transport{
		DialContext:         dial,
		TLSClientConfig:     tlsConfig,
		ForceAttemptHTTP2:   false,
		MaxIdleConnsPerHost: 100,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	return &hookClient{
		endpoint:  endpoint,
		transport: tr,
		http: &http.Client{
			Transport: tr,
			// Webhooks answer directly; a redirect is not followed (it could leak credentials).
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		cred: cred,
	}, nil
}

// resolveService finds where a service webhook listens: an ExternalName service's name, a
// service's cluster IP (which must serve the port), and otherwise (no such Service, or a
// headless one) the service's DNS name.
func (cs *clients) resolveService(namespace, name string, port int32) (string, error) {
	if svc, ok := cs.objects.Services().Get(namespace, name); ok && svc != nil {
		addr, err := serviceresolve.Address(svc, port)
		if !errors.Is(err, serviceresolve.ErrNoClusterIP) {
			return addr, err
		}
	}
	return net.JoinHostPort(serviceresolve.DNSName(namespace, name), strconv.Itoa(int(port))), nil
}

// callingError is a failure to get an answer from a webhook (transport, TLS, timeout, HTTP
// error status, malformed answer): the webhook's failurePolicy decides whether the request
// fails. Status is the code it is counted under.
type callingError struct {
	webhook string
	reason  error
	status  *apierrors.StatusError
}

func (e *callingError) Error() string {
	if e.reason != nil {
		return fmt.Sprintf("failed calling webhook %q: %v", e.webhook, e.reason)
	}
	return fmt.Sprintf("failed calling webhook %q; no further details available", e.webhook)
}

func (e *callingError) Unwrap() error { return e.reason }

// rejectionError is a webhook's answer allowed: false.
type rejectionError struct {
	status *apierrors.StatusError
}

func (e *rejectionError) Error() string { return e.status.Error() }

// post sends an AdmissionReview and returns the answer's body. deadline bounds the call; the
// webhook is told the time left (upstream's timeout query parameter, whole seconds rounded up).
func (c *hookClient) post(ctx context.Context, webhook string, body []byte, deadline time.Time) ([]byte, error) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	u := *c.endpoint
	if d, ok := ctx.Deadline(); ok {
		if left := time.Until(d); left > 0 {
			secs := int64((left + time.Second - 1) / time.Second)
			q := u.Query()
			q.Set("timeout", strconv.FormatInt(secs, 10)+"s")
			u.RawQuery = q.Encode()
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, &callingError{webhook: webhook, reason: err, status: apierrors.NewInternalError(err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, */*")
	req.Header.Set("User-Agent", userAgent)
	if cr := c.cred; cr != nil {
		switch {
		case cr.token != "":
			req.Header.Set("Authorization", "Bearer "+cr.token)
		case cr.username != "" || cr.password != "":
			req.SetBasicAuth(cr.username, cr.password)
		}
		if cr.impersonate != "" {
			req.Header.Set("Impersonate-User", cr.impersonate)
			for _, g := range cr.impersonateGr {
				req.Header.Add("Impersonate-Group", g)
			}
			for k, vs := range cr.impersonateEx {
				for _, v := range vs {
					req.Header.Add("Impersonate-Extra-"+url.PathEscape(k), v)
				}
			}
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &callingError{webhook: webhook, reason: fmt.Errorf("failed to call webhook: %w", err), status: apierrors.NewServiceUnavailable("error calling webhook")}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, &callingError{webhook: webhook, reason: fmt.Errorf("failed to call webhook: reading the response: %w", err), status: apierrors.NewServiceUnavailable("error calling webhook")}
	}
	if len(data) > MaxResponseBytes {
		return nil, &callingError{webhook: webhook, reason: fmt.Errorf("failed to call webhook: the response is larger than %d bytes", MaxResponseBytes),
			status: apierrors.NewServiceUnavailable("error calling webhook")}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		se := statusFromResponse(resp.StatusCode, data)
		return nil, &callingError{webhook: webhook, reason: fmt.Errorf("failed to call webhook: %w", se), status: se}
	}
	return data, nil
}

// statusFromResponse turns an HTTP error answer into a StatusError as client-go does: the Status
// the body carries, or a generic error for the code.
func statusFromResponse(code int, body []byte) *apierrors.StatusError {
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" && st.Status == metav1.StatusFailure {
		if st.Code == 0 {
			st.Code = int32(code)
		}
		return &apierrors.StatusError{ErrStatus: st}
	}
	msg := string(body)
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	err := apierrors.NewGenericServerResponse(code, http.MethodPost, schema.GroupResource{}, "", msg, 0, true)
	return err
}
