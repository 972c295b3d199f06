package aggregator

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/transport"

	"platform.io/libs/naming"
	"platform.io/libs/serviceresolve"
	"platform.io/services/gateway/aggregator/apiregistration"
	"platform.io/services/gateway/auth"
)

// The reasons of the Available condition, as upstream's availability controllers write them.
const (
	ReasonLocal                = "Local"
	ReasonPassed               = "Passed"
	ReasonServiceNotFound      = "ServiceNotFound"
	ReasonServiceAccessError   = "ServiceAccessError"
	ReasonServicePortError     = "ServicePortError"
	ReasonEndpointsNotFound    = "EndpointsNotFound"
	ReasonEndpointsAccessError = "EndpointsAccessError"
	ReasonMissingEndpoints     = "MissingEndpoints"
	ReasonFailedDiscoveryCheck = "FailedDiscoveryCheck"
)

// discoveryTimeout bounds one discovery check of an extension server.
const discoveryTimeout = 5 * time.Second

// runAvailability checks every APIService when the set changes, every CheckInterval, and at
// once when a proxied request could not reach one, and stores its Available condition.
func (ag *Aggregator) runAvailability(ctx context.Context) {
	tick := time.NewTicker(ag.cfg.CheckInterval)
	defer tick.Stop()
	for {
		ag.checkAll(ctx, "")
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-ag.changedAvailability:
		case name := <-ag.recheck:
			ag.checkAll(ctx, name)
		}
	}
}

// checkAll checks every APIService (or only the one named), in parallel.
func (ag *Aggregator) checkAll(ctx context.Context, only string) {
	snap := ag.current()
	ag.stats.forget(func(name string) bool { return snap.all[name] != nil })
	var wg sync.WaitGroup
	for name, svc := range snap.all {
		if only != "" && name != only {
			continue
		}
		var rem *remote
		if svc.Spec.Service != nil {
			rem = snap.remote[svc.GroupVersion()]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cond := ag.check(ctx, svc, rem)
			ag.stats.observe(name, cond.Status == apiregistration.ConditionTrue, svc.IsAvailable() || svc.Status.Condition(apiregistration.Available) == nil, cond.Reason)
			next := svc.DeepCopy()
			next.Status.SetCondition(cond)
			if err := ag.store.UpdateStatus(ctx, svc, next, fieldManager); err != nil && ctx.Err() == nil &&
				!apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				ag.log.WarnContext(ctx, "APIService availability", "name", name, "error", err)
			}
		}()
	}
	wg.Wait()
}

// check computes the Available condition of one APIService as upstream does: local ones are
// always available; a remote one needs its Service, the Service's port, (but for ExternalName
// Services) Endpoints with an address for that port, and a successful discovery request to the
// extension server (as system:platform-aggregator in system:masters, over the proxy's TLS).
func (ag *Aggregator) check(ctx context.Context, svc *apiregistration.APIService, rem *remote) apiregistration.APIServiceCondition {
	now := metav1.Now()
	cond := func(ok bool, reason, msg string) apiregistration.APIServiceCondition {
		st := apiregistration.ConditionFalse
		if ok {
			st = apiregistration.ConditionTrue
		}
		return apiregistration.APIServiceCondition{Type: apiregistration.Available, Status: st, LastTransitionTime: now, Reason: reason, Message: msg}
	}
	ref := svc.Spec.Service
	if ref == nil {
		return cond(true, ReasonLocal, "Local APIServices are always available")
	}
	port := apiregistration.DefaultPort
	if ref.Port != nil {
		port = *ref.Port
	}
	service, err := ag.store.Service(ctx, ref.Namespace, ref.Name)
	switch {
	case apierrors.IsNotFound(err):
		return cond(false, ReasonServiceNotFound, fmt.Sprintf("service/%s in %q is not present", ref.Name, ref.Namespace))
	case err != nil:
		return cond(false, ReasonServiceAccessError, err.Error())
	}
	if service.Spec.Type != corev1.ServiceTypeExternalName {
		sp, ok := serviceresolve.ServicePort(service, port)
		if !ok {
			return cond(false, ReasonServicePortError, fmt.Sprintf("service/%s in %q is not listening on port %d", ref.Name, ref.Namespace, port))
		}
		eps, err := ag.store.Endpoints(ctx, ref.Namespace, ref.Name)
		switch {
		case apierrors.IsNotFound(err):
			return cond(false, ReasonEndpointsNotFound, fmt.Sprintf("cannot find endpoints for service/%s in %q", ref.Name, ref.Namespace))
		case err != nil:
			return cond(false, ReasonEndpointsAccessError, err.Error())
		}
		if !hasAddress(eps, sp.Name) {
			return cond(false, ReasonMissingEndpoints, fmt.Sprintf("endpoints for service/%s in %q have no addresses with port name %q", ref.Name, ref.Namespace, sp.Name))
		}
	}
	if rem == nil || rem.transport == nil {
		msg := "no proxy for the APIService"
		if rem != nil && rem.buildErr != nil {
			msg = rem.buildErr.Error()
		}
		return cond(false, ReasonFailedDiscoveryCheck, msg)
	}
	url := "https://" + rem.host + "/apis/" + svc.Spec.Group + "/" + svc.Spec.Version
	if err := discoveryCheck(ctx, rem.transport, url); err != nil {
		return cond(false, ReasonFailedDiscoveryCheck, fmt.Sprintf("failing or missing response from %s: %v", url, err))
	}
	return cond(true, ReasonPassed, "all checks passed")
}

func hasAddress(eps *corev1.Endpoints, portName string) bool {
	for _, subset := range eps.Subsets {
		if len(subset.Addresses) == 0 {
			continue
		}
		for _, p := range subset.Ports {
			if p.Name == portName {
				return true
			}
		}
	}
	return false
}

// discoveryCheck asks the extension server for its group version's resource list.
func discoveryCheck(ctx context.Context, rt http.RoundTripper, url string) error {
	ctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	// The checks act as a member of system:masters, so that the extension server's authorization
	// never makes a healthy server look down (as upstream's do).
	transport.SetAuthProxyHeaders(req, naming.AggregatorUser, "", []string{auth.GroupMasters}, nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusMultipleChoices {
		return fmt.Errorf("bad status from %s: %d", url, resp.StatusCode)
	}
	return nil
}
