package stack

import (
	"net/http"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	CleanupBuild()
	os.Exit(code)
}

// The split stack and the all-in-one start, serve, and survive a restart of the gateway.
func TestStartBothModes(t *testing.T) {
	for _, mode := range []Mode{Split, AllInOne} {
		t.Run(string(mode), func(t *testing.T) {
			s, err := Start(Options{Mode: mode, Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			c, err := s.HTTPClient("admin", "system:masters")
			if err != nil {
				t.Fatal(err)
			}
			get := func() int {
				resp, err := c.Get(s.URL + "/api/v1/namespaces/default")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			if code := get(); code != http.StatusOK {
				t.Fatalf("GET default namespace: %d", code)
			}
			name := "gateway"
			if mode == AllInOne {
				name = "allinone"
			}
			if err := s.Restart(name, false); err != nil {
				t.Fatal(err)
			}
			if err := s.WaitReady(30e9); err != nil {
				t.Fatal(err)
			}
			if code := get(); code != http.StatusOK {
				t.Fatalf("GET after restart: %d", code)
			}
		})
	}
}
