package apiserver_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"platform.io/services/gateway/gatewaytest"
)

// Continue after compaction, as upstream: a continue token whose revision was compacted is 410
// Expired with upstream's message and an "inconsistent continue" token in the Status's
// metadata.continue; following that token lists the rest of the collection (after the last key
// of the pages already read) at the most recent revision, changes made since included, and its
// own continue tokens page on at that revision.
func TestListContinueAfterCompaction(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{ConfigureStorage: func(c *storageConfig) {
		c.HistoryMaxEvents = 5
		c.CompactionInterval = 50 * time.Millisecond
	}})
	for _, name := range []string{"a", "b", "c", "d"} {
		must(t, do(t, e, "POST", cms, configMap(name, nil)), http.StatusCreated)
	}
	first := must(t, do(t, e, "GET", cms+"?limit=2", nil), http.StatusOK)
	token, _ := path(first, "metadata.continue").(string)
	if token == "" || len(first["items"].([]any)) != 2 {
		t.Fatalf("first page: %v", first)
	}
	// Writes after the first page, enough for the history to be compacted past it.
	must(t, do(t, e, "POST", cms, configMap("e", nil)), http.StatusCreated)
	for i := range 10 {
		must(t, do(t, e, "PUT", cms+"/c", configMap("c", map[string]string{"i": strings.Repeat("x", i)})), http.StatusOK)
	}
	var expired response
	waitFor(t, "the first page's revision to be compacted", func() bool {
		expired = do(t, e, "GET", cms+"?limit=2&continue="+url.QueryEscape(token), nil)
		return expired.code == http.StatusGone
	})
	msg := expired.status(t, http.StatusGone, "Expired")
	const want = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
	if msg != want {
		t.Errorf("message %q, want upstream's %q", msg, want)
	}
	inconsistent, _ := path(expired.obj(t), "metadata.continue").(string)
	if inconsistent == "" {
		t.Fatalf("the 410 carries no metadata.continue: %s", expired.body)
	}
	latest := path(must(t, do(t, e, "GET", cms, nil), http.StatusOK), "metadata.resourceVersion").(string)
	rest := must(t, do(t, e, "GET", cms+"?limit=2&continue="+url.QueryEscape(inconsistent), nil), http.StatusOK)
	items := rest["items"].([]any)
	if len(items) != 2 || path(items[0].(map[string]any), "metadata.name") != "c" || path(items[0].(map[string]any), "data.i") != strings.Repeat("x", 9) ||
		path(items[1].(map[string]any), "metadata.name") != "d" || path(rest, "metadata.resourceVersion") != latest {
		t.Fatalf("list after the inconsistent continue: %v; want c (as last written) and d at %s", rest, latest)
	}
	next, _ := path(rest, "metadata.continue").(string)
	last := must(t, do(t, e, "GET", cms+"?limit=2&continue="+url.QueryEscape(next), nil), http.StatusOK)
	if items := last["items"].([]any); len(items) != 1 || path(items[0].(map[string]any), "metadata.name") != "e" ||
		path(last, "metadata.resourceVersion") != latest || path(last, "metadata.continue") != nil {
		t.Fatalf("last page: %v; want e, created after the first page, at %s", last, latest)
	}
	// The token is tied to its collection like any other.
	do(t, e, "GET", "/api/v1/namespaces/other/configmaps?limit=2&continue="+url.QueryEscape(inconsistent), nil).status(t, http.StatusBadRequest, "BadRequest")
}
