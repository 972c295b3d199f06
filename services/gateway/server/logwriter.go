package server

import (
	"io"
	"sync"
	"time"
)

// LogWriter wraps the process log's destination and remembers whether writing to it fails, so
// the "log" health check reports a log that cannot be written (a full disk, a closed pipe).
type LogWriter struct {
	w       io.Writer
	mu      sync.Mutex
	lastErr error
	errAt   time.Time
}

// NewLogWriter wraps w.
func NewLogWriter(w io.Writer) *LogWriter { return &LogWriter{w: w} }

// Write writes to the destination and records a failure.
func (l *LogWriter) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	l.mu.Lock()
	if err != nil {
		l.lastErr, l.errAt = err, time.Now()
	} else {
		l.lastErr = nil
	}
	l.mu.Unlock()
	return n, err
}

// Healthy reports the last write's failure, if the last write failed.
func (l *LogWriter) Healthy() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastErr
}
