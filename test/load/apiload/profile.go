package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// profileTarget is a process whose CPU profile --profile-dir collects for every measured run:
// the gateway through its authenticated /debug/pprof/ (as the administrator), a backend service
// through /debug/pprof/ on its metrics listener.
type profileTarget struct {
	name string
	url  string // the /debug/pprof/profile URL, without the query
	hc   *http.Client
}

// profileTargets are the processes of a started stack whose profiles --profile-dir collects.
func profileTargets(api *apiClient, metricsURLs map[string]string) []profileTarget {
	ts := []profileTarget{{name: "gateway", url: api.base + "/debug/pprof/profile", hc: api.hc}}
	if m, ok := metricsURLs["storage"]; ok {
		ts = append(ts, profileTarget{name: "storage", url: strings.TrimSuffix(m, "/metrics") + "/debug/pprof/profile", hc: http.DefaultClient})
	}
	return ts
}

// profileWindow collects a CPU profile of every target over [from, stop) into
// <dir>/<scenario>-c<clients>-<target>.pprof; the channel it returns delivers a note naming the
// files (or why one is missing) once they are written.
func (r *runner) profileWindow(ctx context.Context, scenario string, clients int, from, stop time.Time) <-chan string {
	ch := make(chan string, 1)
	if r.o.profileDir == "" || len(r.profiles) == 0 {
		ch <- ""
		return ch
	}
	go func() {
		if !sleepUntil(ctx, from) {
			ch <- ""
			return
		}
		seconds := max(1, int(stop.Sub(from).Round(time.Second)/time.Second))
		notes := make([]string, len(r.profiles))
		var wg sync.WaitGroup
		for i, t := range r.profiles {
			wg.Go(func() {
				path := filepath.Join(r.o.profileDir, fmt.Sprintf("%s-c%d-%s.pprof", scenario, clients, t.name))
				if err := fetchProfile(ctx, t, seconds, path); err != nil {
					notes[i] = fmt.Sprintf("%s profile: %v", t.name, err)
					return
				}
				notes[i] = fmt.Sprintf("%s profile %s", t.name, path)
			})
		}
		wg.Wait()
		ch <- strings.Join(notes, "; ")
	}()
	return ch
}

func fetchProfile(ctx context.Context, t profileTarget, seconds int, path string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds+30)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s?seconds=%d", t.url, seconds), nil)
	if err != nil {
		return err
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %d %s", t.url, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
