package serviceaccount

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Test keys are generated once per test binary: RSA generation is slow on a shared machine.
var (
	keysOnce sync.Once
	rsaKey   *rsa.PrivateKey
	rsaKey2  *rsa.PrivateKey
	ecKeys   map[string]*ecdsa.PrivateKey // by JWS algorithm
)

func testKeys(t testing.TB) {
	t.Helper()
	keysOnce.Do(func() {
		var err error
		if rsaKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if rsaKey2, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		ecKeys = map[string]*ecdsa.PrivateKey{}
		for alg, c := range map[string]elliptic.Curve{"ES256": elliptic.P256(), "ES384": elliptic.P384(), "ES512": elliptic.P521()} {
			k, err := ecdsa.GenerateKey(c, rand.Reader)
			if err != nil {
				panic(err)
			}
			ecKeys[alg] = k
		}
	})
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// must returns an encoding that cannot fail for the keys tests generate.
func must(der []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return der
}

func writeFile(t testing.TB, name string, parts ...[]byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	var data []byte
	for _, part := range parts {
		data = append(data, part...)
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func selfSigned(t testing.TB, key crypto.Signer) []byte {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "service-account-signer"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	return must(x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key))
}

func sameKey(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(equaler)
	return ok && e.Equal(b)
}

// Upstream reads --service-account-key-file as keyutil does: public keys, certificates and private
// keys, several per file, other blocks tolerated.
func TestLoadPublicKeysEncodings(t *testing.T) {
	testKeys(t)
	ec := ecKeys["ES256"]
	cases := []struct {
		name string
		data []byte
		want crypto.PublicKey
	}{
		{"PKIX RSA public key", pemBlock("PUBLIC KEY", must(x509.MarshalPKIXPublicKey(&rsaKey.PublicKey))), &rsaKey.PublicKey},
		{"PKIX EC public key", pemBlock("PUBLIC KEY", must(x509.MarshalPKIXPublicKey(&ec.PublicKey))), &ec.PublicKey},
		{"PKCS#1 RSA public key", pemBlock("RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(&rsaKey.PublicKey)), &rsaKey.PublicKey},
		{"PKCS#1 RSA private key", pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey)), &rsaKey.PublicKey},
		{"PKCS#8 RSA private key", pemBlock("PRIVATE KEY", must(x509.MarshalPKCS8PrivateKey(rsaKey))), &rsaKey.PublicKey},
		{"SEC1 EC private key", pemBlock("EC PRIVATE KEY", must(x509.MarshalECPrivateKey(ec))), &ec.PublicKey},
		{"PKCS#8 EC private key", pemBlock("PRIVATE KEY", must(x509.MarshalPKCS8PrivateKey(ec))), &ec.PublicKey},
		{"RSA certificate", pemBlock("CERTIFICATE", selfSigned(t, rsaKey)), &rsaKey.PublicKey},
		{"EC certificate", pemBlock("CERTIFICATE", selfSigned(t, ec)), &ec.PublicKey},
		{"mislabelled block (upstream tries every encoding)", pemBlock("RSA PRIVATE KEY", must(x509.MarshalPKCS8PrivateKey(ec))), &ec.PublicKey},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := writeFile(t, "keys.pem", tc.data)
			keys, err := LoadPublicKeys(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) != 1 || !sameKey(tc.want, keys[0]) {
				t.Fatalf("got %d keys %T, want the test key", len(keys), keys)
			}
		})
	}
}

func TestLoadPublicKeysSeveralPerFileAndFiles(t *testing.T) {
	testKeys(t)
	ec := ecKeys["ES384"]
	edPub, edPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_ = edPub
	f1 := writeFile(t, "a.pem",
		pemBlock("EC PARAMETERS", []byte{0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22}),
		pemBlock("EC PRIVATE KEY", must(x509.MarshalECPrivateKey(ec))),
		pemBlock("PRIVATE KEY", must(x509.MarshalPKCS8PrivateKey(edPriv))), // not RSA or ECDSA: skipped
		[]byte("some text between blocks\n"),
		pemBlock("PUBLIC KEY", must(x509.MarshalPKIXPublicKey(&rsaKey.PublicKey))),
	)
	f2 := writeFile(t, "b.pem", pemBlock("CERTIFICATE", selfSigned(t, rsaKey2)))
	keys, err := LoadPublicKeys(f1, f2)
	if err != nil {
		t.Fatal(err)
	}
	want := []crypto.PublicKey{&ec.PublicKey, &rsaKey.PublicKey, &rsaKey2.PublicKey}
	if len(keys) != len(want) {
		t.Fatalf("got %d keys, want %d", len(keys), len(want))
	}
	for i := range want {
		if !sameKey(want[i], keys[i]) {
			t.Errorf("key %d is not the expected one", i)
		}
	}
}

func TestLoadPublicKeysErrorsNameTheFile(t *testing.T) {
	testKeys(t)
	_, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	p224, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"empty":                         nil,
		"not PEM":                       []byte("hello"),
		"only an ed25519 key":           pemBlock("PRIVATE KEY", must(x509.MarshalPKCS8PrivateKey(edPriv))),
		"only a P-224 key (no JWS alg)": pemBlock("EC PRIVATE KEY", must(x509.MarshalECPrivateKey(p224))),
		"garbage in a key block":        pemBlock("PUBLIC KEY", []byte("garbage")),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			f := writeFile(t, "bad.pem", data)
			_, err := LoadPublicKeys(f)
			if err == nil || !strings.Contains(err.Error(), f) || !strings.Contains(err.Error(), "does not contain any valid RSA or ECDSA public keys") {
				t.Fatalf("err = %v, want one naming %s", err, f)
			}
		})
	}
	if _, err := LoadPublicKeys(filepath.Join(t.TempDir(), "missing.pem")); err == nil {
		t.Fatal("a missing file loaded")
	}
}

func TestLoadSigningKey(t *testing.T) {
	testKeys(t)
	ec := ecKeys["ES512"]
	cases := []struct {
		name string
		data [][]byte
		want crypto.PublicKey
	}{
		{"PKCS#1 RSA", [][]byte{pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey))}, &rsaKey.PublicKey},
		{"PKCS#8 RSA", [][]byte{pemBlock("PRIVATE KEY", must(x509.MarshalPKCS8PrivateKey(rsaKey)))}, &rsaKey.PublicKey},
		{"SEC1 EC after EC PARAMETERS (openssl's output)", [][]byte{
			pemBlock("EC PARAMETERS", []byte{0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x23}),
			pemBlock("EC PRIVATE KEY", must(x509.MarshalECPrivateKey(ec))),
		}, &ec.PublicKey},
		{"PKCS#8 EC", [][]byte{pemBlock("PRIVATE KEY", must(x509.MarshalPKCS8PrivateKey(ec)))}, &ec.PublicKey},
		{"first key of a certificate bundle", [][]byte{
			pemBlock("CERTIFICATE", selfSigned(t, rsaKey2)),
			pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey)),
			pemBlock("EC PRIVATE KEY", must(x509.MarshalECPrivateKey(ec))),
		}, &rsaKey.PublicKey},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, err := LoadSigningKey(writeFile(t, "key.pem", tc.data...))
			if err != nil {
				t.Fatal(err)
			}
			if !sameKey(tc.want, k.Public()) {
				t.Fatal("loaded another key")
			}
		})
	}
	for name, data := range map[string][]byte{
		"public key only":  pemBlock("PUBLIC KEY", must(x509.MarshalPKIXPublicKey(&rsaKey.PublicKey))),
		"certificate only": pemBlock("CERTIFICATE", selfSigned(t, rsaKey)),
		"empty":            nil,
	} {
		t.Run(name, func(t *testing.T) {
			f := writeFile(t, "key.pem", data)
			_, err := LoadSigningKey(f)
			if err == nil || !strings.Contains(err.Error(), f) {
				t.Fatalf("err = %v, want one naming the file", err)
			}
		})
	}
}

// The kid is upstream's: base64url (no padding) of SHA-256 over the PKIX DER of the public key.
func TestKeyID(t *testing.T) {
	testKeys(t)
	der := must(x509.MarshalPKIXPublicKey(&rsaKey.PublicKey))
	sum := sha256.Sum256(der)
	want := base64.RawURLEncoding.EncodeToString(sum[:])
	got, err := KeyID(&rsaKey.PublicKey)
	if err != nil || got != want {
		t.Fatalf("KeyID = %q, %v; want %q", got, err, want)
	}
	if len(got) != 43 || strings.ContainsAny(got, "=+/") {
		t.Fatalf("kid %q is not unpadded base64url of 32 bytes", got)
	}
	other, _ := KeyID(&rsaKey2.PublicKey)
	if other == got {
		t.Fatal("two keys share a kid")
	}
}
