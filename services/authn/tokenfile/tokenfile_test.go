package tokenfile

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"platform.io/services/authn/authenticator"
)

func writeFile(t testing.TB, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func logger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

func authenticate(a *Authenticator, tok string) (*authenticator.User, error) {
	resp, err := a.Authenticate(context.Background(), &authenticator.Request{Token: tok})
	if err != nil {
		return nil, err
	}
	return resp.User, nil
}

// The records of upstream's token file tests: optional groups column, extra columns ignored,
// quoting as CSV, blank lines skipped.
func TestRecords(t *testing.T) {
	f := writeFile(t, `token1,user1,uid1,"group1,group2"
token2,user2,uid2
token3,user3,uid3,"group2"

token4,user4,uid4,""
token5,user5,uid5,group5
token6,user6,uid6,group5,otherdata
token7,user7,uid7,"group1,group2",otherdata
"tok,en8","user 8",uid8
token9,user9,uid9,"a,,b,"`+"\r\n"+`token10,user10,uid10`+"\r\n")
	a, err := New(Config{File: f, Logger: logger(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]authenticator.User{
		"token1":  {Name: "user1", UID: "uid1", Groups: []string{"group1", "group2"}},
		"token2":  {Name: "user2", UID: "uid2"},
		"token3":  {Name: "user3", UID: "uid3", Groups: []string{"group2"}},
		"token4":  {Name: "user4", UID: "uid4"},
		"token5":  {Name: "user5", UID: "uid5", Groups: []string{"group5"}},
		"token6":  {Name: "user6", UID: "uid6", Groups: []string{"group5"}},
		"token7":  {Name: "user7", UID: "uid7", Groups: []string{"group1", "group2"}},
		"tok,en8": {Name: "user 8", UID: "uid8"},
		"token9":  {Name: "user9", UID: "uid9", Groups: []string{"a", "b"}},
		"token10": {Name: "user10", UID: "uid10"},
	}
	for tok, want := range cases {
		u, err := authenticate(a, tok)
		if err != nil {
			t.Errorf("%s: %v", tok, err)
			continue
		}
		if u.Name != want.Name || u.UID != want.UID || !slices.Equal(u.Groups, want.Groups) || u.Extra != nil {
			t.Errorf("%s: user %+v, want %+v", tok, u, want)
		}
	}
	if a.Len() != len(cases) {
		t.Errorf("Len = %d, want %d", a.Len(), len(cases))
	}
	for _, tok := range []string{"", "token", "token1 ", "TOKEN1", "user1", strings.Repeat("x", 1<<20)} {
		if _, err := authenticate(a, tok); !errors.Is(err, authenticator.ErrNotMine) {
			t.Errorf("%.20q: err = %v, want ErrNotMine", tok, err)
		}
	}
	if a.Name() != "token-file" {
		t.Errorf("Name = %q", a.Name())
	}
}

// A duplicate token keeps its last record; an empty token is skipped; both are warned about by
// line, without the token.
func TestDuplicatesAndEmptyTokens(t *testing.T) {
	var log bytes.Buffer
	f := writeFile(t, "secret-token,first,1\n,nobody,2\nsecret-token,second,3,admins\n")
	a, err := New(Config{File: f, Logger: logger(&log)})
	if err != nil {
		t.Fatal(err)
	}
	u, err := authenticate(a, "secret-token")
	if err != nil || u.Name != "second" || u.UID != "3" || !slices.Equal(u.Groups, []string{"admins"}) {
		t.Fatalf("duplicate: %+v, %v", u, err)
	}
	if _, err := authenticate(a, ""); !errors.Is(err, authenticator.ErrNotMine) {
		t.Fatalf("empty token: %v", err)
	}
	out := log.String()
	if !strings.Contains(out, "duplicate token") || !strings.Contains(out, "line=3") || !strings.Contains(out, "empty token") || !strings.Contains(out, "line=2") {
		t.Fatalf("warnings: %s", out)
	}
	if strings.Contains(out, "secret-token") {
		t.Fatal("a token reached the log")
	}
}

// Callers may change what they get (they add system:authenticated); the file's users stay as read.
func TestUserIsACopy(t *testing.T) {
	a, err := Parse(strings.NewReader(`t,u,1,"g"`), "inline", nil)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := authenticate(a, "t")
	u.Groups = append(u.Groups, "system:authenticated")
	u.Groups[0] = "changed"
	u.Name = "changed"
	again, _ := authenticate(a, "t")
	if again.Name != "u" || !slices.Equal(again.Groups, []string{"g"}) {
		t.Fatalf("the stored user changed: %+v", again)
	}
}

// A file that cannot be read or parsed stops the start, naming the file and the line.
func TestErrors(t *testing.T) {
	cases := map[string]struct {
		content string
		want    []string
	}{
		"two columns":  {"t1,u1,1\nt2,u2\n", []string{"must have at least 3 columns", "found 2 on line 2"}},
		"one column":   {"\n\nlonely\n", []string{"found 1 on line 3"}},
		"bare quote":   {"t1,u1,1\nt\"2,u2,2\n", []string{"line 2", "bare \" in non-quoted-field"}},
		"open quote":   {"t1,u1,\"1\n", []string{"extraneous or missing \" in quoted-field"}},
		"quote inside": {"t1,\"u\"1\",1\n", []string{"line 1"}},
	}
	for name, tc := range cases {
		f := writeFile(t, tc.content)
		_, err := New(Config{File: f, Logger: logger(io.Discard)})
		if err == nil {
			t.Errorf("%s: parsed", name)
			continue
		}
		for _, w := range append(tc.want, f, "--token-auth-file") {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: err %q lacks %q", name, err, w)
			}
		}
	}
	if _, err := New(Config{File: filepath.Join(t.TempDir(), "missing.csv")}); err == nil || !strings.Contains(err.Error(), "missing.csv") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := New(Config{}); err == nil {
		t.Error("no file: no error")
	}
	// An empty file is valid (upstream: no tokens).
	a, err := New(Config{File: writeFile(t, "")})
	if err != nil || a.Len() != 0 {
		t.Errorf("empty file: %v, %v", a, err)
	}
}

// FuzzParse feeds arbitrary files to the reader: never a panic, and every token it keeps
// authenticates as a user with no empty group.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"token1,user1,uid1,\"group1,group2\"\ntoken2,user2,uid2\n",
		"\n\n",
		"a,b\n",
		"\"a\"\"b\",c,d,\"\"\n",
		"x,y,z,\"unterminated\n",
		"\xef\xbb\xbftok,u,1\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Parse(bytes.NewReader(data), "fuzz", logger(io.Discard))
		if err != nil {
			return
		}
		for tok := range a.tokens {
			u, err := authenticate(a, tok)
			if err != nil || tok == "" || slices.Contains(u.Groups, "") {
				t.Fatalf("token %q: %+v, %v", tok, u, err)
			}
		}
	})
}

// FuzzRoundTrip writes one record with encoding/csv and reads it back: whatever the fields hold
// (commas, quotes, newlines), the token authenticates as that user.
func FuzzRoundTrip(f *testing.F) {
	f.Add("token", "user", "uid", "g1,g2")
	f.Add("to\"ken", "us,er", "u\nid", "")
	f.Add("", "user", "uid", "g")
	f.Fuzz(func(t *testing.T, tok, name, uid, groups string) {
		if strings.ContainsRune(tok+name+uid+groups, '\r') {
			t.Skip("CSV turns \\r\\n into \\n inside quoted fields")
		}
		var buf bytes.Buffer
		w := csv.NewWriter(&buf)
		if err := w.Write([]string{tok, name, uid, groups}); err != nil {
			t.Skip(err)
		}
		w.Flush()
		a, err := Parse(&buf, "fuzz", logger(io.Discard))
		if err != nil {
			// encoding/csv writes what it reads, except a record that is a lone empty field.
			t.Fatalf("reading back %q: %v", buf.String(), err)
		}
		u, err := authenticate(a, tok)
		if tok == "" {
			if !errors.Is(err, authenticator.ErrNotMine) {
				t.Fatalf("empty token: %v", err)
			}
			return
		}
		var want []string
		for _, g := range strings.Split(groups, ",") {
			if g != "" {
				want = append(want, g)
			}
		}
		if err != nil || u.Name != name || u.UID != uid || !slices.Equal(u.Groups, want) {
			t.Fatalf("read back %+v, %v; want %q %q %v", u, err, name, uid, want)
		}
	})
}

// BenchmarkAuthenticateTokenFile is the cost of one decision against a file of 10,000 tokens.
func BenchmarkAuthenticateTokenFile(b *testing.B) {
	var sb strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&sb, "token-%040d,user-%d,uid-%d,\"group-a,group-b\"\n", i, i, i)
	}
	a, err := Parse(strings.NewReader(sb.String()), "bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	tok := fmt.Sprintf("token-%040d", 4242)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := authenticate(a, tok); err != nil {
			b.Fatal(err)
		}
	}
}
