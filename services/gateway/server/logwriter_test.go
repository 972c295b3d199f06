package server

import (
	"errors"
	"testing"
)

type failingWriter struct{ fail bool }

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.fail {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

// The "log" check fails while the log cannot be written and recovers with the next good write.
func TestLogWriter(t *testing.T) {
	fw := &failingWriter{}
	l := NewLogWriter(fw)
	if _, err := l.Write([]byte("a")); err != nil || l.Healthy() != nil {
		t.Fatalf("healthy log: %v %v", err, l.Healthy())
	}
	fw.fail = true
	_, _ = l.Write([]byte("b"))
	if l.Healthy() == nil {
		t.Fatal("a failed write is not reported")
	}
	fw.fail = false
	_, _ = l.Write([]byte("c"))
	if l.Healthy() != nil {
		t.Fatal("recovered log still unhealthy")
	}
}
