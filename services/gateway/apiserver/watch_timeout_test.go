package apiserver_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/gateway/gatewaytest"
)

// A watch that reaches its timeoutSeconds ends cleanly (no ERROR event), whatever the storage
// stream says at that moment; a storage failure before the timeout is still an ERROR event
// (issue 14 item 7).
//
// The race: the gateway handed its watch deadline to the storage stream, so two timers guarded
// one timeout. On a busy machine the storage side's timer could end the stream
// (DEADLINE_EXCEEDED) while the gateway's own context timer had not run yet (measured: errors
// arriving 240-400 ms past the deadline with the gateway's context still live), and the gateway
// took the stream's end for a storage failure: an ERROR event "Timeout: the request did not
// complete in time" (504). The fault proxy below makes the storage side's deadline fire first on
// purpose, so the old behaviour fails every time instead of under load only.
func TestWatchTimeoutEndsCleanly(t *testing.T) {
	proxy := &storageFaults{}
	e := gatewaytest.Start(t, gatewaytest.Options{
		Configure: func(c *gatewayConfig) {
			c.WatchBookmarkInterval = 100 * time.Millisecond
			c.Storage.Address = proxy.start(t, c.Storage.Address)
		},
		// Longer than the clean cases' timeouts, shorter than the failing case's.
		ConfigureStorage: func(c *storageConfig) { c.FutureRevisionWait = 2 * time.Second },
	})
	rv := path(must(t, do(t, e, "GET", cms, nil), http.StatusOK), "metadata.resourceVersion").(string)
	future := strconv.Itoa(atoi(rv) + 1000)

	// The watch: a resourceVersion, a label selector that matches nothing, bookmarks.
	// Each case's selector is its own, so the proxy knows which watch to disturb.
	watchQuery := func(collection, selector, resourceVersion string, timeoutSeconds int, extra ...string) string {
		q := url.Values{"watch": {"1"}, "allowWatchBookmarks": {"true"}, "labelSelector": {selector},
			"timeoutSeconds": {strconv.Itoa(timeoutSeconds)}}
		if resourceVersion != "" {
			q.Set("resourceVersion", resourceVersion)
		}
		for i := 0; i+1 < len(extra); i += 2 {
			q.Set(extra[i], extra[i+1])
		}
		return collection + "?" + q.Encode()
	}
	// Storage answers the gateway's revision reads of secrets only when the caller's deadline
	// has passed.
	const secrets = "/api/v1/namespaces/default/secrets"
	proxy.stallRevisions("secrets")

	clean := []struct {
		name, query string
		timeout     time.Duration
		fault       fault
		// initialEnd: the stream must carry the initial-events-end bookmark.
		initialEnd bool
	}{{
		// Storage ends the stream for the deadline 500 ms before the gateway's timer fires:
		// the gateway's timer running late under load, made deterministic.
		name: "storage deadline first", timeout: 2 * time.Second,
		query: watchQuery(cms, "case=deadline-first", rv, 2),
		fault: fault{deadlineLead: 500 * time.Millisecond},
	}, {
		name: "storage deadline first, initial events", timeout: 2 * time.Second, initialEnd: true,
		query: watchQuery(cms, "case=deadline-first-initial", "", 2, "sendInitialEvents", "true", "resourceVersionMatch", "NotOlderThan"),
		fault: fault{deadlineLead: 500 * time.Millisecond},
	}, {
		// A future resourceVersion: storage is still waiting for it (2 s) when the watch's
		// 1 s are up.
		name: "storage deadline first, waiting for a future revision", timeout: time.Second,
		query: watchQuery(cms, "case=deadline-first-future", future, 1),
		fault: fault{deadlineLead: 500 * time.Millisecond},
	}, {
		// Storage fails the stream once the watch's timeout has passed: whichever of the
		// gateway's timer and the failure comes first, the end is clean.
		name: "storage error at the timeout", timeout: time.Second,
		query: watchQuery(cms, "case=error-at-timeout", rv, 1),
		fault: fault{failAfter: time.Second},
	}, {
		// No initial events and no resourceVersion: the gateway reads the current revision
		// first, and the watch's time runs out during that read. An empty stream, ended cleanly.
		name: "timeout while reading the current revision", timeout: time.Second,
		query: watchQuery(secrets, "case=revision-stalls", "", 1, "sendInitialEvents", "false", "resourceVersionMatch", "NotOlderThan"),
	}}
	t.Run("clean", func(t *testing.T) {
		for _, tc := range clean {
			proxy.set(tc.query, tc.fault)
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				evs, took := watchToEnd(t, e, tc.query, tc.timeout+10*time.Second)
				bookmarks, initialEnd := 0, false
				for _, ev := range evs {
					switch ev.Type {
					case "BOOKMARK":
						bookmarks++
						if a, _ := path(ev.Object, "metadata.annotations").(map[string]any); a["k8s.io/initial-events-end"] == "true" {
							initialEnd = true
						}
					default:
						t.Errorf("%s event in a watch that selects nothing: %v", ev.Type, ev.Object)
					}
				}
				// The gateway's deadline is after the request was sent, and nothing may end the
				// watch before it.
				if took < tc.timeout {
					t.Errorf("the watch ended after %v, before its timeout %v", took, tc.timeout)
				}
				if tc.initialEnd && !initialEnd {
					t.Errorf("no initial-events-end bookmark in %d bookmarks", bookmarks)
				}
				if tc.fault.deadlineLead > 0 && proxy.watches(tc.query) == 0 {
					t.Errorf("the watch did not go through the storage proxy")
				}
			})
		}
	})

	// Failures before the timeout are still reported, as ERROR events with their status.
	failing := []struct {
		name, query string
		fault       fault
		code        float64
		reason      string
	}{{
		name:  "storage failure",
		query: watchQuery(cms, "case=failure", rv, 60),
		fault: fault{failAfter: 300 * time.Millisecond}, code: 500, reason: "InternalError",
	}, {
		// Storage's own answer to a revision that does not arrive in 2 s (the 504 with the
		// ResourceVersionTooLarge cause), well before the watch's 60 s.
		name:  "future revision never reached",
		query: watchQuery(cms, "case=too-large", future, 60),
		code:  504, reason: "Timeout",
	}}
	t.Run("failing", func(t *testing.T) {
		for _, tc := range failing {
			proxy.set(tc.query, tc.fault)
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				// Well before the watch's 60 s.
				evs, _ := watchToEnd(t, e, tc.query, 30*time.Second)
				var errs []event
				for _, ev := range evs {
					if ev.Type == "ERROR" {
						errs = append(errs, ev)
					} else if ev.Type != "BOOKMARK" {
						t.Errorf("%s event in a watch that selects nothing: %v", ev.Type, ev.Object)
					}
				}
				if len(errs) != 1 || errs[0].Object["kind"] != "Status" || errs[0].Object["code"] != tc.code || errs[0].Object["reason"] != tc.reason {
					t.Fatalf("want one ERROR event %v %s, got %v", tc.code, tc.reason, errs)
				}
				if tc.code == 504 {
					if causes, _ := path(errs[0].Object, "details.causes").([]any); len(causes) != 1 || path(causes[0].(map[string]any), "reason") != "ResourceVersionTooLarge" {
						t.Errorf("504 without the ResourceVersionTooLarge cause: %v", errs[0].Object)
					}
				}
			})
		}
	})
}

// watchToEnd reads a watch until the server ends it (failing the test if that takes longer than
// bound) and returns its events and how long the watch lasted from the request on.
func watchToEnd(t *testing.T, e *gatewaytest.Env, query string, bound time.Duration) ([]event, time.Duration) {
	t.Helper()
	start := time.Now()
	w := openWatch(t, e.Admin, e, query)
	timer := time.NewTimer(bound)
	defer timer.Stop()
	var evs []event
	for {
		select {
		case ev, ok := <-w.events:
			if !ok {
				return evs, time.Since(start)
			}
			evs = append(evs, ev)
		case <-timer.C:
			t.Fatalf("the watch did not end within %v", bound)
		}
	}
}

// fault is what the storage proxy does to one watch.
type fault struct {
	// deadlineLead makes the storage watch's deadline, if the gateway gave it one, fire this much
	// earlier: the storage side's timer winning the race against the gateway's.
	deadlineLead time.Duration
	// failAfter fails the storage watch with an INTERNAL error this long after it started.
	failAfter time.Duration
}

// storageFaults is a gRPC proxy in front of the real storage service that disturbs the watches
// a test names (by their label selector) and passes everything else through unchanged.
type storageFaults struct {
	storagev1.UnimplementedStorageServer
	// up is the generated client, not libs/storage's: its errors are the gRPC statuses storage
	// sent, which the proxy returns unchanged (code and ErrorDetail).
	up storagev1.StorageClient

	mu      sync.Mutex
	faults  map[string]fault // by label selector
	seen    map[string]int
	stalled map[string]bool // resources whose Revision waits for the caller's deadline
}

// start serves the proxy on a loopback port in front of the storage service at target and
// returns the proxy's address. The gateway dials it instead of storage; the other services
// talk to storage directly.
func (p *storageFaults) start(t *testing.T, target string) string {
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()), storage.CallOptions())
	if err != nil {
		t.Fatal(err)
	}
	p.up = storagev1.NewStorageClient(conn)
	p.faults, p.seen, p.stalled = map[string]fault{}, map[string]int{}, map[string]bool{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(storage.MaxMessageBytes), grpc.MaxSendMsgSize(storage.MaxMessageBytes))
	storagev1.RegisterStorageServer(srv, p)
	healthpb.RegisterHealthServer(srv, health.NewServer()) // the gateway's readyz asks
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Stop()
		conn.Close()
	})
	return ln.Addr().String()
}

// set arranges f for the watch of query (its label selector).
func (p *storageFaults) set(query string, f fault) {
	u, _ := url.Parse(query)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults[u.Query().Get("labelSelector")] = f
}

// stallRevisions makes Revision requests of resource wait until the caller's deadline.
func (p *storageFaults) stallRevisions(resource string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled[resource] = true
}

// watches tells how many storage watches of query's selector the proxy has served.
func (p *storageFaults) watches(query string) int {
	u, _ := url.Parse(query)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[u.Query().Get("labelSelector")]
}

func (p *storageFaults) Watch(req *storagev1.WatchRequest, stream grpc.ServerStreamingServer[storagev1.WatchResponse]) error {
	p.mu.Lock()
	f := p.faults[req.GetLabelSelector()]
	p.seen[req.GetLabelSelector()]++
	p.mu.Unlock()
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	if d, ok := ctx.Deadline(); ok && f.deadlineLead > 0 {
		ctx, cancel = context.WithDeadline(ctx, d.Add(-f.deadlineLead))
		defer cancel()
	}
	up, err := p.up.Watch(ctx, req)
	if err != nil {
		return err
	}
	failed := make(chan struct{})
	if f.failAfter > 0 {
		stop := cancel
		timer := time.AfterFunc(f.failAfter, func() { close(failed); stop() })
		defer timer.Stop()
	}
	for {
		resp, err := up.Recv()
		select {
		case <-failed:
			return storage.NewError(storagev1.ErrorReason_INTERNAL, "injected storage failure")
		default:
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

func (p *storageFaults) Create(ctx context.Context, req *storagev1.CreateRequest) (*storagev1.CreateResponse, error) {
	return p.up.Create(ctx, req)
}

func (p *storageFaults) Get(ctx context.Context, req *storagev1.GetRequest) (*storagev1.GetResponse, error) {
	return p.up.Get(ctx, req)
}

func (p *storageFaults) List(ctx context.Context, req *storagev1.ListRequest) (*storagev1.ListResponse, error) {
	return p.up.List(ctx, req)
}

func (p *storageFaults) Update(ctx context.Context, req *storagev1.UpdateRequest) (*storagev1.UpdateResponse, error) {
	return p.up.Update(ctx, req)
}

func (p *storageFaults) Delete(ctx context.Context, req *storagev1.DeleteRequest) (*storagev1.DeleteResponse, error) {
	return p.up.Delete(ctx, req)
}

func (p *storageFaults) Revision(ctx context.Context, req *storagev1.RevisionRequest) (*storagev1.RevisionResponse, error) {
	p.mu.Lock()
	stalled := p.stalled[req.GetType().GetResource()]
	p.mu.Unlock()
	if _, ok := ctx.Deadline(); ok && stalled {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return p.up.Revision(ctx, req)
}

func (p *storageFaults) Compact(ctx context.Context, req *storagev1.CompactRequest) (*storagev1.CompactResponse, error) {
	return p.up.Compact(ctx, req)
}
