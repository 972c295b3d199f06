package compose

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"platform.io/test/stack"
)

// imageTag is the tag this test builds and runs (`make images VERSION=...` also moves :latest).
const imageTag = "compose-test"

// grpcServices are the services with a gRPC API behind mutual TLS, and their ports.
var grpcServices = map[string]int{"storage": 7001, "authn": 7002, "authz": 7003, "admission": 7004, "certificates": 7005, "controllers": 7006}

// project is one compose project of the test.
type project struct {
	t       *testing.T
	root    string
	compose []string // the compose command: docker compose, or docker-compose
	name    string
	env     []string
	outDir  string
	port    int
}

// run runs a compose subcommand for the project, bounded by timeout, and returns its combined
// output.
func (p *project) run(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	full := append(append(append([]string(nil), p.compose[1:]...), "-f", filepath.Join(p.root, "compose.yaml"), "-p", p.name), args...)
	cmd := exec.CommandContext(ctx, p.compose[0], full...)
	cmd.Dir = p.root
	cmd.Env = p.env
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s %s: timed out after %v", strings.Join(p.compose, " "), strings.Join(args, " "), timeout)
	}
	return string(out), err
}

// up starts (or re-converges) the project and waits until every container is ready. Compose v1
// has no `up --wait`: the same script as `make up` waits for the health checks.
func (p *project) up() {
	p.t.Helper()
	if out, err := p.run(5*time.Minute, "up", "-d"); err != nil {
		p.t.Fatalf("compose up -d: %v\n%s", err, out)
	}
	p.wait(180)
}

// wait waits until every container of the project is ready (build/compose-wait.sh).
func (p *project) wait(seconds int) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(seconds+60)*time.Second)
	defer cancel()
	wait := exec.CommandContext(ctx, filepath.Join(p.root, "build", "compose-wait.sh"), p.name, strconv.Itoa(seconds))
	if out, err := wait.CombinedOutput(); err != nil {
		p.t.Fatalf("the stack did not become ready: %v\n%s", err, out)
	}
}

// container returns the id of the project's container of service.
func (p *project) container(service string) string {
	p.t.Helper()
	out, code, err := docker(30*time.Second, "ps", "-aq", "--filter", "label=com.docker.compose.project="+p.name, "--filter", "label=com.docker.compose.service="+service)
	id := strings.TrimSpace(out)
	if err != nil || code != 0 || id == "" || strings.Contains(id, "\n") {
		p.t.Fatalf("the container of %s: exit %d, %v: %q", service, code, err, out)
	}
	return id
}

// kubeconfig is the admin kubeconfig the certs container wrote for the project.
func (p *project) kubeconfig() string { return filepath.Join(p.outDir, "admin.kubeconfig") }

// restConfig is the admin client configuration of the project's gateway.
func (p *project) restConfig() *rest.Config {
	p.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", p.kubeconfig())
	if err != nil {
		p.t.Fatalf("admin.kubeconfig: %v", err)
	}
	if want := "https://127.0.0.1:" + strconv.Itoa(p.port); cfg.Host != want {
		p.t.Fatalf("admin.kubeconfig names %s, want %s", cfg.Host, want)
	}
	return cfg
}

// startProject starts compose.yaml as a project of its own (random name, free host port), waits
// until it is ready, and removes it with its volumes when the test ends (logs first if it
// failed). extraEnv adds to the environment compose sees.
func startProject(t *testing.T, prefix string, extraEnv ...string) *project {
	t.Helper()
	compose := composeCommand(t)
	buildImages(t)
	root := stack.RepoRoot()
	p := &project{t: t, root: root, compose: compose, name: prefix + randomSuffix(t), outDir: t.TempDir(), port: freePort(t)}
	p.env = append(os.Environ(), "PLATFORM_VERSION="+imageTag, "PLATFORM_PORT="+strconv.Itoa(p.port), "PLATFORM_COMPOSE_DIR="+p.outDir,
		"PLATFORM_OTLP_ENDPOINT=", "COMPOSE_PROFILES=")
	p.env = append(p.env, extraEnv...)
	t.Cleanup(func() {
		if t.Failed() {
			if out, err := p.run(time.Minute, "logs", "--no-color", "--tail", "60"); err == nil {
				t.Logf("logs of %s:\n%s", p.name, out)
			}
		}
		if out, err := p.run(3*time.Minute, "--profile", "tracing", "down", "-v", "--remove-orphans", "-t", "5"); err != nil {
			t.Errorf("compose down -v: %v\n%s", err, out)
		}
	})
	start := time.Now()
	p.up()
	t.Logf("compose up of %s until every container is healthy: %v", p.name, time.Since(start).Round(100*time.Millisecond))
	return p
}

// images is the one `make images` of the test binary, shared by every test of the package.
var images struct {
	once sync.Once
	err  error
	out  string
}

// buildImages runs `make images` once per test binary: Platform's images are rebuilt (the go
// build is incremental), redis:7 only when absent.
func buildImages(t *testing.T) {
	t.Helper()
	images.once.Do(func() {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		mk := exec.CommandContext(ctx, "make", "images", "VERSION="+imageTag)
		mk.Dir = stack.RepoRoot()
		out, err := mk.CombinedOutput()
		images.out = fmt.Sprintf("make images: %v\n%s", time.Since(start).Round(100*time.Millisecond), strings.TrimSpace(string(out)))
		if err != nil {
			images.err = fmt.Errorf("make images: %v", err)
		}
		t.Log(images.out)
	})
	if images.err != nil {
		t.Fatalf("%v\n%s", images.err, images.out)
	}
}

// docker runs docker with args, bounded by timeout.
func docker(timeout time.Duration, args ...string) (string, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.String(), exit.ExitCode(), nil
	}
	if ctx.Err() != nil {
		return out.String(), -1, fmt.Errorf("docker %s: timed out after %v", strings.Join(args, " "), timeout)
	}
	return out.String(), 0, err
}

// mustDocker runs docker and fails the test unless it exits 0.
func mustDocker(t *testing.T, timeout time.Duration, args ...string) string {
	t.Helper()
	out, code, err := docker(timeout, args...)
	if err != nil || code != 0 {
		t.Fatalf("docker %s: exit %d, %v: %s", strings.Join(args, " "), code, err, out)
	}
	return out
}

// composeCommand finds Compose: the v2 plugin, else v1's docker-compose. No Docker or no
// Compose fails the test: the container deployment is part of what CI checks.
func composeCommand(t *testing.T) []string {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		t.Fatal("docker is not installed: the compose test needs a Docker engine with Compose (it does not skip)")
	}
	if out, code, err := docker(30*time.Second, "info", "--format", "{{.ServerVersion}}"); err != nil || code != 0 {
		t.Fatalf("the Docker engine does not answer (docker info: exit %d, %v): %s", code, err, out)
	}
	if _, code, err := docker(30*time.Second, "compose", "version"); err == nil && code == 0 {
		return []string{"docker", "compose"}
	}
	if path, err := exec.LookPath("docker-compose"); err == nil {
		return []string{path}
	}
	t.Fatal("neither `docker compose` (v2) nor docker-compose (v1) is installed")
	return nil
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func randomSuffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
