package signer

import (
	"fmt"
	"os"
	"sync"

	"platform.io/libs/pki"
)

// CAFiles is a CA read from a PEM certificate file and a PEM key file, read again when either
// changes (a rotated CA is used for the next certificate). The key never leaves the process and
// is never logged.
type CAFiles struct {
	certFile, keyFile string

	mu    sync.Mutex
	ca    *pki.CA
	stamp string
}

// LoadCAFiles reads the CA; it fails if the files cannot be read, the certificate is not a CA or
// the key is not its key.
func LoadCAFiles(certFile, keyFile string) (*CAFiles, error) {
	c := &CAFiles{certFile: certFile, keyFile: keyFile}
	stamp, err := c.fileStamp()
	if err != nil {
		return nil, err
	}
	ca, err := pki.LoadCA(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	c.ca, c.stamp = ca, stamp
	return c, nil
}

// fileStamp identifies the files' current contents by size and modification time.
func (c *CAFiles) fileStamp() (string, error) {
	var s string
	for _, f := range []string{c.certFile, c.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return "", fmt.Errorf("pki: %w", err)
		}
		s += fmt.Sprintf("%d/%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return s, nil
}

// Current is the CA now: read again if the files changed; while the new files do not load (a
// rotation half written), the CA read last.
func (c *CAFiles) Current() (*pki.CA, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	stamp, err := c.fileStamp()
	if err != nil || stamp == c.stamp {
		return c.ca, nil
	}
	ca, err := pki.LoadCA(c.certFile, c.keyFile)
	if err != nil {
		return c.ca, nil
	}
	c.ca, c.stamp = ca, stamp
	return c.ca, nil
}

// Static is a CASource that is always the same CA (embedding processes and tests).
type Static struct{ CA *pki.CA }

// Current returns the CA.
func (s Static) Current() (*pki.CA, error) { return s.CA, nil }
