package webhook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/lru"

	"platform.io/libs/service"
	"platform.io/services/authn/authenticator"
)

// panickyTransport panics on its first round trip (as a bug under the review would, on the
// review's own goroutine) and then answers that the token authenticates.
type panickyTransport struct {
	armed atomic.Bool
	calls atomic.Int64
}

func (p *panickyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	p.calls.Add(1)
	if p.armed.CompareAndSwap(true, false) {
		var m map[string]int
		m["x"]++
	}
	body, _ := json.Marshal(map[string]any{"apiVersion": reviewGroup + "/" + VersionV1, "kind": "TokenReview",
		"status": map[string]any{"authenticated": true, "user": map[string]any{"username": "jane"}}})
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body)), Request: r}, nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A panic while reviewing a token (on the review's goroutine, shared by the requests waiting for
// it) does not kill the service: the review could not decide (an UnavailableError, so the token is
// not refused), it is logged once with the stack and never with the token, the outcome is not
// cached, and the next request for the token is reviewed and authenticated.
func TestReviewPanicIsUnavailable(t *testing.T) {
	const token = "tok-s3cr3t"
	rt := &panickyTransport{}
	logs := &lockedBuffer{}
	a := &Authenticator{url: "https://webhook.test/authenticate", client: &http.Client{Transport: rt}, version: VersionV1,
		apiVersion: reviewGroup + "/" + VersionV1, ttl: time.Minute, backoff: Backoff{Steps: 1},
		log: slog.New(slog.NewJSONHandler(logs, nil)).With("method", MethodName), cache: lru.New(10), inflight: map[[sha256.Size]byte]*call{}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	rt.armed.Store(true)
	resp, err := a.Authenticate(ctx, &authenticator.Request{Token: token})
	if resp != nil || !authenticator.IsUnavailable(err) || !strings.Contains(err.Error(), service.ErrPanicked.Error()) {
		t.Fatalf("got %v, %v; want an UnavailableError with %q", resp, err, service.ErrPanicked)
	}
	if strings.Contains(err.Error(), "nil map") {
		t.Errorf("the error carries the panic's value: %v", err)
	}
	out := logs.String()
	if n := strings.Count(out, `"level":"ERROR"`); n != 1 {
		t.Errorf("%d records at Error, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, "assignment to entry in nil map") || !strings.Contains(out, "RoundTrip") || !strings.Contains(out, `"method":"webhook"`) {
		t.Errorf("the panic's record lacks its value, stack or method:\n%s", out)
	}
	if strings.Contains(out, token) {
		t.Errorf("the log carries the token:\n%s", out)
	}

	resp, err = a.Authenticate(ctx, &authenticator.Request{Token: token})
	if err != nil || resp == nil || resp.User.Name != "jane" {
		t.Fatalf("the next request: %v, %v", resp, err)
	}
	if got := rt.calls.Load(); got != 2 {
		t.Errorf("%d reviews, want 2 (the failed one is not cached)", got)
	}
}
