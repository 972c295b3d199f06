package crd

import (
	"net"
	"net/mail"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// valueStringFormats are the string formats upstream validates in custom
// resources, keyed by name without dashes (so "date-time" and "datetime" are
// the same format, as upstream normalizes them). Other formats (e.g.
// int32 on a string, float, k8s-specific ones) are ignored, as upstream
// strips unsupported formats from the schema before validating.
var valueStringFormats = map[string]func(string) bool{
	"bsonobjectid": valueIsBSONObjectID,
	"uri":          valueIsURI,
	"email":        valueIsEmail,
	"hostname":     valueIsHostname,
	"ipv4":         valueIsIPv4,
	"ipv6":         valueIsIPv6,
	"cidr":         valueIsCIDR,
	"mac":          valueIsMAC,
	"uuid":         valueRegexpFormat(`(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$`),
	"uuid3":        valueRegexpFormat(`(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$`),
	"uuid4":        valueRegexpFormat(`(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$`),
	"uuid5":        valueRegexpFormat(`(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$`),
	"isbn":         func(s string) bool { return valueIsISBN10(s) || valueIsISBN13(s) },
	"isbn10":       valueIsISBN10,
	"isbn13":       valueIsISBN13,
	"creditcard":   valueIsCreditCard,
	"ssn":          func(s string) bool { return len(s) == 11 && valueSSN.MatchString(s) },
	"hexcolor":     valueRegexpFormat(`^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$`),
	"rgbcolor":     valueRegexpFormat(`^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$`),
	"byte":         valueRegexpFormat(`^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$`),
	"password":     func(string) bool { return true },
	"date":         valueIsDate,
	"datetime":     valueIsDateTime,
	"duration":     valueIsDuration,
}

var (
	// valueHostname is the hostname format: a single label, or dotted labels
	// ending in an alphabetic top-level label (unicode letters and symbols
	// allowed, as upstream does).
	valueHostname = regexp.MustCompile(`^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$`)
	// valueSSN is a U.S. social security number.
	valueSSN = regexp.MustCompile(`^\d{3}[- ]?\d{2}[- ]?\d{4}$`)
	// valueTimeOfDay is the part of a date-time after the "T".
	valueTimeOfDay = regexp.MustCompile(`^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$`)
	// valueCreditCardPrefix matches the digits of the known card numbering schemes.
	valueCreditCardPrefix = regexp.MustCompile(`^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11})$`)
	// valueDurationPart is one "<number> <unit>" of a Scala-style duration.
	valueDurationPart = regexp.MustCompile(`((\d+)\s*([A-Za-zµ]+))`)
)

// valueDurationUnits lists the accepted spellings of each duration unit; the
// last spelling also matches as a prefix ("hours", "minutes").
var valueDurationUnits = [][]string{
	{"ns", "nano"}, {"us", "µs", "micro"}, {"ms", "milli"}, {"s", "sec"},
	{"m", "min"}, {"h", "hr", "hour"}, {"d", "day"}, {"w", "wk", "week"},
}

// valueRegexpFormat returns a format check matching re.
func valueRegexpFormat(re string) func(string) bool {
	return regexp.MustCompile(re).MatchString
}

// valueFormatCheck returns the check for a string format, or nil when the
// format is not validated.
func valueFormatCheck(format string) func(string) bool {
	if format == "" {
		return nil
	}
	return valueStringFormats[strings.ReplaceAll(format, "-", "")]
}

// valueIsDate reports whether s is an RFC 3339 full-date (2006-01-02).
func valueIsDate(s string) bool {
	_, err := time.Parse("2006-01-02", s)
	return err == nil
}

// valueIsDateTime reports whether s is an RFC 3339 date-time
// (2006-01-02T15:04:05Z, fractions and offsets allowed, case-insensitive).
func valueIsDateTime(s string) bool {
	if len(s) < 4 {
		return false
	}
	parts := strings.Split(strings.ToLower(s), "t")
	if len(parts) < 2 || !valueIsDate(parts[0]) {
		return false
	}
	m := valueTimeOfDay.FindStringSubmatch(parts[1])
	return m != nil && m[1] <= "23" && m[2] <= "59" && m[3] <= "59"
}

// valueIsDuration reports whether s is a Go duration ("1h30m") or a
// Scala-style one ("3 days", "5 min").
func valueIsDuration(s string) bool {
	if _, err := time.ParseDuration(s); err == nil {
		return true
	}
	known := false
	for _, m := range valueDurationPart.FindAllStringSubmatch(s, -1) {
		if _, err := strconv.Atoi(m[2]); err != nil {
			return false
		}
		unit := strings.ToLower(strings.TrimSpace(m[3]))
		for _, spellings := range valueDurationUnits {
			for i, sp := range spellings {
				if strings.EqualFold(sp, unit) || (i == len(spellings)-1 && strings.HasPrefix(unit, sp)) {
					known = true
				}
			}
		}
	}
	return known
}

// valueIsURI reports whether s parses as a request URI (absolute, or an
// absolute path).
func valueIsURI(s string) bool {
	_, err := url.ParseRequestURI(s)
	return err == nil
}

// valueIsEmail reports whether s is an RFC 5322 address ("a@b.c" or
// "Name <a@b.c>").
func valueIsEmail(s string) bool {
	addr, err := mail.ParseAddress(s)
	return err == nil && addr.Address != ""
}

// valueIsHostname reports whether s is an RFC 1034 host name of at most 255
// characters with labels of at most 63.
func valueIsHostname(s string) bool {
	if len(s) > 255 || !valueHostname.MatchString(s) {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if len(label) > 63 {
			return false
		}
	}
	return true
}

// valueIsIPv4 reports whether s is a dotted IPv4 address (octets with
// leading zeros are accepted, as Kubernetes does for compatibility).
func valueIsIPv4(s string) bool {
	norm, ok := valueSloppyIP(s)
	return ok && net.ParseIP(norm) != nil && strings.Contains(s, ".")
}

// valueIsIPv6 reports whether s is an IPv6 address.
func valueIsIPv6(s string) bool {
	norm, ok := valueSloppyIP(s)
	return ok && net.ParseIP(norm) != nil && strings.Contains(s, ":")
}

// valueIsCIDR reports whether s is an IPv4 or IPv6 CIDR ("10.0.0.0/8").
func valueIsCIDR(s string) bool {
	i := strings.IndexByte(s, '/')
	if i < 0 {
		return false
	}
	ip, ok := valueSloppyIP(s[:i])
	mask := s[i+1:]
	if !ok || mask == "" || strings.Trim(mask, "0123456789") != "" {
		return false
	}
	if trimmed := strings.TrimLeft(mask, "0"); trimmed != "" {
		mask = trimmed
	} else {
		mask = "0"
	}
	_, _, err := net.ParseCIDR(ip + "/" + mask)
	return err == nil
}

// valueSloppyIP normalizes an IP address whose IPv4 octets (of an IPv4
// address or the IPv4 tail of an IPv6 one) may have leading zeros, which
// Go's parser rejects and Kubernetes accepts as decimal.
func valueSloppyIP(s string) (string, bool) {
	if net.ParseIP(s) != nil {
		return s, true
	}
	head := s[:strings.LastIndexByte(s, ':')+1]
	octets := strings.Split(s[len(head):], ".")
	if len(octets) != 4 {
		return "", false
	}
	for i, o := range octets {
		if o == "" || strings.Trim(o, "0123456789") != "" {
			return "", false
		}
		digits := strings.TrimLeft(o, "0")
		if digits == "" {
			digits = "0"
		}
		n, err := strconv.Atoi(digits)
		if err != nil || n > 255 {
			return "", false
		}
		octets[i] = strconv.Itoa(n)
	}
	norm := head + strings.Join(octets, ".")
	return norm, net.ParseIP(norm) != nil
}

// valueIsMAC reports whether s is an IEEE 802 MAC-48, EUI-48, EUI-64 or
// 20-octet InfiniBand address.
func valueIsMAC(s string) bool {
	_, err := net.ParseMAC(s)
	return err == nil
}

// valueIsBSONObjectID reports whether s is a BSON ObjectId: 24 hex digits.
func valueIsBSONObjectID(s string) bool {
	if len(s) != 24 {
		return false
	}
	for _, r := range s {
		if !unicode.Is(unicode.ASCII_Hex_Digit, r) {
			return false
		}
	}
	return true
}

// valueIsISBN10 reports whether s (spaces and dashes ignored) is an ISBN-10
// with a valid check digit.
func valueIsISBN10(s string) bool {
	d := valueStripSeparators(s)
	if len(d) != 10 || strings.Trim(d[:9], "0123456789") != "" || strings.Trim(d[9:], "0123456789X") != "" {
		return false
	}
	sum := 0
	for i := 0; i < 9; i++ {
		sum += (i + 1) * int(d[i]-'0')
	}
	if d[9] == 'X' {
		sum += 10 * 10
	} else {
		sum += 10 * int(d[9]-'0')
	}
	return sum%11 == 0
}

// valueIsISBN13 reports whether s (spaces and dashes ignored) is an ISBN-13
// with a valid check digit.
func valueIsISBN13(s string) bool {
	d := valueStripSeparators(s)
	if len(d) != 13 || strings.Trim(d, "0123456789") != "" {
		return false
	}
	sum := 0
	for i := 0; i < 12; i++ {
		w := 1
		if i%2 == 1 {
			w = 3
		}
		sum += w * int(d[i]-'0')
	}
	return (10-sum%10)%10 == int(d[12]-'0')
}

// valueStripSeparators removes white space and dashes.
func valueStripSeparators(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}

// valueIsCreditCard reports whether the digits of s form a known card
// number passing the Luhn check.
func valueIsCreditCard(s string) bool {
	digits := strings.Map(func(r rune) rune {
		if r < '0' || r > '9' {
			return -1
		}
		return r
	}, s)
	if !valueCreditCardPrefix.MatchString(digits) {
		return false
	}
	sum, double := 0, false
	for i := len(digits) - 1; i >= 0; i-- {
		n := int(digits[i] - '0')
		if double {
			n *= 2
			if n >= 10 {
				n = n%10 + 1
			}
		}
		sum += n
		double = !double
	}
	return sum%10 == 0
}
