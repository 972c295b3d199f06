package filters

import (
	"compress/gzip"
	"net/http"
	"strings"
	"sync"
)

// Response compression, as upstream's APIResponseCompression (beta, on by default since 1.16):
// an answer is gzipped when the request accepts gzip and the answer's first write is over
// 128 KiB (a body the gateway writes at once; a streaming encoder's first writes of a few bytes
// are collected up to the threshold). Watches and upgrades are never compressed, nor answers
// that carry a Content-Encoding of their own (an extension server's). Level 1: upstream's
// choice, nearly the ratio of higher levels for a fraction of the CPU.
const (
	// GzipThreshold is the size over which an answer is compressed (upstream's
	// defaultGzipThresholdBytes).
	GzipThreshold = 128 * 1024
	// gzipLevel is upstream's defaultGzipContentEncodingLevel.
	gzipLevel = 1
	// streamingFirstWrite: a first write this short is a streaming encoder's start ("{" or the
	// Protobuf magic), collected until the threshold decides.
	streamingFirstWrite = 4
)

var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzipLevel)
	return w
}}

// WithCompression gzips large answers for clients that accept it (enabled: the
// APIResponseCompression feature gate).
func WithCompression(next http.Handler, enabled bool) http.Handler {
	if !enabled {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead || !acceptsGzip(r.Header.Get("Accept-Encoding")) || infoOf(r).LongRunning(r) {
			next.ServeHTTP(w, r)
			return
		}
		cw := &compressWriter{ResponseWriter: w}
		next.ServeHTTP(cw, r)
		cw.close()
	})
}

// acceptsGzip tells whether an Accept-Encoding header names gzip (not refused with q=0).
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			q := strings.ReplaceAll(params, " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}

// compressWriter holds the status code back until the first write shows whether the answer is
// compressed.
type compressWriter struct {
	http.ResponseWriter
	code    int
	decided bool
	buf     []byte
	gz      *gzip.Writer
}

func (c *compressWriter) WriteHeader(code int) {
	if c.decided {
		c.ResponseWriter.WriteHeader(code)
		return
	}
	if code >= 100 && code < 200 {
		c.ResponseWriter.WriteHeader(code) // informational: passes, the final code follows
		return
	}
	if c.code == 0 {
		c.code = code
	}
}

func (c *compressWriter) Write(p []byte) (int, error) {
	if c.decided {
		if c.gz != nil {
			return c.gz.Write(p)
		}
		return c.ResponseWriter.Write(p)
	}
	switch {
	case len(c.buf) == 0 && len(p) > GzipThreshold:
		c.decide(true)
		return c.Write(p)
	case len(c.buf) == 0 && len(p) > streamingFirstWrite:
		c.decide(false)
		return c.ResponseWriter.Write(p)
	}
	c.buf = append(c.buf, p...)
	if len(c.buf) > GzipThreshold {
		c.decide(true)
		buf := c.buf
		c.buf = nil
		if _, err := c.gz.Write(buf); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// decide sends the status code, with Content-Encoding gzip when compressing (and the answer
// has no encoding of its own and a status with a body).
func (c *compressWriter) decide(compress bool) {
	c.decided = true
	code := c.code
	if code == 0 {
		code = http.StatusOK
	}
	h := c.Header()
	if compress && h.Get("Content-Encoding") == "" && code != http.StatusNoContent && code != http.StatusNotModified {
		h.Del("Content-Length")
		h.Set("Content-Encoding", "gzip")
		h.Add("Vary", "Accept-Encoding")
		c.gz = gzipWriters.Get().(*gzip.Writer)
		c.gz.Reset(c.ResponseWriter)
	}
	c.ResponseWriter.WriteHeader(code)
}

// flushPending writes what is held back, uncompressed (the answer stayed small or streams).
func (c *compressWriter) flushPending() {
	if c.decided || (c.code == 0 && len(c.buf) == 0) {
		return
	}
	c.decide(false)
	if len(c.buf) > 0 {
		_, _ = c.ResponseWriter.Write(c.buf)
		c.buf = nil
	}
}

// Flush sends what is held back: an answer that flushes before it is large streams
// uncompressed.
func (c *compressWriter) Flush() {
	c.flushPending()
	if c.gz != nil {
		_ = c.gz.Flush()
	}
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (c *compressWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// close ends the answer: what is held back is written, the gzip stream finished.
func (c *compressWriter) close() {
	c.flushPending()
	if c.gz != nil {
		_ = c.gz.Close()
		c.gz.Reset(nil)
		gzipWriters.Put(c.gz)
		c.gz = nil
	}
}
