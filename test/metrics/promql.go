// Package metrics checks that the Grafana dashboards shipped under build/dashboards query metrics
// the services really expose: it starts the split stack and the all-in-one as real processes,
// drives requests through every service, scrapes each service's /metrics and matches every metric
// name of every panel's PromQL against the scrapes.
package metrics

import (
	"fmt"
	"strings"
)

// promqlWords are PromQL's keywords, aggregation operators and literals: identifiers that are
// never metric names.
var promqlWords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "and": true, "or": true, "unless": true, "offset": true, "atan2": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true, "inf": true, "nan": true,
}

// labelListWords are the keywords followed by a parenthesised list of label names.
var labelListWords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdent(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// MetricNames lists the metric names a PromQL expression selects: identifiers that are not
// keywords, aggregation operators or function calls (an identifier followed by "("), outside label
// matchers ({...}), ranges ([...]), strings, numbers, durations, label lists (by (...)) and
// Grafana variables ($var, ${var}). It is a tokenizer, not a parser: it checks only that brackets
// and strings are closed, which is enough to read dashboards written for it.
func MetricNames(expr string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	labelList := false
	depth := 0
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{' || c == '[':
			end, err := skipGroup(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '}' || c == ']':
			return nil, fmt.Errorf("unbalanced %q at %d in %q", c, i, expr)
		case c == '$':
			i++
			if i < len(expr) && expr[i] == '{' {
				end := strings.IndexByte(expr[i:], '}')
				if end < 0 {
					return nil, fmt.Errorf("unclosed ${ at %d in %q", i, expr)
				}
				i += end + 1
				continue
			}
			for i < len(expr) && isIdent(expr[i]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			// A number or a duration (5m, 1e-3, 0x1f).
			for i < len(expr) && (isIdent(expr[i]) || expr[i] == '.' || (expr[i] == '-' || expr[i] == '+') && (expr[i-1] == 'e' || expr[i-1] == 'E')) {
				i++
			}
		case isIdentStart(c):
			start := i
			for i < len(expr) && isIdent(expr[i]) {
				i++
			}
			word := expr[start:i]
			if promqlWords[strings.ToLower(word)] {
				labelList = labelList || labelListWords[strings.ToLower(word)]
				continue
			}
			j := i
			for j < len(expr) && (expr[j] == ' ' || expr[j] == '\t' || expr[j] == '\n') {
				j++
			}
			if j < len(expr) && expr[j] == '(' {
				continue // a function call
			}
			if !seen[word] {
				seen[word] = true
				out = append(out, word)
			}
		case c == '(':
			if labelList {
				end := strings.IndexByte(expr[i:], ')')
				if end < 0 {
					return nil, fmt.Errorf("unclosed label list at %d in %q", i, expr)
				}
				i += end + 1
				labelList = false
				continue
			}
			depth++
			i++
		case c == ')':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("unbalanced ) at %d in %q", i, expr)
			}
			i++
		default:
			i++
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unclosed ( in %q", expr)
	}
	return out, nil
}

// skipString returns the index after the string literal starting at i.
func skipString(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unclosed string at %d in %q", i, s)
}

// skipGroup returns the index after the {...} or [...] starting at i (strings inside may hold
// brackets).
func skipGroup(s string, i int) (int, error) {
	closer := map[byte]byte{'{': '}', '[': ']'}[s[i]]
	for j := i + 1; j < len(s); {
		switch {
		case s[j] == '"' || s[j] == '\'' || s[j] == '`':
			end, err := skipString(s, j)
			if err != nil {
				return 0, err
			}
			j = end
		case s[j] == closer:
			return j + 1, nil
		default:
			j++
		}
	}
	return 0, fmt.Errorf("unclosed %q at %d in %q", s[i], i, s)
}
