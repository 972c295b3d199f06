package main

import (
	"bytes"
	"errors"
	"fmt"
)

// countListItems counts the elements of the top-level "items" array of a JSON list without
// decoding them: it follows only strings and nesting, so a 1 MB list costs about a millisecond
// of the client's CPU instead of the tens of milliseconds a full decode would (the client shares
// the machine with the server it loads). It does not validate the JSON beyond what it walks.
func countListItems(b []byte) (int, error) {
	depth := 0
	for i := 0; i < len(b); {
		switch b[i] {
		case '"':
			end, err := stringEnd(b, i)
			if err != nil {
				return 0, err
			}
			if depth == 1 && bytes.Equal(b[i+1:end-1], []byte("items")) {
				j := skipSpace(b, end)
				if j < len(b) && b[j] == ':' {
					return countArray(b, skipSpace(b, j+1))
				}
			}
			i = end
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth < 0 {
				return 0, errors.New("unbalanced JSON")
			}
		}
		i++
	}
	return 0, errors.New(`no "items" in the list`)
}

// countArray counts the elements of the array that starts at b[i] (null counts as empty).
func countArray(b []byte, i int) (int, error) {
	if bytes.HasPrefix(b[i:], []byte("null")) {
		return 0, nil
	}
	if i >= len(b) || b[i] != '[' {
		return 0, fmt.Errorf(`"items" is not an array`)
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return 0, nil
	}
	n, depth := 1, 0
	for i < len(b) {
		switch b[i] {
		case '"':
			end, err := stringEnd(b, i)
			if err != nil {
				return 0, err
			}
			i = end
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				if b[i] != ']' {
					return 0, errors.New("unbalanced JSON")
				}
				return n, nil
			}
			depth--
		case ',':
			if depth == 0 {
				n++
			}
		}
		i++
	}
	return 0, errors.New(`truncated JSON: "items" does not end`)
}

// stringEnd returns the index just past the string that starts with the quote at b[i].
func stringEnd(b []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, errors.New("truncated JSON: unterminated string")
		}
		j += k
		// The quote is escaped if an odd number of backslashes precede it.
		bs := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			bs++
		}
		if bs%2 == 0 {
			return j + 1, nil
		}
		j++
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}
