package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
	"platform.io/services/authn/authenticator"
)

// secrets is an in-memory authenticator.Objects holding Secrets: a fake of our own storage read
// (the service wires the storage-backed one and tests it end to end).
type secrets struct {
	authenticator.Objects // other kinds: unused by this method (a call would panic)
	mu                    sync.Mutex
	byKey                 map[string]*corev1.Secret
	fail                  error
}

func (s *secrets) put(sec *corev1.Secret) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byKey[sec.Namespace+"/"+sec.Name] = sec.DeepCopy()
}

func (s *secrets) Secret(_ context.Context, namespace, name string) (*corev1.Secret, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	sec, ok := s.byKey[namespace+"/"+name]
	if !ok {
		return nil, fmt.Errorf("secrets %q: %w", name, authenticator.ErrNotFound)
	}
	return sec.DeepCopy(), nil
}

const (
	tokenID     = "abcdef"
	tokenSecret = "0123456789abcdef"
	token       = tokenID + "." + tokenSecret
)

var now = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// bootstrapSecret is a valid bootstrap token Secret as kubeadm writes it.
func bootstrapSecret() *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: naming.SystemNamespace, Name: "bootstrap-token-" + tokenID},
		Type:       corev1.SecretType(naming.SecretTypeBootstrapToken),
		Data: map[string][]byte{
			"token-id":                       []byte(tokenID),
			"token-secret":                   []byte(tokenSecret),
			"expiration":                     []byte(now.Add(time.Hour).Format(time.RFC3339)),
			"usage-bootstrap-authentication": []byte("true"),
			"usage-bootstrap-signing":        []byte("true"),
			"auth-extra-groups":              []byte("system:bootstrappers:worker,system:bootstrappers:kubeadm:default-node-token"),
		},
	}
}

func newMethod(t testing.TB, log io.Writer) (*Authenticator, *secrets) {
	t.Helper()
	store := &secrets{byKey: map[string]*corev1.Secret{}}
	if log == nil {
		log = io.Discard
	}
	a, err := New(Config{
		Objects: store,
		Logger:  slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:     func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	return a, store
}

func authenticate(a *Authenticator, tok string) (*authenticator.Response, error) {
	return a.Authenticate(context.Background(), &authenticator.Request{Token: tok})
}

// Upstream's identity: system:bootstrap:<id>, no uid, system:bootstrappers plus the extra groups,
// sorted and without duplicates.
func TestAccepted(t *testing.T) {
	a, store := newMethod(t, nil)
	cases := []struct {
		name   string
		edit   func(*corev1.Secret)
		groups []string
	}{
		{"extra groups", func(*corev1.Secret) {}, []string{"system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token", "system:bootstrappers:worker"}},
		{"no extra groups, no expiration", func(s *corev1.Secret) {
			delete(s.Data, "auth-extra-groups")
			delete(s.Data, "expiration")
		}, []string{"system:bootstrappers"}},
		{"the default group as an extra group (not system:bootstrappers:<name>)", func(s *corev1.Secret) {
			s.Data["auth-extra-groups"] = []byte("system:bootstrappers:b,system:bootstrappers:a,system:bootstrappers:b,system:bootstrappers")
		}, nil},
		{"a group of 256 characters", func(s *corev1.Secret) {
			s.Data["auth-extra-groups"] = []byte("system:bootstrappers:" + strings.Repeat("a", 256))
		}, []string{"system:bootstrappers", "system:bootstrappers:" + strings.Repeat("a", 256)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := bootstrapSecret()
			tc.edit(s)
			store.put(s)
			resp, err := authenticate(a, token)
			if tc.groups == nil {
				// "system:bootstrappers" alone is not system:bootstrappers:<name>: refused.
				if !errors.Is(err, ErrInvalidToken) {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u := resp.User; u.Name != "system:bootstrap:abcdef" || u.UID != "" || !slices.Equal(u.Groups, tc.groups) || u.Extra != nil {
				t.Fatalf("user = %+v, want groups %v", u, tc.groups)
			}
		})
	}
	s := bootstrapSecret()
	s.Data["auth-extra-groups"] = []byte("system:bootstrappers:b,system:bootstrappers:a,system:bootstrappers:b")
	store.put(s)
	resp, err := authenticate(a, token)
	if err != nil || !slices.Equal(resp.User.Groups, []string{"system:bootstrappers", "system:bootstrappers:a", "system:bootstrappers:b"}) {
		t.Fatalf("duplicates: %v, %v", resp, err)
	}
}

// Every refusal upstream's authenticator makes, with its generic message; the details only in
// the debug log, which never holds the secret half of the token.
func TestRefusals(t *testing.T) {
	cases := []struct {
		name string
		edit func(*corev1.Secret) *corev1.Secret // nil result: no Secret stored
		log  string
	}{
		{"no secret", func(*corev1.Secret) *corev1.Secret { return nil }, "no secret matches"},
		{"secret in another namespace", func(s *corev1.Secret) *corev1.Secret { s.Namespace = "default"; return s }, "no secret matches"},
		{"being deleted", func(s *corev1.Secret) *corev1.Secret { n := metav1.Now(); s.DeletionTimestamp = &n; return s }, "deleted and awaiting removal"},
		{"opaque secret", func(s *corev1.Secret) *corev1.Secret { s.Type = corev1.SecretTypeOpaque; return s }, "invalid type"},
		{"no data", func(s *corev1.Secret) *corev1.Secret { s.Data = nil; return s }, "invalid type"},
		{"another secret", func(s *corev1.Secret) *corev1.Secret { s.Data["token-secret"] = []byte("fedcba9876543210"); return s }, "token-secret"},
		{"secret missing", func(s *corev1.Secret) *corev1.Secret { delete(s.Data, "token-secret"); return s }, "token-secret"},
		{"another token id", func(s *corev1.Secret) *corev1.Secret { s.Data["token-id"] = []byte("zzzzzz"); return s }, "token-id"},
		{"expired", func(s *corev1.Secret) *corev1.Secret {
			s.Data["expiration"] = []byte(now.Add(-time.Second).Format(time.RFC3339))
			return s
		}, "expired"},
		{"expiring now", func(s *corev1.Secret) *corev1.Secret {
			s.Data["expiration"] = []byte(now.Format(time.RFC3339))
			return s
		}, "expired"},
		{"expiration not RFC 3339", func(s *corev1.Secret) *corev1.Secret { s.Data["expiration"] = []byte("tomorrow"); return s }, "not an RFC 3339 time"},
		{"not for authentication", func(s *corev1.Secret) *corev1.Secret { delete(s.Data, "usage-bootstrap-authentication"); return s }, "usage-bootstrap-authentication"},
		{"authentication false", func(s *corev1.Secret) *corev1.Secret {
			s.Data["usage-bootstrap-authentication"] = []byte("false")
			return s
		}, "usage-bootstrap-authentication"},
		{"authentication True (not exactly true)", func(s *corev1.Secret) *corev1.Secret {
			s.Data["usage-bootstrap-authentication"] = []byte("True")
			return s
		}, "usage-bootstrap-authentication"},
	}
	for _, g := range []string{
		"system:masters",
		"system:bootstrappers:",
		"system:bootstrappers:Worker",
		"system:bootstrappers:worker-",
		"system:bootstrappers:worker:",
		"system:bootstrappers:a b",
		" system:bootstrappers:worker",
		"system:bootstrappers:a,,system:bootstrappers:b",
		"system:bootstrappers:" + strings.Repeat("a", 257),
	} {
		cases = append(cases, struct {
			name string
			edit func(*corev1.Secret) *corev1.Secret
			log  string
		}{"extra group " + g, func(s *corev1.Secret) *corev1.Secret { s.Data["auth-extra-groups"] = []byte(g); return s }, "auth-extra-groups"})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			a, store := newMethod(t, &log)
			if s := tc.edit(bootstrapSecret()); s != nil {
				store.put(s)
			}
			resp, err := authenticate(a, token)
			want := ErrInvalidToken
			if tc.log == "no secret matches" {
				// No Secret: not a bootstrap token, another method may know it.
				want = authenticator.ErrNotMine
			}
			if resp != nil || !errors.Is(err, want) {
				t.Fatalf("Authenticate = %v, %v; want %v", resp, err, want)
			}
			if !strings.Contains(log.String(), tc.log) || !strings.Contains(log.String(), "bootstrap-token-abcdef") {
				t.Fatalf("debug log %q lacks %q", log.String(), tc.log)
			}
			if strings.Contains(log.String(), tokenSecret) || strings.Contains(err.Error(), tokenSecret) {
				t.Fatal("the token's secret leaked")
			}
		})
	}
}

// Only the exact token form is this method's; everything else goes to the next method.
func TestNotMine(t *testing.T) {
	a, store := newMethod(t, nil)
	store.put(bootstrapSecret())
	for _, tok := range []string{"", "abcdef", "abcdef.", "ABCDEF.0123456789abcdef", "abcdef.0123456789abcdeF", "abcdef:0123456789abcdef",
		"abcde.0123456789abcdefg", "abcdefg.0123456789abcde", " abcdef.0123456789abcdef", "abcdef.0123456789abcdef\n",
		"abcdef.0123456789abcdef0", "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ4In0.c2ln", "abcdéf.0123456789abcdef", strings.Repeat("a", 1<<20)} {
		if _, err := authenticate(a, tok); !errors.Is(err, authenticator.ErrNotMine) {
			t.Errorf("%.40q: err = %v, want ErrNotMine", tok, err)
		}
	}
	if a.Name() != "bootstrap-token" {
		t.Fatalf("Name = %q", a.Name())
	}
	if _, err := New(Config{}); err == nil {
		t.Fatal("a method without objects")
	}
}

// A store that cannot answer makes the method undecided, never a refusal.
func TestUnavailable(t *testing.T) {
	a, store := newMethod(t, nil)
	for _, fail := range []error{&authenticator.UnavailableError{Err: errors.New("connection refused")}, errors.New("decoding failed")} {
		store.fail = fail
		if _, err := authenticate(a, token); !authenticator.IsUnavailable(err) {
			t.Errorf("store failing with %v: err = %v", fail, err)
		}
	}
}

var upstreamTokenPattern = regexp.MustCompile(`\A([a-z0-9]{6})\.([a-z0-9]{16})\z`)

var upstreamGroupPattern = regexp.MustCompile(`\Asystem:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]\z`)

// FuzzParseToken checks the parser against upstream's regular expression.
func FuzzParseToken(f *testing.F) {
	for _, s := range []string{token, "abcdef.0123456789abcdeF", "abcdef.0123456789abcde", "abcdef..123456789abcdef", "", "\xff\xfe\xfd\xfc\xfb\xfa.0123456789abcdef"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, secret, ok := ParseToken(s)
		m := upstreamTokenPattern.FindStringSubmatch(s)
		if ok != (m != nil) {
			t.Fatalf("ParseToken(%q) ok=%v, upstream's pattern says %v", s, ok, m != nil)
		}
		if ok && (id != m[1] || secret != m[2]) {
			t.Fatalf("ParseToken(%q) = %q, %q; want %q, %q", s, id, secret, m[1], m[2])
		}
	})
}

// FuzzGroups checks auth-extra-groups parsing against upstream's group pattern.
func FuzzGroups(f *testing.F) {
	for _, s := range []string{"", "system:bootstrappers:a", "system:bootstrappers:a,system:bootstrappers:b:c-d", "system:bootstrappers:", "x,y", ",", "system:bootstrappers:A"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, extra string) {
		groups, ok := Groups(extra)
		want := true
		if extra != "" {
			for _, g := range strings.Split(extra, ",") {
				if !upstreamGroupPattern.MatchString(g) {
					want = false
				}
			}
		}
		if ok != want {
			t.Fatalf("Groups(%q) ok=%v, upstream's pattern says %v", extra, ok, want)
		}
		if ok && (!slices.IsSorted(groups) || !slices.Contains(groups, DefaultGroup) || len(slices.Compact(slices.Clone(groups))) != len(groups)) {
			t.Fatalf("Groups(%q) = %v: not sorted, unique and with the default group", extra, groups)
		}
	})
}

// BenchmarkAuthenticateBootstrapToken is the cost of one cold decision (the Secret read from
// memory here; the service adds its storage read).
func BenchmarkAuthenticateBootstrapToken(b *testing.B) {
	a, store := newMethod(b, nil)
	store.put(bootstrapSecret())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := authenticate(a, token); err != nil {
			b.Fatal(err)
		}
	}
}
