// Package conformance is the storage guarantees suite (GUIDE §2). It drives a real storage
// service over gRPC on a real socket and runs unchanged against every backend: each backend's
// test supplies a Harness that starts the service on it.
package conformance

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/server"
)

// Harness runs one storage service on one backend for one test.
type Harness interface {
	// Client is a client of the running service (a new one after each restart).
	Client() *storage.Client
	// RestartService stops the storage service and starts a new one on the same data.
	RestartService(t *testing.T)
	// CrashBackend kills the durable store without warning and brings it back (Redis: SIGKILL
	// with appendfsync always; embedded: the service's process state is lost, the file stays).
	CrashBackend(t *testing.T)
}

// Factory starts a fresh backend and a storage service on it; tweak adjusts the service's
// configuration (already filled with test-friendly defaults).
type Factory func(t *testing.T, tweak func(*server.Config)) Harness

// TestConfig is the service configuration the suite starts from: defaults with short waits.
func TestConfig() server.Config {
	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.FutureRevisionWait = 500 * time.Millisecond
	cfg.CompactionInterval = time.Hour // tests compact explicitly unless they test retention
	return cfg
}

var typeSeq atomic.Int64

// newType returns a resource type no other test uses.
func newType() *storagev1.ResourceType {
	return &storagev1.ResourceType{Group: "conformance.platform.io", Resource: fmt.Sprintf("widgets%d", typeSeq.Add(1))}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func obj(ns, name, value string, labels map[string]string) *storagev1.Object {
	return &storagev1.Object{Namespace: ns, Name: name, Value: []byte(value), Labels: labels}
}
