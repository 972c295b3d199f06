// Package admission is the gateway's client of the admission service: it follows the service's
// interest set, so that writes no enabled plugin or webhook may act on pay no call, and calls the
// mutating and validating phases for the others.
package admission

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	admissionv1 "platform.io/proto/admission/v1"
)

// Request describes a write for the interest check (before any object is encoded).
type Request struct {
	Operation   string // CREATE, UPDATE, DELETE, CONNECT
	Group       string
	Resource    string
	Subresource string
	Namespaced  bool
	Namespace   string
	UserGroups  []string
	// OwnerReferences is true when the write sets or changes metadata.ownerReferences.
	OwnerReferences bool
	// Mutating asks for the mutating phase, which rules of plugins that only validate do not
	// call for.
	Mutating bool
}

// UnavailableError is a write that could not be admitted because the service did not answer
// (HTTP 503).
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string { return "admission is unavailable: " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Client calls the admission service.
type Client struct {
	rpc admissionv1.AdmissionClient
	log *slog.Logger

	mu   sync.RWMutex
	live bool
	set  *admissionv1.InterestSet
	ns   map[string]bool
	// floor is the newest interest generation an answer of the service reported: until the set
	// received is at least as new, every write is asked (a request may have just changed it).
	floor uint64

	calls *prometheus.CounterVec
}

// New builds the client over a connection to the admission service; Run follows its interest.
func New(conn grpc.ClientConnInterface, log *slog.Logger, reg prometheus.Registerer) *Client {
	c := &Client{rpc: admissionv1.NewAdmissionClient(conn), log: log,
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_admission_requests_total",
			Help: "Writes by whether the admission service was asked (asked) or no plugin or webhook could act on them (skipped).",
		}, []string{"result"})}
	if reg != nil {
		reg.MustRegister(c.calls)
	}
	return c
}

// Run follows the interest set until ctx ends; while the stream is down every write is asked.
func (c *Client) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	// An outage is logged once, at its start (a stream that was live, or the first attempt);
	// the retries while it lasts are debug lines.
	reported := false
	for ctx.Err() == nil {
		err := c.follow(ctx)
		c.mu.Lock()
		wasLive := c.live
		c.live = false
		c.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			if wasLive || !reported {
				c.log.Warn("admission interest stream failing: every write asks the admission service until it is back", "service", "admission", "err", err)
				reported = true
			} else {
				c.log.Debug("admission interest stream ended", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}

func (c *Client) follow(ctx context.Context) error {
	stream, err := c.rpc.WatchInterest(ctx, &admissionv1.WatchInterestRequest{})
	if err != nil {
		return err
	}
	for first := true; ; first = false {
		set, err := stream.Recv()
		if err != nil {
			return err
		}
		ns := make(map[string]bool, len(set.GetNamespaces()))
		for _, n := range set.GetNamespaces() {
			ns[n] = true
		}
		c.mu.Lock()
		c.set, c.ns, c.live = set, ns, true
		if first {
			// A new stream may be from a restarted service, whose generations start again.
			c.floor = 0
		}
		c.mu.Unlock()
	}
}

// Interested tells whether some enabled plugin or webhook may act on the write (true whenever the
// interest set is not known).
func (c *Client) Interested(r Request) bool {
	c.mu.RLock()
	live, set, ns, floor := c.live, c.set, c.ns, c.floor
	c.mu.RUnlock()
	interested := !live || set.GetGeneration() < floor || matches(set, ns, r)
	if interested {
		c.calls.WithLabelValues("asked").Inc()
	} else {
		c.calls.WithLabelValues("skipped").Inc()
	}
	return interested
}

func matches(set *admissionv1.InterestSet, ns map[string]bool, r Request) bool {
	if r.Namespaced && r.Namespace != "" && ns[r.Namespace] {
		return true
	}
	if r.OwnerReferences && set.GetOwnerReferences() {
		return true
	}
	for _, rule := range set.GetRules() {
		if ruleMatches(rule, r) {
			return true
		}
	}
	return false
}

// ruleMatches applies a webhook rule's matching: operations, groups, resources with the
// subresource forms, scope, and the user groups; a validate-only rule never asks for the
// mutating phase.
func ruleMatches(rule *admissionv1.InterestRule, r Request) bool {
	if r.Mutating && rule.GetValidateOnly() {
		return false
	}
	if !anyOf(rule.GetOperations(), r.Operation) || !anyOf(rule.GetApiGroups(), r.Group) {
		return false
	}
	switch rule.GetScope() {
	case "Cluster":
		if r.Namespaced {
			return false
		}
	case "Namespaced":
		if !r.Namespaced {
			return false
		}
	}
	if len(rule.GetUserGroups()) > 0 {
		found := false
		for _, g := range r.UserGroups {
			if anyOf(rule.GetUserGroups(), g) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	for _, res := range rule.GetResources() {
		if resourceMatches(res, r.Resource, r.Subresource) {
			return true
		}
	}
	return false
}

func anyOf(list []string, s string) bool {
	for _, x := range list {
		if x == "*" || x == s {
			return true
		}
	}
	return false
}

// resourceMatches: "*" main resources, "*/*" everything, "pods" the main resource, "pods/*" its
// subresources, "*/status" every status subresource, "pods/status" that one.
func resourceMatches(pattern, resource, sub string) bool {
	pr, ps, hasSub := strings.Cut(pattern, "/")
	if !hasSub {
		return sub == "" && (pr == "*" || pr == resource)
	}
	return (pr == "*" || pr == resource) && (ps == "*" || ps == sub) && !(ps == "*" && sub == "" && pr != "*")
}

// Admit runs the mutating phase.
func (c *Client) Admit(ctx context.Context, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error) {
	resp, err := c.rpc.Admit(ctx, req)
	c.observe(resp)
	return resp, c.remoteError(ctx, err)
}

// Validate runs the validating phase.
func (c *Client) Validate(ctx context.Context, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error) {
	resp, err := c.rpc.Validate(ctx, req)
	c.observe(resp)
	return resp, c.remoteError(ctx, err)
}

// observe raises the floor to the interest generation an answer reports.
func (c *Client) observe(resp *admissionv1.AdmissionResponse) {
	gen := resp.GetInterestGeneration()
	c.mu.RLock()
	behind := gen > c.floor
	c.mu.RUnlock()
	if !behind {
		return
	}
	c.mu.Lock()
	if gen > c.floor {
		c.floor = gen
	}
	c.mu.Unlock()
}

func (c *Client) remoteError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	st := status.Convert(err)
	if st.Code() == codes.InvalidArgument {
		return errors.New("admission: " + st.Message())
	}
	return &UnavailableError{Err: errors.New(st.Message())}
}
