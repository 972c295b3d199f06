package service

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"time"

	"platform.io/libs/pki"
)

// reloadInterval bounds how often certificate files are checked for changes: a rotated
// certificate or CA is used by new connections at most this long after it was written.
const reloadInterval = 5 * time.Second

// keyPair is a certificate and key read from files and re-read when either file changes, so
// certificates can be rotated without a restart.
type keyPair struct {
	certFile, keyFile string
	mu                sync.Mutex
	cert              *tls.Certificate
	stamp             string
	checked           time.Time
}

func newKeyPair(certFile, keyFile string) (*keyPair, error) {
	kp := &keyPair{certFile: certFile, keyFile: keyFile}
	if _, err := kp.get(); err != nil {
		return nil, err
	}
	return kp, nil
}

// get returns the current certificate, reloading it when the files changed. A failed reload keeps
// the previous certificate (a half-written rotation must not break serving).
func (kp *keyPair) get() (*tls.Certificate, error) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	now := time.Now()
	if kp.cert != nil && now.Sub(kp.checked) < reloadInterval {
		return kp.cert, nil
	}
	kp.checked = now
	stamp := fileStamp(kp.certFile) + "|" + fileStamp(kp.keyFile)
	if kp.cert != nil && stamp == kp.stamp {
		return kp.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(kp.certFile, kp.keyFile)
	if err != nil {
		if kp.cert != nil {
			return kp.cert, nil
		}
		return nil, err
	}
	kp.cert, kp.stamp = &cert, stamp
	return kp.cert, nil
}

// CAPool is a CA bundle read from a file and re-read when it changes (checked at most every few
// seconds), so a rotated CA is trusted without a restart.
type CAPool struct {
	file    string
	mu      sync.Mutex
	pool    *x509.CertPool
	stamp   string
	checked time.Time
}

// NewCAPool reads file; it fails if the file holds no certificate.
func NewCAPool(file string) (*CAPool, error) {
	p := &CAPool{file: file}
	if _, err := p.Get(); err != nil {
		return nil, err
	}
	return p, nil
}

// Get returns the current pool; a failed re-read keeps the previous one.
func (p *CAPool) Get() (*x509.CertPool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.pool != nil && now.Sub(p.checked) < reloadInterval {
		return p.pool, nil
	}
	p.checked = now
	stamp := fileStamp(p.file)
	if p.pool != nil && stamp == p.stamp {
		return p.pool, nil
	}
	pool, err := pki.LoadPool(p.file)
	if err != nil {
		if p.pool != nil {
			return p.pool, nil
		}
		return nil, err
	}
	p.pool, p.stamp = pool, stamp
	return p.pool, nil
}

func fileStamp(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return "missing"
	}
	return fmt.Sprintf("%d/%d", st.ModTime().UnixNano(), st.Size())
}

// ServerTLS is a server TLS configuration whose certificate and client CA are re-read when their
// files change. With clientCAFile set, clients must present a certificate from that CA (mutual TLS).
func ServerTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	kp, err := newKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	base := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return kp.get() },
	}
	if clientCAFile == "" {
		return base, nil
	}
	cas, err := NewCAPool(clientCAFile)
	if err != nil {
		return nil, err
	}
	base.ClientAuth = tls.RequireAndVerifyClientCert
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		pool, err := cas.Get()
		if err != nil {
			return nil, err
		}
		c := base.Clone()
		c.GetConfigForClient = nil
		c.ClientCAs = pool
		return c, nil
	}
	return base, nil
}

// ClientTLS is a client TLS configuration presenting certFile (re-read when it changes, so
// short-lived client certificates rotate without a restart) and trusting the servers caFile vouches
// for (read once: a new CA needs a restart of the client).
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	pool, err := pki.LoadPool(caFile)
	if err != nil {
		return nil, err
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	if certFile != "" {
		kp, err := newKeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return kp.get() }
	}
	return c, nil
}
