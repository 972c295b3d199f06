package stack

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// HelmVersion is the Helm 3 release installed when no Helm 3 is on PATH (it builds with Go 1.26).
const HelmVersion = "v3.22.0"

// Helm returns a Helm 3 binary for the tests that drive Helm: helm on PATH when it is Helm 3,
// else the one `go install` put in the user cache directory (installing it the first time,
// about 5 minutes on a cold 2-core machine). Without Go's module proxy or a helm it fails.
func Helm() (string, error) {
	if p, err := exec.LookPath("helm"); err == nil {
		out, err := exec.Command(p, "version", "--template", "{{.Version}}").Output()
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(out)), "v3.") {
			return p, nil
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no helm on PATH and no cache directory for installing one: %w", err)
	}
	dir := filepath.Join(cache, "platform-test", "helm-"+HelmVersion)
	bin := filepath.Join(dir, "helm")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	t0 := time.Now()
	fmt.Fprintf(os.Stderr, "tests: no Helm 3 on PATH: go install helm.sh/helm/v3/cmd/helm@%s into %s (minutes the first time)\n", HelmVersion, dir)
	// Outside the repository and its go.work: helm is its own main module, built as released.
	cmd := exec.Command("go", "install", "helm.sh/helm/v3/cmd/helm@"+HelmVersion)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("no Helm 3 on PATH, and go install helm.sh/helm/v3/cmd/helm@%s failed: %v\n%s", HelmVersion, err, out)
	}
	fmt.Fprintf(os.Stderr, "tests: helm %s installed in %v\n", HelmVersion, time.Since(t0).Round(time.Second))
	return bin, nil
}
