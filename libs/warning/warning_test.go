package warning

import (
	"strings"
	"testing"
	"unicode/utf8"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

func headerBytes(ws []string) int {
	n := 0
	for _, w := range ws {
		h, _ := utilnet.NewWarningHeader(Code, "", w)
		n += len(h)
	}
	return n
}

// The spec's Warning header rules (upstream's recorder).
func TestLimit(t *testing.T) {
	long := strings.Repeat("é", 300) // 300 characters, 600 bytes
	var fill []string
	for i := 0; i < 30; i++ {
		fill = append(fill, strings.Repeat("x", 200)+string(rune('A'+i)))
	}
	for _, tc := range []struct {
		name  string
		in    []string
		check func(t *testing.T, out []string)
	}{
		{"empty and repeated messages are dropped", []string{"a", "", "b", "a"}, func(t *testing.T, out []string) {
			if strings.Join(out, ",") != "a,b" {
				t.Errorf("got %q", out)
			}
		}},
		{"control characters cannot be a header", []string{"ok", "bad\nline"}, func(t *testing.T, out []string) {
			if strings.Join(out, ",") != "ok" {
				t.Errorf("got %q", out)
			}
		}},
		{"within 4096 bytes messages stay whole", []string{long, "short"}, func(t *testing.T, out []string) {
			if len(out) != 2 || out[0] != long {
				t.Errorf("got %d messages, first %d characters", len(out), utf8.RuneCountInString(out[0]))
			}
		}},
		{"over 4096 bytes every message is truncated to 256 characters, the extras dropped", append([]string{long}, fill...), func(t *testing.T, out []string) {
			if len(out) == 0 || utf8.RuneCountInString(out[0]) != MessageMax || !strings.HasPrefix(long, out[0]) {
				t.Fatalf("first message not truncated to %d characters", MessageMax)
			}
			for _, w := range out {
				if utf8.RuneCountInString(w) > MessageMax {
					t.Errorf("a message of %d characters", utf8.RuneCountInString(w))
				}
			}
			if len(out) >= 1+len(fill) {
				t.Errorf("nothing dropped: %d messages", len(out))
			}
			// Upstream stops adding once the total reached the limit: at most one header over.
			if n := headerBytes(out); n > TotalMax+MessageMax*2+16 {
				t.Errorf("%d bytes of headers", n)
			}
			if n := headerBytes(out[:len(out)-1]); n >= TotalMax {
				t.Errorf("kept adding after the limit: %d bytes before the last", n)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, Limit(tc.in)) })
	}
}
