package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// scenarioCollect measures the garbage collector (not part of --scenario=all): one owner and
// --objects dependents that name it in an owner reference are created, the owner is deleted
// (propagationPolicy Background), and the run ends when no dependent is left; it reports how long
// that took. It needs the stack's garbage collector (--controllers=default).
const scenarioCollect = "collect"

// collectTimeout bounds the wait for the dependents to go.
const collectTimeout = 10 * time.Minute

// runCollect runs the collect scenario in ns.
func (r *runner) runCollect(ctx context.Context, ns string) error {
	coll := r.o.kind.collectionPath(ns)
	var buf bytes.Buffer
	owner := r.o.kind.appendObject(nil, "owner", "")
	if err := r.api.do(ctx, http.MethodPost, coll, owner, http.StatusCreated, &buf); err != nil {
		return fmt.Errorf("creating the owner: %w", err)
	}
	var created struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			UID string `json:"uid"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(buf.Bytes(), &created); err != nil || created.Metadata.UID == "" {
		return fmt.Errorf("the owner's uid: %v", err)
	}
	ref, err := json.Marshal([]map[string]any{{"apiVersion": created.APIVersion, "kind": created.Kind, "name": "owner", "uid": created.Metadata.UID}})
	if err != nil {
		return err
	}
	labels := []byte(`"labels":{"app":"apiload"}`)
	withOwner := append([]byte(`"labels":{"app":"apiload","apiload-dependent":"true"},"ownerReferences":`), ref...)
	seedStart := time.Now()
	var next atomic.Int64
	errs := make([]error, fixtureWorkers)
	var wg sync.WaitGroup
	for w := range fixtureWorkers {
		wg.Go(func() {
			var b bytes.Buffer
			for {
				i := int(next.Add(1) - 1)
				if i >= r.o.objects || ctx.Err() != nil {
					return
				}
				body := bytes.Replace(r.o.kind.appendObject(nil, fmt.Sprintf("dep-%06d", i), ""), labels, withOwner, 1)
				if err := r.api.do(ctx, http.MethodPost, coll, body, http.StatusCreated, &b); err != nil {
					errs[w] = fmt.Errorf("creating a dependent: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(r.progress, "apiload: collect: %d dependents created in %s\n", r.o.objects, time.Since(seedStart).Round(time.Millisecond))
	deleteStart := time.Now()
	if err := r.api.do(ctx, http.MethodDelete, coll+"/owner", []byte(`{"propagationPolicy":"Background"}`), http.StatusOK, &buf); err != nil {
		return fmt.Errorf("deleting the owner: %w", err)
	}
	// The namespace holds other objects (a root CA ConfigMap the controllers publish): only the
	// dependents count, by their label; one is enough to know some are left.
	q := url.Values{"limit": {"1"}, "labelSelector": {"apiload-dependent=true"}}
	for {
		if err := r.api.do(ctx, http.MethodGet, coll+"?"+q.Encode(), nil, http.StatusOK, &buf); err != nil {
			return fmt.Errorf("looking for dependents: %w", err)
		}
		left, err := countListItems(buf.Bytes())
		if err != nil {
			return err
		}
		if left == 0 {
			break
		}
		if time.Since(deleteStart) > collectTimeout {
			r.failf("collect: dependents still there %s after the owner was deleted", collectTimeout)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(deleteStart)
	fmt.Fprintf(r.progress, "apiload: collect: %d dependents collected in %s\n", r.o.objects, took.Round(time.Millisecond))
	r.notes = append(r.notes, fmt.Sprintf("collect: %d dependents of one owner collected %.1f s after its background delete (%.0f/s)",
		r.o.objects, took.Seconds(), float64(r.o.objects)/took.Seconds()))
	return nil
}
