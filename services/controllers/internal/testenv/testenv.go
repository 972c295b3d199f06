// Package testenv starts what the controllers' tests run against: a real gateway with real
// storage in process (its own namespace controller off), and clients of the controller manager's
// identity (a client certificate of naming.ControllerManagerUser) and of an admin.
package testenv

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"

	"platform.io/libs/naming"
	authz "platform.io/services/authz/server"
	"platform.io/services/controllers/apiclient"
	"platform.io/services/gateway/gatewaytest"
	"platform.io/services/gateway/server"
)

// Env is a running gateway and clients of it.
type Env struct {
	*gatewaytest.Env
	// Config is the controller manager's client configuration (client certificate of
	// naming.ControllerManagerUser, the cluster CA); Clients are its clients.
	Config  *rest.Config
	Clients *apiclient.Clients
	// Admin are clients of an admin (group system:masters), for what the tests do themselves.
	Admin *apiclient.Clients
	t     testing.TB
}

// Start starts the gateway (stopped when the test ends), authorizing every request.
func Start(t testing.TB) *Env {
	t.Helper()
	return start(t, gatewaytest.Options{})
}

// StartRBAC starts the gateway with RBAC authorization only: the controllers get exactly what the
// default policy grants naming.ControllerManagerUser.
func StartRBAC(t testing.TB) *Env {
	t.Helper()
	return start(t, gatewaytest.Options{ConfigureAuthz: func(c *authz.Config) { c.Modes = []string{authz.ModeRBAC} }})
}

func start(t testing.TB, opts gatewaytest.Options) *Env {
	t.Helper()
	opts.Configure = func(c *server.Config) { c.EnableControllers = false }
	env := gatewaytest.Start(t, opts)
	cert, key := env.ClientCert(naming.ControllerManagerUser)
	rc := &rest.Config{Host: env.URL, TLSClientConfig: rest.TLSClientConfig{CAFile: env.CAFile, CertData: cert, KeyData: key}, QPS: 200, Burst: 400}
	clients, err := apiclient.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	acert, akey := env.ClientCert("test-admin", "system:masters")
	admin, err := apiclient.New(&rest.Config{Host: env.URL, TLSClientConfig: rest.TLSClientConfig{CAFile: env.CAFile, CertData: acert, KeyData: akey}, QPS: 200, Burst: 400})
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Env: env, Config: rc, Clients: clients, Admin: admin, t: t}
}

// Context is a context that ends when the test ends (before the gateway stops).
func (e *Env) Context() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	return ctx
}

// Informers is a shared informer factory of the controller manager's identity.
func (e *Env) Informers() informers.SharedInformerFactory {
	return informers.NewSharedInformerFactory(e.Clients.Kubernetes, 0)
}

// Run starts the factories' informers and runs fn (a controller's Run) until the test ends; the
// cleanup waits for fn to return, so no controller writes after the test.
func (e *Env) Run(fn func(ctx context.Context), factories ...informers.SharedInformerFactory) {
	ctx, cancel := context.WithCancel(context.Background())
	for _, f := range factories {
		f.Start(ctx.Done())
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); fn(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		wg.Wait()
		for _, f := range factories {
			f.Shutdown()
		}
	})
}

var seq atomic.Int64

// Namespace creates a namespace with a fresh name starting with prefix and returns its name.
func (e *Env) Namespace(prefix string) string {
	e.t.Helper()
	name := fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%100000, seq.Add(1))
	_, err := e.Admin.Kubernetes.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return name
}

// Eventually polls cond every 50ms until it holds or timeout passes, then fails with what the
// last look saw. Conditions the controllers guarantee are awaited with a bound, never asserted at
// a moment.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s did not happen; last seen: %s", timeout, what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Never checks that cond stays false for d (polling every 50ms): for things a controller must not
// do, such as creating what was not asked for.
func Never(t testing.TB, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if ok, msg := cond(); ok {
			t.Fatalf("%s happened: %s", what, msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Short reports an error's first line (for failure messages).
func Short(err error) string {
	if err == nil {
		return "<nil>"
	}
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
