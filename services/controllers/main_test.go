package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"platform.io/libs/naming"
	"platform.io/libs/pki"
	"platform.io/services/controllers/bootstraptoken"
	"platform.io/services/controllers/internal/testenv"
	"platform.io/services/controllers/manager"
)

// The test binary doubles as the command: with this variable set it runs main, so the tests
// drive the real process (flags, kubeconfig, signals, exit codes).
const runMain = "CONTROLLERS_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMain) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func command(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMain+"=1")
	return cmd
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Bad flags refuse to start with exit code 2 and a message naming the flag.
func TestInvalidFlags(t *testing.T) {
	var stderr bytes.Buffer
	cmd := command("--kubeconfig=/nonexistent", "--controllers=*,tokencleaner,bogus")
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("exit: %v, want code 2", err)
	}
	if !strings.Contains(stderr.String(), `--controllers: "bogus" is not in the list of known controllers`) {
		t.Fatalf("stderr: %s", stderr.String())
	}
}

// The process runs the controllers from a kubeconfig with the controller manager's client
// certificate, holds the lease, serves metrics, and on SIGTERM stops cleanly and releases the
// lease.
func TestProcessRunsAndReleasesLeaseOnSIGTERM(t *testing.T) {
	env := testenv.Start(t)
	cert, key := env.ClientCert(naming.ControllerManagerUser)
	ca, err := os.ReadFile(env.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "controllers.kubeconfig")
	if err := pki.WriteKubeconfig(kubeconfig, pki.Kubeconfig{ClusterName: naming.Product, UserName: naming.ControllerManagerUser, Server: env.URL, CAPEM: ca, CertPEM: cert, KeyPEM: key}); err != nil {
		t.Fatal(err)
	}
	metricsAddr := freePort(t)
	var logs bytes.Buffer
	cmd := command("--kubeconfig="+kubeconfig, "--listen=127.0.0.1:0", "--metrics-bind-address="+metricsAddr,
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms",
		"--controllers=*,tokencleaner,bootstrapsigner")
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("process log:\n%s", logs.String())
		}
	})
	ctx := context.Background()
	leases := env.Admin.Coordination.Leases(naming.SystemNamespace)
	holder := ""
	testenv.Eventually(t, 30*time.Second, "the process holding the lease", func() (bool, string) {
		l, err := leases.Get(ctx, manager.LeaseName, metav1.GetOptions{})
		if err != nil {
			return false, testenv.Short(err)
		}
		holder = ptr.Deref(l.Spec.HolderIdentity, "")
		return holder != "", "no holder"
	})
	host, _ := os.Hostname()
	if !strings.HasPrefix(holder, host+"_") {
		t.Errorf("holder identity %q, want hostname_uuid", holder)
	}
	ns := env.Namespace("proc")
	testenv.Eventually(t, 30*time.Second, "the default account created by the process", func() (bool, string) {
		_, err := env.Admin.Kubernetes.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, testenv.Short(err)
	})
	// --controllers=*,bootstrapsigner: cluster-info is created.
	testenv.Eventually(t, 30*time.Second, "cluster-info created by the process", func() (bool, string) {
		_, err := env.Admin.Kubernetes.CoreV1().ConfigMaps(naming.PublicNamespace).Get(ctx, bootstraptoken.ConfigMapClusterInfo, metav1.GetOptions{})
		return err == nil, testenv.Short(err)
	})
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`leader_election_master_status{name="` + manager.LeaseName + `"} 1`,
		`controller_syncs_total{controller="serviceaccount"}`,
		`workqueue_adds_total{name="serviceaccount"}`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the process did not exit after SIGTERM")
	}
	l, err := leases.Get(ctx, manager.LeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != "" {
		t.Fatalf("lease still held by %q after SIGTERM (want released)", h)
	}
}
