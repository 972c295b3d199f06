package server_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"golang.org/x/net/http2"

	"platform.io/services/gateway/gatewaytest"
	"platform.io/services/gateway/server"
)

// request makes one request with an explicit Accept-Encoding (the transport then neither adds
// gzip nor decompresses) and returns the answer as sent.
func request(t *testing.T, c *http.Client, url, acceptEncoding string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// noGzip is the admin client with the transport's own Accept-Encoding: gzip off.
func noGzip(e *gatewaytest.Env) *http.Client {
	c := e.Client("admin", "system:masters")
	c.Transport.(*http2.Transport).DisableCompression = true
	return c
}

// seedConfigMaps creates n ConfigMaps in the default namespace (8 at a time).
func seedConfigMaps(t *testing.T, e *gatewaytest.Env, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": fmt.Sprintf("cm-%d", i)},
					"data": map[string]string{"key1": "value-one", "key2": "value-two", "key3": "a somewhat longer value to make it realistic"}})
				resp, err := e.Admin.Post(e.URL+"/api/v1/namespaces/default/configmaps", "application/json", bytes.NewReader(body))
				if err != nil {
					errs <- err
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					errs <- fmt.Errorf("create cm-%d: %d", i, resp.StatusCode)
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// Issue 36, response compression (upstream's APIResponseCompression): a list of 2,000 ConfigMaps
// asked with Accept-Encoding: gzip arrives gzipped and decodes to the same list; without it, the
// list arrives as it is; small answers and watches are never compressed.
// --feature-gates=APIResponseCompression=false turns it off.
func TestResponseCompression(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	seedConfigMaps(t, e, 2000)
	list := e.URL + "/api/v1/namespaces/default/configmaps"
	plain := noGzip(e)

	resp, identity := request(t, plain, list, "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != "" || len(identity) < 2000*100 {
		t.Fatalf("list without Accept-Encoding: %d, Content-Encoding %q, %d bytes", resp.StatusCode, resp.Header.Get("Content-Encoding"), len(identity))
	}
	var items struct{ Items []json.RawMessage }
	if err := json.Unmarshal(identity, &items); err != nil || len(items.Items) != 2000 {
		t.Fatalf("list: %d items, %v", len(items.Items), err)
	}

	resp, compressed := request(t, e.Admin, list, "gzip")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("Content-Length") != "" {
		t.Fatalf("list with Accept-Encoding gzip: %d, headers %v", resp.StatusCode, resp.Header)
	}
	zr, err := gzip.NewReader(bytes.NewReader(compressed))
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(decoded, &items); err != nil || len(items.Items) != 2000 {
		t.Fatalf("decompressed list: %d items, %v", len(items.Items), err)
	}
	t.Logf("list of 2,000 ConfigMaps: %d bytes, %d gzipped (%.1f%%)", len(identity), len(compressed), 100*float64(len(compressed))/float64(len(identity)))
	if len(compressed) >= len(identity)/4 {
		t.Errorf("compressed %d bytes of %d", len(compressed), len(identity))
	}
	// Go's transport asks for gzip by itself and decompresses: client-go's case.
	if resp, body := request(t, e.Admin, list, ""); !resp.Uncompressed || !bytes.Equal(body, decoded) {
		t.Errorf("transparent decompression: Uncompressed %t, %d bytes", resp.Uncompressed, len(body))
	}

	// Small answers are not compressed.
	for _, p := range []string{"/api/v1/namespaces/default/configmaps/cm-1", "/api/v1/namespaces/default/configmaps?limit=10", "/version"} {
		if resp, _ := request(t, e.Admin, e.URL+p, "gzip"); resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != "" {
			t.Errorf("%s: %d, Content-Encoding %q", p, resp.StatusCode, resp.Header.Get("Content-Encoding"))
		}
	}

	// Watches are not compressed, not even their initial events (over 128 KiB here).
	req, _ := http.NewRequest("GET", list+"?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=10", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	wresp, err := e.Admin.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer wresp.Body.Close()
	if wresp.Header.Get("Content-Encoding") != "" {
		t.Fatalf("watch: Content-Encoding %q", wresp.Header.Get("Content-Encoding"))
	}
	sc := bufio.NewScanner(wresp.Body)
	sc.Buffer(nil, 1<<20)
	for n := 0; n < 2000 && sc.Scan(); n++ {
		var ev struct{ Type string }
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Type != "ADDED" {
			t.Fatalf("watch event %d: %q %v", n, sc.Bytes(), err)
		}
	}
}

// TestResponseCompressionOff: with --feature-gates=APIResponseCompression=false nothing is
// compressed.
func TestResponseCompressionOff(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{Configure: func(c *server.Config) { c.FeatureGates.APIResponseCompression = false }})
	seedConfigMaps(t, e, 600)
	resp, body := request(t, e.Admin, e.URL+"/api/v1/namespaces/default/configmaps", "gzip")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != "" || len(body) < 128*1024 {
		t.Fatalf("list: %d, Content-Encoding %q, %d bytes", resp.StatusCode, resp.Header.Get("Content-Encoding"), len(body))
	}
}
