// Package redistest starts a real redis-server for tests and benchmarks: on a free loopback port,
// with its own temporary directory and AOF persistence. A missing redis-server binary is a test
// failure with a clear message, never a skip.
package redistest

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Options configure the server.
type Options struct {
	// AppendFsync is Redis's appendfsync policy: "always" or "everysec" (the default).
	AppendFsync string
	// Password, when set, is required from clients (requirepass).
	Password string
	// TLSCertFile, TLSKeyFile and TLSCAFile, when set, make the server speak TLS only (no
	// plaintext port); clients verify it with TLSCAFile, and are not asked for certificates.
	TLSCertFile, TLSKeyFile, TLSCAFile string
	// ExtraArgs are appended to redis-server's command line (StartCluster passes the cluster
	// settings this way).
	ExtraArgs []string
}

// Server is a running (or stopped, between Stop and Start) redis-server.
type Server struct {
	opts Options
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// Start runs a redis-server for the test and stops it when the test ends.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	dir := tb.TempDir()
	s, err := StartProcess(dir, opts)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(func() { _ = s.Stop(false) })
	return s
}

// StartProcess runs a redis-server with its data in dir, outside of a test (the load tool uses
// it). The caller stops it.
func StartProcess(dir string, opts Options) (*Server, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, errors.New("redis-server not found on PATH: install it (Debian: apt-get install redis-server); tests that need Redis do not skip")
	}
	if opts.AppendFsync == "" {
		opts.AppendFsync = "everysec"
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, dir: dir, port: port}
	if err := s.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is a redis:// (rediss:// with TLS) URL for the server, with the password if one is set.
func (s *Server) URL() string {
	scheme := "redis://"
	if s.opts.TLSCertFile != "" {
		scheme = "rediss://"
	}
	if s.opts.Password != "" {
		return scheme + ":" + s.opts.Password + "@" + s.Addr() + "/0"
	}
	return scheme + s.Addr() + "/0"
}

// Dir is the server's data directory.
func (s *Server) Dir() string { return s.dir }

// Start starts the server (again) on the same port and data directory and waits until it
// answers PING.
func (s *Server) Start() error {
	if s.cmd != nil {
		return errors.New("redistest: server already running")
	}
	port := []string{"--port", strconv.Itoa(s.port)}
	if s.opts.TLSCertFile != "" {
		port = []string{"--port", "0", "--tls-port", strconv.Itoa(s.port), "--tls-cert-file", s.opts.TLSCertFile,
			"--tls-key-file", s.opts.TLSKeyFile, "--tls-ca-cert-file", s.opts.TLSCAFile, "--tls-auth-clients", "no"}
	}
	args := append(port,
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--appendonly", "yes",
		"--appendfsync", s.opts.AppendFsync,
		"--save", "",
		"--daemonize", "no",
		"--logfile", filepath.Join(s.dir, "redis.log"),
	)
	if s.opts.Password != "" {
		args = append(args, "--requirepass", s.opts.Password)
	}
	args = append(args, s.opts.ExtraArgs...)
	cmd := exec.Command("redis-server", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: start redis-server: %w", err)
	}
	s.cmd = cmd
	s.done = make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(s.done)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			s.cmd = nil
			return fmt.Errorf("redistest: redis-server exited at start; log: %s", s.logTail())
		default:
		}
		if s.ping() == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = s.Stop(true)
	return fmt.Errorf("redistest: redis-server did not answer PING within 10s; log: %s", s.logTail())
}

// Stop stops the server: with kill, by SIGKILL (a crash: only what the AOF policy made durable
// survives); otherwise by SIGTERM, which makes Redis flush its AOF and exit cleanly.
func (s *Server) Stop(kill bool) error {
	if s.cmd == nil {
		return nil
	}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
	return nil
}

// Pause stops the server process with SIGSTOP (it holds its connections but answers nothing:
// a hung or partitioned node); Resume continues it.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	if s.cmd == nil {
		return errors.New("redistest: server not running")
	}
	return s.cmd.Process.Signal(sig)
}

// Running reports whether the server process is up (started and not stopped).
func (s *Server) Running() bool { return s.cmd != nil }

// Restart stops and starts the server on the same port and data directory.
func (s *Server) Restart(kill bool) error {
	if err := s.Stop(kill); err != nil {
		return err
	}
	return s.Start()
}

func (s *Server) ping() error {
	var conn net.Conn
	var err error
	if s.opts.TLSCertFile != "" {
		pool := x509.NewCertPool()
		if pem, rerr := os.ReadFile(s.opts.TLSCAFile); rerr == nil {
			pool.AppendCertsFromPEM(pem)
		}
		d := &net.Dialer{Timeout: 200 * time.Millisecond}
		conn, err = tls.DialWithDialer(d, "tcp", s.Addr(), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	} else {
		conn, err = net.DialTimeout("tcp", s.Addr(), 200*time.Millisecond)
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	cmd := "PING\r\n"
	if s.opts.Password != "" {
		cmd = fmt.Sprintf("AUTH %s\r\nPING\r\n", s.opts.Password)
	}
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if strings.HasPrefix(line, "+PONG") {
			return nil
		}
		if strings.HasPrefix(line, "-") {
			return errors.New(strings.TrimSpace(line))
		}
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
