package apiserver_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"platform.io/services/gateway/gatewaytest"
)

func names(list map[string]any) []string {
	var out []string
	for _, it := range list["items"].([]any) {
		out = append(out, path(it.(map[string]any), "metadata.name").(string))
	}
	return out
}

// Spec "List, paging and watch behaviour" and the collection response fields.
func TestListPaging(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	for i := 0; i < 25; i++ {
		cm := configMap(fmt.Sprintf("cm-%02d", i), nil)
		cm["metadata"].(map[string]any)["labels"] = map[string]string{"parity": []string{"even", "odd"}[i%2]}
		must(t, do(t, e, "POST", cms, cm), http.StatusCreated)
	}
	first := must(t, do(t, e, "GET", cms+"?limit=10", nil), http.StatusOK)
	if len(names(first)) != 10 || path(first, "metadata.continue") == "" {
		t.Fatalf("page 1: %v", first["metadata"])
	}
	if n, _ := path(first, "metadata.remainingItemCount").(float64); n != 15 {
		t.Errorf("remainingItemCount %v, want 15", path(first, "metadata.remainingItemCount"))
	}
	rv := path(first, "metadata.resourceVersion")
	// Writes between pages are not seen: the snapshot of the first page holds.
	must(t, do(t, e, "POST", cms, configMap("cm-00a", nil)), http.StatusCreated)
	must(t, do(t, e, "DELETE", cms+"/cm-20", nil), http.StatusOK)
	var all []string
	all = append(all, names(first)...)
	page := first
	for {
		token, _ := path(page, "metadata.continue").(string)
		if token == "" {
			break
		}
		page = must(t, do(t, e, "GET", cms+"?limit=10&continue="+url.QueryEscape(token), nil), http.StatusOK)
		if path(page, "metadata.resourceVersion") != rv {
			t.Errorf("page resourceVersion %v, want %v", path(page, "metadata.resourceVersion"), rv)
		}
		all = append(all, names(page)...)
	}
	if len(all) != 25 || strings.Join(all, ",") == "" || contains(all, "cm-00a") || !contains(all, "cm-20") {
		t.Errorf("paged list saw %d items: %v", len(all), all)
	}
	if _, ok := path(page, "metadata.remainingItemCount").(float64); ok {
		t.Errorf("the last page has remainingItemCount")
	}
	// Selectors; remainingItemCount is omitted with a selector.
	odd := must(t, do(t, e, "GET", cms+"?labelSelector=parity%3Dodd&limit=5", nil), http.StatusOK)
	if len(names(odd)) != 5 || path(odd, "metadata.remainingItemCount") != nil {
		t.Errorf("label selector page: %v %v", names(odd), odd["metadata"])
	}
	one := must(t, do(t, e, "GET", cms+"?fieldSelector=metadata.name%3Dcm-03", nil), http.StatusOK)
	if got := names(one); len(got) != 1 || got[0] != "cm-03" {
		t.Errorf("field selector: %v", got)
	}
	// All namespaces.
	must(t, do(t, e, "POST", "/api/v1/namespaces/platform-system/configmaps", configMap("sys", nil)), http.StatusCreated)
	everywhere := must(t, do(t, e, "GET", "/api/v1/configmaps?fieldSelector=metadata.namespace%3Dplatform-system", nil), http.StatusOK)
	if got := names(everywhere); len(got) != 1 || got[0] != "sys" {
		t.Errorf("all-namespaces list with namespace field: %v", got)
	}
	if n := len(names(must(t, do(t, e, "GET", "/api/v1/configmaps", nil), http.StatusOK))); n != 26 {
		t.Errorf("all-namespaces list has %d items, want 26", n)
	}
	// A tampered continue token is a 400 or 410, never another collection.
	tok := path(first, "metadata.continue").(string)
	r := do(t, e, "GET", cms+"?limit=10&continue="+url.QueryEscape(tok[:len(tok)-2]+"AA"), nil)
	if r.code != http.StatusBadRequest && r.code != http.StatusGone {
		t.Errorf("tampered continue token: %d %s", r.code, r.body)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Spec "Resource version semantics": every row of the get and list tables.
func TestResourceVersionSemantics(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	c := must(t, do(t, e, "POST", cms, configMap("a", nil)), http.StatusCreated)
	rv := path(c, "metadata.resourceVersion").(string)
	n, _ := strconv.Atoi(rv)
	future := strconv.Itoa(n + 1000)

	// get: unset (most recent), 0 (any), N (not older than).
	for _, q := range []string{"", "?resourceVersion=0", "?resourceVersion=" + rv} {
		must(t, do(t, e, "GET", cms+"/a"+q, nil), http.StatusOK)
	}
	r := do(t, e, "GET", cms+"/a?resourceVersion="+future, nil)
	msg := r.status(t, http.StatusGatewayTimeout, "Timeout")
	if !strings.Contains(msg, "Too large resource version") || r.header.Get("Retry-After") == "" {
		t.Errorf("future get: %q Retry-After %q", msg, r.header.Get("Retry-After"))
	}
	do(t, e, "GET", cms+"/a?resourceVersion=abc", nil).status(t, http.StatusBadRequest, "BadRequest")

	list := func(q string) response { return do(t, e, "GET", cms+"?"+q, nil) }
	// Valid rows.
	for _, q := range []string{"", "resourceVersion=0", "resourceVersion=" + rv, "limit=1", "limit=1&resourceVersion=0",
		"limit=1&resourceVersion=" + rv, "resourceVersionMatch=Exact&resourceVersion=" + rv,
		"resourceVersionMatch=NotOlderThan&resourceVersion=0", "resourceVersionMatch=NotOlderThan&resourceVersion=" + rv} {
		if r := list(q); r.code != http.StatusOK {
			t.Errorf("list ?%s: %d %s", q, r.code, r.body)
		}
	}
	exact := must(t, list("resourceVersionMatch=Exact&resourceVersion="+rv), http.StatusOK)
	if path(exact, "metadata.resourceVersion") != rv {
		t.Errorf("Exact list at %s answered at %v", rv, path(exact, "metadata.resourceVersion"))
	}
	// Invalid rows: 400.
	for _, q := range []string{"resourceVersionMatch=Exact", "resourceVersionMatch=Exact&resourceVersion=0",
		"resourceVersionMatch=NotOlderThan", "limit=1&continue=x&resourceVersion=" + rv, "resourceVersionMatch=Sometimes&resourceVersion=1"} {
		list(q).status(t, http.StatusBadRequest, "BadRequest")
	}
	// A future version in a list.
	msg = list("resourceVersion="+future).status(t, http.StatusGatewayTimeout, "Timeout")
	if !strings.Contains(msg, "Too large resource version") {
		t.Errorf("future list: %q", msg)
	}
}
