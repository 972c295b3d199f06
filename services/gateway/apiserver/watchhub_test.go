package apiserver_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"platform.io/services/gateway/gatewaytest"
	storageserver "platform.io/services/storage/server"
)

// Watches of one type from many clients share one upstream storage watch, and every client
// still gets every change after its resourceVersion exactly once, in order; with the hub off
// (--watch-cache=false) each watch is its own storage watch and the answers are the same.
func TestWatchHubSharesOneUpstreamWatch(t *testing.T) {
	for _, hub := range []bool{true, false} {
		t.Run(fmt.Sprintf("hub=%v", hub), func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			metricsAddr := l.Addr().String()
			l.Close()
			e := gatewaytest.Start(t, gatewaytest.Options{
				Configure:        func(c *gatewayConfig) { c.WatchCache = hub },
				ConfigureStorage: func(c *storageserver.Config) { c.MetricsBindAddress = metricsAddr },
			})
			must(t, do(t, e, "POST", cms, configMap("seed", nil)), http.StatusCreated)
			rv := path(must(t, do(t, e, "GET", cms, nil), http.StatusOK), "metadata.resourceVersion").(string)
			const watchers, writes = 30, 60
			streams := make([]*watchStream, watchers)
			for i := range streams {
				streams[i] = openWatch(t, e.Admin, e, cms+"?watch=1&resourceVersion="+rv)
			}
			// A watcher of another namespace sees none of it.
			other := openWatch(t, e.Admin, e, "/api/v1/namespaces/platform-system/configmaps?watch=1&resourceVersion="+rv)
			for i := 0; i < writes; i++ {
				must(t, do(t, e, "POST", cms, configMap(fmt.Sprintf("w-%02d", i), nil)), http.StatusCreated)
			}
			var wg sync.WaitGroup
			for i, w := range streams {
				wg.Add(1)
				go func(i int, w *watchStream) {
					defer wg.Done()
					last := atoi(rv)
					for n := 0; n < writes; n++ {
						ev := w.next(t, false)
						got := atoi(path(ev.Object, "metadata.resourceVersion").(string))
						if ev.Type != "ADDED" || path(ev.Object, "metadata.name") != fmt.Sprintf("w-%02d", n) || got <= last {
							t.Errorf("watcher %d event %d: %s %v after rv %d", i, n, ev.Type, ev.Object["metadata"], last)
							return
						}
						last = got
					}
				}(i, w)
			}
			wg.Wait()
			must(t, do(t, e, "POST", "/api/v1/namespaces/platform-system/configmaps", configMap("sys", nil)), http.StatusCreated)
			if ev := other.next(t, false); path(ev.Object, "metadata.name") != "sys" {
				t.Errorf("namespace watcher saw %v", ev.Object["metadata"])
			}
			upstream := storageWatchers(t, metricsAddr, "configmaps")
			// One shared by the watches, and the list cache's (the list above started it).
			if hub && upstream > 2 {
				t.Errorf("%d storage watches of configmaps for %d clients, want 1 shared and the list cache's", upstream, watchers+1)
			}
			if !hub && upstream < watchers {
				t.Errorf("without the hub %d storage watches for %d clients", upstream, watchers+1)
			}
		})
	}
}

var watchersMetric = regexp.MustCompile(`storage_watchers\{resource="([^"]*)"\} (\d+)`)

func storageWatchers(t *testing.T, addr, resource string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	total := 0
	for _, m := range watchersMetric.FindAllStringSubmatch(string(body), -1) {
		if regexp.MustCompile(`(^|\.|/)` + resource + `($|\.)`).MatchString(m[1]) {
			n, _ := strconv.Atoi(m[2])
			total += n
		}
	}
	return total
}
