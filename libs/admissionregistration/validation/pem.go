package validation

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// checkPEMCertificates requires data to be PEM blocks of which at least one is a parseable
// certificate, and nothing else but whitespace.
func checkPEMCertificates(data []byte) error {
	certs := 0
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("must be a PEM-encoded bundle of CA certificates: certificate %d: %v", certs+1, err)
		}
		certs++
	}
	if certs == 0 {
		return errors.New("must be a PEM-encoded bundle of CA certificates: no certificate found")
	}
	return nil
}
