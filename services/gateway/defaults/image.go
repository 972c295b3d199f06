package defaults

import (
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// pullPolicy is upstream's default pull policy for an image reference: Always for the tag
// "latest", named or implied (no tag and no digest); IfNotPresent for any other tag, a digest
// alone, or a reference that does not parse.
func pullPolicy(image string) corev1.PullPolicy {
	if tag, ok := imageTag(image); ok && tag == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// The grammar of image references (github.com/distribution/reference, which upstream parses
// them with).
const (
	pathComponent = `[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*`
	remoteName    = pathComponent + `(?:/` + pathComponent + `)*`
	domainLabel   = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
	domainAndPort = `(?:` + domainLabel + `(?:\.` + domainLabel + `)*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?`
	tagPattern    = `[\w][\w.-]{0,127}`
	digestPattern = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
)

var (
	referenceRE = regexp.MustCompile(`^((?:` + domainAndPort + `/)?` + remoteName + `)(?::(` + tagPattern + `))?(?:@(` + digestPattern + `))?$`)
	nameRE      = regexp.MustCompile(`^(?:` + domainAndPort + `/)?(` + remoteName + `)$`)
	hexIDRE     = regexp.MustCompile(`^[a-f0-9]{64}$`)
	// digestRE holds the digests a runtime can verify: the SHA-2 algorithms, lowercase hex.
	digestRE = regexp.MustCompile(`^(?:sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128})$`)
)

// imageTag returns the tag image names after normalization ("latest" when it names neither a tag
// nor a digest, "" when it names a digest only); ok is false when image is not a valid reference.
func imageTag(image string) (tag string, ok bool) {
	if hexIDRE.MatchString(image) { // an image ID, not a name
		return "", false
	}
	// Normalize as Docker does: "nginx" is docker.io/library/nginx; a first component is a
	// registry only if it looks like a host (a dot, a port, localhost or capitals).
	domain, rest := "docker.io", image
	if i := strings.IndexByte(image, '/'); i >= 0 {
		if first := image[:i]; strings.ContainsAny(first, ".:") || first == "localhost" || strings.ToLower(first) != first {
			domain, rest = first, image[i+1:]
		}
	}
	if domain == "index.docker.io" {
		domain = "docker.io"
	}
	if domain == "docker.io" && !strings.Contains(rest, "/") {
		rest = "library/" + rest
	}
	if repo, _, _ := strings.Cut(rest, ":"); strings.ToLower(repo) != repo {
		return "", false // repository names are lowercase
	}
	m := referenceRE.FindStringSubmatch(domain + "/" + rest)
	if m == nil || (m[3] != "" && !digestRE.MatchString(m[3])) {
		return "", false
	}
	if len(nameRE.FindStringSubmatch(m[1])[1]) > 255 { // the repository path, registry aside
		return "", false
	}
	if m[2] == "" && m[3] == "" {
		return "latest", true
	}
	return m[2], true
}
