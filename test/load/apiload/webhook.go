package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

// noopWebhook is an admission webhook that allows everything (--webhook=noop): an HTTPS server on
// loopback with a CA of its own, registered for the measured kind's writes in the run's
// namespaces, so a run measures what one matching webhook adds to every write.
type noopWebhook struct {
	server *loopbackServer
	url    string // the server's URL with the webhook's path
	calls  atomic.Int64
	name   string
}

// startNoopWebhook serves the webhook.
func startNoopWebhook() (*noopWebhook, error) {
	h := &noopWebhook{}
	s, err := serveLoopback("apiload-webhook", http.HandlerFunc(h.serve), false)
	if err != nil {
		return nil, err
	}
	h.server, h.url = s, s.url+"/noop"
	return h, nil
}

// serve allows the request: the answer carries the request's uid in the review's version.
func (h *noopWebhook) serve(w http.ResponseWriter, r *http.Request) {
	h.calls.Add(1)
	var review struct {
		APIVersion string `json:"apiVersion"`
		Request    struct {
			UID string `json:"uid"`
		} `json:"request"`
	}
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"apiVersion":%q,"kind":"AdmissionReview","response":{"uid":%q,"allowed":true}}`, review.APIVersion, review.Request.UID)
}

func (h *noopWebhook) close() { h.server.close() }

// register creates the ValidatingWebhookConfiguration (named after the run) for the kind's
// creates and updates in the given namespaces, and waits until a write in probeNS reaches the
// webhook (the admission service sees configurations through a watch).
func (h *noopWebhook) register(ctx context.Context, api *apiClient, kind *objectKind, name string, namespaces []string, probeNS string) error {
	group := ""
	if kind.groupPath != "/api/v1" {
		group = kind.apiVersion[:len(kind.apiVersion)-len("/v1")]
	}
	cfg := map[string]any{
		"apiVersion": groups.admissionregistration + "/v1", "kind": "ValidatingWebhookConfiguration",
		"metadata": map[string]any{"name": name},
		"webhooks": []any{map[string]any{
			"name":                    "noop.apiload.platform.io",
			"clientConfig":            map[string]any{"url": h.url, "caBundle": h.server.caPEM},
			"rules":                   []any{map[string]any{"operations": []string{"CREATE", "UPDATE"}, "apiGroups": []string{group}, "apiVersions": []string{"v1"}, "resources": []string{kind.resource}}},
			"namespaceSelector":       map[string]any{"matchExpressions": []any{map[string]any{"key": "kubernetes.io/metadata.name", "operator": "In", "values": append(namespaces, probeNS)}}},
			"sideEffects":             "None",
			"admissionReviewVersions": []string{"v1"},
			"timeoutSeconds":          5,
			"failurePolicy":           "Fail",
		}},
	}
	body, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := api.do(ctx, http.MethodPost, webhookConfigurations, body, http.StatusCreated, &buf); err != nil {
		return fmt.Errorf("registering the webhook: %w", err)
	}
	h.name = name
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; h.calls.Load() == 0; i++ {
		if time.Now().After(deadline) {
			return errors.New("the webhook configuration did not take effect within 10s")
		}
		obj := kind.appendObject(nil, fmt.Sprintf("webhook-probe-%d", i), "")
		if err := api.do(ctx, http.MethodPost, kind.collectionPath(probeNS), obj, http.StatusCreated, &buf); err != nil {
			return fmt.Errorf("probing the webhook: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// unregister deletes the configuration.
func (h *noopWebhook) unregister(ctx context.Context, api *apiClient) error {
	if h.name == "" {
		return nil
	}
	return api.delete(ctx, webhookConfigurations+"/"+h.name)
}
