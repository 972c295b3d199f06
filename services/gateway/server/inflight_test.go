package server

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Past --max-requests-inflight a request is answered 429 with Retry-After at once; watches and
// health checks are not counted; the mutating bound is separate.
func TestInflightLimiter(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	h := newInflightLimiter(1, 1).wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	done := make(chan int, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/api/v1/pods")
		if err == nil {
			resp.Body.Close()
			done <- resp.StatusCode
		}
	}()
	<-entered
	resp, err := http.Get(srv.URL + "/api/v1/configmaps")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("second read-only request: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// A watch and a mutating request still get through.
	for _, req := range []*http.Request{
		httptest.NewRequest("GET", srv.URL+"/api/v1/pods?watch=true", nil),
		httptest.NewRequest("POST", srv.URL+"/api/v1/namespaces/default/pods", nil),
	} {
		go func(req *http.Request) {
			req.RequestURI = ""
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}(req)
		<-entered
	}
	close(release)
	if code := <-done; code != http.StatusOK {
		t.Errorf("first request: %d", code)
	}
}
