package x509

import (
	"crypto/sha256"
	stdx509 "crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/utils/lru"

	"platform.io/libs/service"
)

// DefaultCacheSize bounds the chain verification cache: one entry per distinct leaf certificate.
const DefaultCacheSize = 4096

// negativeTTL is how long a failed verification is remembered. Failures are cached (a client that
// retries with a bad certificate should not cost a signature check per request) but only briefly,
// since some of them are temporary ("not yet valid").
const negativeTTL = 10 * time.Second

// Verifier verifies client certificate chains (leaf first, the rest untrusted intermediates) for
// client authentication against a CA bundle file that is re-read when it changes. Results are
// cached by the SHA-256 of the leaf (and of the intermediates presented with it), in a bounded
// LRU, because chain verification is a few signature checks while the same clients present the
// same certificates on every request (the idea of upstream's verify-options cache). A verified
// chain is remembered while all its certificates are valid, a failure for 10 seconds; an entry
// computed with a previous version of the CA bundle is never used.
type Verifier struct {
	cas   *service.CAPool
	cache *lru.Cache
	// pool is the CA pool of the last verification; when the bundle changes the cache is
	// emptied (its entries could not be used any more anyway).
	pool atomic.Pointer[stdx509.CertPool]

	hits, misses atomic.Int64
}

// cached is one verification outcome.
type cached struct {
	// pool is the CA pool the outcome was computed with: an entry from another pool is stale.
	pool *stdx509.CertPool
	// err is nil for a chain that verified.
	err error
	// For a verified chain: the window in which every certificate of the chain is valid.
	notBefore, notAfter time.Time
	// For a failure: when it is forgotten.
	expires time.Time
	// intermediate is the digest of the intermediates the outcome was computed with: the same
	// leaf presented with other intermediates may chain differently, so it is another question.
	intermediate [sha256.Size]byte
}

// NewVerifier reads caFile (a PEM bundle) and verifies chains against it. cacheSize bounds the
// cache (0: DefaultCacheSize).
func NewVerifier(caFile string, cacheSize int) (*Verifier, error) {
	if caFile == "" {
		return nil, errors.New("no CA file")
	}
	cas, err := service.NewCAPool(caFile)
	if err != nil {
		return nil, err
	}
	if cacheSize <= 0 {
		cacheSize = DefaultCacheSize
	}
	return &Verifier{cas: cas, cache: lru.New(cacheSize)}, nil
}

// Verify checks that certs[0] chains to the CA bundle through certs[1:] and is valid for client
// authentication now. The error is crypto/x509's (upstream wraps it with the leaf's identifier).
func (v *Verifier) Verify(certs []*stdx509.Certificate) error {
	if len(certs) == 0 || certs[0] == nil {
		return errors.New("no certificate")
	}
	pool, err := v.cas.Get()
	if err != nil {
		return err
	}
	if old := v.pool.Swap(pool); old != nil && old != pool {
		v.cache.Clear()
	}
	leaf := certs[0]
	key := sha256.Sum256(leaf.Raw)
	inter := intermediatesDigest(certs[1:])
	now := time.Now()
	if e, ok := v.cache.Get(key); ok {
		c := e.(*cached)
		switch {
		case c.pool != pool:
			// The bundle changed since: recompute.
		case c.intermediate != inter:
			// Same leaf, other intermediates: the chain may come out differently.
		case c.err == nil && !now.Before(c.notBefore) && now.Before(c.notAfter):
			v.hits.Add(1)
			return nil
		case c.err != nil && now.Before(c.expires):
			v.hits.Add(1)
			return c.err
		}
	}
	v.misses.Add(1)
	opts := stdx509.VerifyOptions{
		Roots:       pool,
		CurrentTime: now,
		KeyUsages:   []stdx509.ExtKeyUsage{stdx509.ExtKeyUsageClientAuth},
	}
	if len(certs) > 1 {
		opts.Intermediates = stdx509.NewCertPool()
		for _, c := range certs[1:] {
			// Unparsed entries cannot be part of a chain (and would fail the whole
			// verification): skip them.
			if c != nil && len(c.Raw) > 0 {
				opts.Intermediates.AddCert(c)
			}
		}
	}
	chains, err := leaf.Verify(opts)
	entry := &cached{pool: pool, err: err, intermediate: inter}
	if err != nil {
		entry.expires = now.Add(negativeTTL)
	} else {
		entry.notBefore, entry.notAfter = validity(chains[0])
	}
	v.cache.Add(key, entry)
	return err
}

// CacheStats reports how many verifications the cache answered and how many it did not.
func (v *Verifier) CacheStats() (hits, misses int64) { return v.hits.Load(), v.misses.Load() }

// validity is the window in which every certificate of chain is valid.
func validity(chain []*stdx509.Certificate) (notBefore, notAfter time.Time) {
	for i, c := range chain {
		if i == 0 || c.NotBefore.After(notBefore) {
			notBefore = c.NotBefore
		}
		if i == 0 || c.NotAfter.Before(notAfter) {
			notAfter = c.NotAfter
		}
	}
	return notBefore, notAfter
}

func intermediatesDigest(certs []*stdx509.Certificate) [sha256.Size]byte {
	if len(certs) == 0 {
		return [sha256.Size]byte{}
	}
	h := sha256.New()
	var n [8]byte
	for _, c := range certs {
		if c == nil {
			continue
		}
		// Length-prefixed, so that no two different lists hash the same input.
		binary.BigEndian.PutUint64(n[:], uint64(len(c.Raw)))
		h.Write(n[:])
		h.Write(c.Raw)
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// CertificateIdentifier names a certificate in error messages as upstream does: serial number,
// subject key id and authority key id (colon-separated upper-case hex).
func CertificateIdentifier(c *stdx509.Certificate) string {
	serial := "<nil>"
	if c.SerialNumber != nil {
		serial = c.SerialNumber.String()
	}
	return fmt.Sprintf("SN=%s, SKID=%s, AKID=%s", serial, colonHex(c.SubjectKeyId), colonHex(c.AuthorityKeyId))
}

func colonHex(b []byte) string {
	h := strings.ToUpper(hex.EncodeToString(b))
	var sb strings.Builder
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			sb.WriteByte(':')
		}
		sb.WriteString(h[i : i+2])
	}
	return sb.String()
}
