package oidc

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"platform.io/libs/service"
)

// panickyJWKS panics on its first round trip (on the fetch's own goroutine) and then serves its
// key set.
type panickyJWKS struct {
	armed atomic.Bool
	jwks  []byte
}

func (p *panickyJWKS) RoundTrip(r *http.Request) (*http.Response, error) {
	if p.armed.CompareAndSwap(true, false) {
		var m map[string]int
		m["x"]++
	}
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{},
		Body: io.NopCloser(bytes.NewReader(p.jwks)), Request: r}, nil
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

// A panic while fetching the key set (on the fetch's goroutine, which the requests that need the
// keys wait for) does not kill the service: it is a failed fetch (the waiters are released with
// its error, which Authenticate turns into an UnavailableError), logged once with the stack, and
// the next fetch works.
func TestKeySetFetchPanicIsAFailedFetch(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	rt := &panickyJWKS{jwks: jwks}
	logs := &lockedBuffer{}
	ks := newKeySet("https://issuer.test/jwks", &http.Client{Transport: rt}, []string{"ES256"}, time.Hour, slog.New(slog.NewJSONHandler(logs, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	rt.armed.Store(true)
	if refreshed, err := ks.refresh(ctx, true); !refreshed || !errors.Is(err, service.ErrPanicked) {
		t.Fatalf("refresh: %v, %v; want a fetch that failed with ErrPanicked", refreshed, err)
	}
	out := logs.String()
	if n := strings.Count(out, `"level":"ERROR"`); n != 1 || !strings.Contains(out, "assignment to entry in nil map") ||
		!strings.Contains(out, "RoundTrip") || !strings.Contains(out, `"jwksURL":"https://issuer.test/jwks"`) {
		t.Errorf("want one record at Error with the panic's value, stack and the key set's URL:\n%s", out)
	}

	if refreshed, err := ks.refresh(ctx, true); !refreshed || err != nil {
		t.Fatalf("the next refresh: %v, %v", refreshed, err)
	}
	if keys := ks.current(); len(keys) != 1 || keys[0].KeyID != "k1" {
		t.Errorf("keys after the next refresh: %v", keys)
	}
	if got := ks.fetches.Load(); got != 2 {
		t.Errorf("%d fetches, want 2", got)
	}
}
