package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// objectKind is the kind every scenario works on (--kind): ConfigMaps, or a custom kind that the
// tool defines with a CustomResourceDefinition. Both carry the same payload in "data", a map of
// strings, so that their numbers compare.
type objectKind struct {
	flag       string // the --kind value
	apiVersion string
	kind       string
	groupPath  string // the group version's path: /api/v1 or /apis/<group>/<version>
	resource   string
	crd        string // the CustomResourceDefinition that defines the kind, if it is custom
}

var (
	configMapKind = &objectKind{flag: "configmap", apiVersion: "v1", kind: "ConfigMap", groupPath: "/api/v1", resource: "configmaps"}
	customKind    = &objectKind{flag: "custom", apiVersion: customGroup + "/v1", kind: "LoadObject", groupPath: "/apis/" + customGroup + "/v1",
		resource: "loadobjects", crd: "loadobjects." + customGroup}
)

func parseKind(s string) (*objectKind, error) {
	for _, k := range []*objectKind{configMapKind, customKind} {
		if s == k.flag {
			return k, nil
		}
	}
	return nil, fmt.Errorf("--kind %q: want configmap or custom", s)
}

// collectionPath is the path of the kind's objects in namespace ns.
func (k *objectKind) collectionPath(ns string) string {
	return k.groupPath + "/namespaces/" + ns + "/" + k.resource
}

// fillerValue is one of an object's four data values: the four make about 300 bytes.
const fillerValue = "lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod"

// appendObject appends an object's JSON to b: its name, a resourceVersion if rv is not empty
// (an update), four data keys of about 300 bytes in all, and the extra key/value pairs.
func (k *objectKind) appendObject(b []byte, name, rv string, extra ...string) []byte {
	b = append(b, `{"apiVersion":"`...)
	b = append(b, k.apiVersion...)
	b = append(b, `","kind":"`...)
	b = append(b, k.kind...)
	b = append(b, `","metadata":{"name":"`...)
	b = append(b, name...)
	b = append(b, `","labels":{"app":"apiload"}`...)
	if rv != "" {
		b = append(b, `,"resourceVersion":"`...)
		b = append(b, rv...)
		b = append(b, '"')
	}
	b = append(b, `},"data":{`...)
	for i, key := range []string{"a.properties", "b.properties", "c.properties", "d.properties"} {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, key...)
		b = append(b, `":"`...)
		b = append(b, fillerValue...)
		b = append(b, '"')
	}
	for i := 0; i+1 < len(extra); i += 2 {
		b = append(b, `,"`...)
		b = append(b, extra[i]...)
		b = append(b, `":"`...)
		b = append(b, extra[i+1]...)
		b = append(b, '"')
	}
	return append(b, "}}"...)
}

const (
	// customGroup is the custom kind's group; custom groups keep their names on Platform.
	customGroup = "apiload.example.com"
	// crdServeTimeout bounds the wait for a definition's kind to be served.
	crdServeTimeout = 30 * time.Second
	// crdGoneTimeout bounds the wait for a definition being deleted (by an earlier run) to go.
	crdGoneTimeout = 2 * time.Minute
	// pollInterval is how often the tool looks again while it waits for the server.
	pollInterval = 50 * time.Millisecond
)

// customCRD defines customKind in the server's apiextensions group: namespaced, one version, and
// a schema in which data is a map of strings, as a ConfigMap's is. The map is granular (the
// default, spelled out), so a server-side apply owns and merges its keys one by one, as it does a
// ConfigMap's; the schema has no other list or map marker.
func customCRD() []byte {
	return []byte(`{
  "apiVersion": "` + groups.apiextensions + `/v1",
  "kind": "CustomResourceDefinition",
  "metadata": {"name": "` + customKind.crd + `", "labels": {"app.kubernetes.io/managed-by": "apiload"}},
  "spec": {
    "group": "` + customGroup + `",
    "scope": "Namespaced",
    "names": {"plural": "loadobjects", "singular": "loadobject", "kind": "LoadObject", "listKind": "LoadObjectList"},
    "versions": [{
      "name": "v1",
      "served": true,
      "storage": true,
      "schema": {"openAPIV3Schema": {
        "type": "object",
        "properties": {
          "data": {"type": "object", "additionalProperties": {"type": "string"}, "x-kubernetes-map-type": "granular"}
        }
      }}
    }]
  }
}`)
}

// crdObject is the part of a CustomResourceDefinition the tool reads.
type crdObject struct {
	Metadata struct {
		DeletionTimestamp string `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec struct {
		Scope string `json:"scope"`
		Names struct {
			Kind string `json:"kind"`
		} `json:"names"`
	} `json:"spec"`
}

// getCRD reads the definition at path; nil if there is none.
func (a *apiClient) getCRD(ctx context.Context, path string) (*crdObject, error) {
	var buf bytes.Buffer
	err := a.do(ctx, http.MethodGet, path, nil, http.StatusOK, &buf)
	if se := (*statusError)(nil); errors.As(err, &se) && se.code == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c := &crdObject{}
	if err := json.Unmarshal(buf.Bytes(), c); err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	return c, nil
}

// errPollTimeout: what poll waited for did not happen in time.
var errPollTimeout = errors.New("timed out")

// poll calls check every pollInterval until it reports done or fails, ctx ends, or timeout
// passes (errPollTimeout).
func poll(ctx context.Context, timeout time.Duration, check func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, err := check()
		if done || err != nil {
			return err
		}
		if !time.Now().Before(deadline) {
			return errPollTimeout
		}
		if !sleepUntil(ctx, time.Now().Add(pollInterval)) {
			return ctx.Err()
		}
	}
}

// defineKind makes the custom kind's definition exist, and waits until the kind is served. A
// definition that exists already is reused, and left in place at the end; one the tool creates is
// deleted by cleanup. Nothing is to be done for ConfigMaps.
func (r *runner) defineKind(ctx context.Context) error {
	k := r.o.kind
	if k.crd == "" {
		return nil
	}
	path := crdsPath + "/" + k.crd
	c, err := r.api.getCRD(ctx, path)
	if err != nil {
		return err
	}
	if c != nil && c.Metadata.DeletionTimestamp != "" {
		fmt.Fprintf(r.progress, "apiload: the CustomResourceDefinition %s is being deleted; waiting until it is gone\n", k.crd)
		err := poll(ctx, crdGoneTimeout, func() (bool, error) {
			c, err = r.api.getCRD(ctx, path)
			return c == nil, err
		})
		if errors.Is(err, errPollTimeout) {
			return fmt.Errorf("the CustomResourceDefinition %s is still being deleted after %s", k.crd, crdGoneTimeout)
		}
		if err != nil {
			return err
		}
	}
	var buf bytes.Buffer
	switch {
	case c == nil:
		err := r.api.do(ctx, http.MethodPost, crdsPath, customCRD(), http.StatusCreated, &buf)
		if se := (*statusError)(nil); errors.As(err, &se) && se.code == http.StatusConflict {
			// Defined meanwhile by someone else: theirs to delete.
			fmt.Fprintf(r.progress, "apiload: reusing the CustomResourceDefinition %s, defined meanwhile (it stays)\n", k.crd)
			break
		}
		if err != nil {
			return fmt.Errorf("creating the CustomResourceDefinition %s: %w", k.crd, err)
		}
		r.definedCRD = true
		fmt.Fprintf(r.progress, "apiload: created the CustomResourceDefinition %s\n", k.crd)
	case c.Spec.Names.Kind != k.kind || c.Spec.Scope != "Namespaced":
		return fmt.Errorf("the CustomResourceDefinition %s exists and defines the %s kind %s, not the Namespaced %s the tool needs: delete it",
			k.crd, c.Spec.Scope, c.Spec.Names.Kind, k.kind)
	default:
		fmt.Fprintf(r.progress, "apiload: reusing the CustomResourceDefinition %s, which exists already (it stays)\n", k.crd)
	}

	// The definition is served once it is established: until then the kind's URLs are 404.
	all := k.groupPath + "/" + k.resource + "?limit=1"
	var last error
	err = poll(ctx, crdServeTimeout, func() (bool, error) {
		err := r.api.do(ctx, http.MethodGet, all, nil, http.StatusOK, &buf)
		if se := (*statusError)(nil); errors.As(err, &se) {
			last = err
			return false, nil
		}
		return err == nil, err
	})
	if errors.Is(err, errPollTimeout) {
		return fmt.Errorf("the kind of the CustomResourceDefinition %s is not served %s after it was defined (is it established?): %v", k.crd, crdServeTimeout, last)
	}
	return err
}
