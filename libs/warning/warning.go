// Package warning applies the spec's rules on Warning response headers (upstream's warning
// recorder): which messages are sent, and how they are truncated and dropped when they would
// exceed the size limits. The gateway applies them to every response; the admission webhook
// dispatcher to what webhooks add.
package warning

import (
	"unicode/utf8"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// The spec's limits on Warning headers (upstream's warning recorder).
const (
	// TotalMax is the size of all Warning headers of a response, beyond which messages
	// are truncated, then dropped.
	TotalMax = 4096
	// MessageMax is the length (in characters) messages are truncated to once the total
	// would exceed TotalMax.
	MessageMax = 256
)

// Code is the Warning header's code for API warnings ("299 - \"message\"").
const Code = 299

// Limit applies the Warning header rules to the warnings of one response, as upstream's
// recorder does: empty and repeated messages are dropped, and messages that cannot be a header
// value (control characters, invalid UTF-8); while all headers fit in TotalMax bytes
// every message is kept whole; once they would not, every message is truncated to
// MessageMax characters, and the messages arriving after the truncated ones reached the
// limit are dropped. The result is in order.
func Limit(warnings []string) []string {
	var out []string
	for _, w := range LimitEach(warnings) {
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}

// limitWarnings returns, for each input, the text to send ("" when it is dropped).
func LimitEach(warnings []string) []string {
	out := make([]string, len(warnings))
	seen := map[string]bool{}
	written := 0
	truncating := false
	var kept []int
	for i, text := range warnings {
		if text == "" {
			continue
		}
		if truncating && written >= TotalMax {
			break
		}
		if seen[text] {
			continue
		}
		seen[text] = true
		kept = append(kept, i)
		t := text
		if truncating {
			t = truncateRunes(t, MessageMax)
		}
		header, err := utilnet.NewWarningHeader(Code, "", t)
		if err != nil {
			continue
		}
		if truncating || written+len(header) <= TotalMax {
			written += len(header)
			out[i] = t
			continue
		}
		// Over the limit: truncate every message so far and start counting again.
		truncating = true
		written = 0
		for _, j := range kept {
			out[j] = ""
			tt := truncateRunes(warnings[j], MessageMax)
			if h, err := utilnet.NewWarningHeader(Code, "", tt); err == nil {
				written += len(h)
				out[j] = tt
			}
		}
	}
	return out
}

func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
