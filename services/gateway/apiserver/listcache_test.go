package apiserver_test

import (
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"platform.io/services/gateway/gatewaytest"
)

var cacheListMetric = regexp.MustCompile(`apiserver_cache_list_total\{index="",resource_prefix="/configmaps"\} (\d+)`)

// cachedLists reads how many configmap lists the gateway answered from its list cache.
func cachedLists(t *testing.T, e *gatewaytest.Env) int {
	t.Helper()
	resp, err := e.Admin.Get(e.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := cacheListMetric.FindSubmatch(body)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// listNames lists a collection and returns its items' namespace/name and data.
func listNames(t *testing.T, e *gatewaytest.Env, collection string, query url.Values) (names []string, data map[string]any, rv string) {
	t.Helper()
	list := must(t, do(t, e, "GET", collection+"?"+query.Encode(), nil), 200)
	data = map[string]any{}
	for _, it := range list["items"].([]any) {
		o := it.(map[string]any)
		k := fmt.Sprint(path(o, "metadata.namespace"), "/", path(o, "metadata.name"))
		names = append(names, k)
		data[k] = o["data"]
	}
	return names, data, path(list, "metadata.resourceVersion").(string)
}

// Unpaged lists come from the gateway's list cache, and answer exactly as storage does: never
// older than a write acknowledged before them, with the same selection and order.
func TestListCache(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	const sys = "/api/v1/namespaces/platform-system/configmaps"
	for i := range 20 {
		cm := configMap(fmt.Sprintf("cm-%02d", i), map[string]string{"i": strconv.Itoa(i)})
		cm["metadata"].(map[string]any)["labels"] = map[string]any{"app": []string{"a", "b"}[i%2], "n": strconv.Itoa(i)}
		must(t, do(t, e, "POST", []string{cms, sys}[i%3/2], cm), 201)
	}
	listNames(t, e, cms, nil) // starts the cache
	before := cachedLists(t, e)

	// Read-your-writes, every round: a create, an update and a delete are each visible to the
	// very next list.
	for i := range 40 {
		name := fmt.Sprintf("rw-%02d", i)
		must(t, do(t, e, "POST", cms, configMap(name, map[string]string{"v": "1"})), 201)
		if names, _, _ := listNames(t, e, cms, nil); !slices.Contains(names, "default/"+name) {
			t.Fatalf("round %d: the list after a create lacks it", i)
		}
		must(t, do(t, e, "PATCH", cms+"/"+name, map[string]any{"data": map[string]string{"v": "2"}}, "Content-Type", "application/merge-patch+json"), 200)
		if _, data, _ := listNames(t, e, "/api/v1/configmaps", nil); fmt.Sprint(data["default/"+name]) != "map[v:2]" {
			t.Fatalf("round %d: the list after an update shows %v", i, data["default/"+name])
		}
		must(t, do(t, e, "DELETE", cms+"/"+name, nil), 200)
		if names, _, _ := listNames(t, e, cms, nil); slices.Contains(names, "default/"+name) {
			t.Fatalf("round %d: the list after a delete still has it", i)
		}
	}
	// Most of those came from the cache (a list the cache cannot answer within a second goes
	// to storage, which a loaded machine may see now and then).
	if served := cachedLists(t, e) - before; served < 60 {
		t.Errorf("%d of 120 lists served from the list cache", served)
	}

	// The same selection and order as storage's (a paged list is storage's answer).
	for _, coll := range []string{cms, sys, "/api/v1/configmaps"} {
		for _, q := range []url.Values{
			{},
			{"labelSelector": {"app=a"}},
			{"labelSelector": {"app!=a,n"}},
			{"labelSelector": {"n in (3,4,5)"}},
			{"fieldSelector": {"metadata.name=cm-04"}},
			{"fieldSelector": {"metadata.namespace!=default"}},
			{"labelSelector": {"app=b"}, "fieldSelector": {"metadata.name!=cm-01"}},
		} {
			cached, _, _ := listNames(t, e, coll, q)
			paged := url.Values{"limit": {"500"}}
			for k, v := range q {
				paged[k] = v
			}
			stored, _, _ := listNames(t, e, coll, paged)
			if !slices.Equal(cached, stored) {
				t.Errorf("%s?%s: cached %v, storage %v", coll, q.Encode(), cached, stored)
			}
		}
	}
	// resourceVersion semantics: "not older than" the list's own revision, and "0".
	_, _, rv := listNames(t, e, cms, nil)
	for _, q := range []url.Values{{"resourceVersion": {rv}}, {"resourceVersion": {rv}, "resourceVersionMatch": {"NotOlderThan"}}, {"resourceVersion": {"0"}}} {
		if _, _, got := listNames(t, e, cms, q); atoi(got) < atoi(rv) {
			t.Errorf("%s: answered at %s, older than %s", q.Encode(), got, rv)
		}
	}
	// A malformed selector gets storage's 400, as before.
	do(t, e, "GET", cms+"?labelSelector="+url.QueryEscape("app in ("), nil).status(t, 400, "BadRequest")
}

// --watch-cache=false turns the list cache off with the watch hub (upstream's flag).
func TestListCacheOff(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{Configure: func(c *gatewayConfig) { c.WatchCache = false }})
	must(t, do(t, e, "POST", cms, configMap("a", nil)), 201)
	for range 5 {
		if names, _, _ := listNames(t, e, cms, nil); !slices.Contains(names, "default/a") {
			t.Fatalf("list: %v", names)
		}
	}
	if n := cachedLists(t, e); n != 0 {
		t.Errorf("%d lists from the list cache with --watch-cache=false", n)
	}
}
