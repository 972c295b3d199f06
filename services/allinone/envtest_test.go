package main

import (
	"regexp"
	"slices"
	"testing"
)

// The stand-ins are chosen by the binary's name (a link) or the first argument.
func TestStandIn(t *testing.T) {
	for _, tc := range []struct {
		args []string
		mode string
		rest []string
	}{
		{[]string{"/assets/kube-apiserver", "--secure-port=1"}, kubeAPIServerName, []string{"--secure-port=1"}},
		{[]string{"etcd", "--data-dir=x"}, etcdName, []string{"--data-dir=x"}},
		{[]string{"platform", "kube-apiserver", "--v=4"}, kubeAPIServerName, []string{"--v=4"}},
		{[]string{"./bin/platform", "--data-dir=x"}, "", nil},
		{[]string{"platform"}, "", nil},
	} {
		mode, rest := standIn(tc.args)
		if mode != tc.mode || !slices.Equal(rest, tc.rest) {
			t.Errorf("%v: %q %v, want %q %v", tc.args, mode, rest, tc.mode, tc.rest)
		}
	}
}

// The kube-apiserver stand-in takes the command line controller-runtime v0.21's envtest writes
// (its defaults and the client CA of its certificate authentication), maps what it can and
// accepts the rest; its help does not list --insecure-port, so envtest does not pass it.
func TestKubeAPIServerFlags(t *testing.T) {
	envtestArgs := []string{
		"--service-cluster-ip-range=10.0.0.0/24", "--allow-privileged=true", "--disable-admission-plugins=ServiceAccount",
		"--cert-dir=/tmp/k8s_test_framework_1", "--authorization-mode=RBAC", "--secure-port=40123", "--bind-address=127.0.0.1",
		"--service-account-issuer=https://127.0.0.1:40123/", "--service-account-key-file=/tmp/k8s_test_framework_1/sa-signer.crt",
		"--service-account-signing-key-file=/tmp/k8s_test_framework_1/sa-signer.key", "--etcd-servers=http://127.0.0.1:40124",
		"--client-ca-file=/tmp/k8s_test_framework_1/client-cert-auth-ca.crt", "--v=4", "--advertise-address=127.0.0.1",
	}
	c := defaultConfig()
	c.dataDir = ""
	var certDir string
	var v int
	ignored := map[string]*string{}
	fs := apiServerFlags(&c, &certDir, &v, ignored)
	if err := fs.Parse(envtestArgs); err != nil {
		t.Fatal(err)
	}
	if certDir != "/tmp/k8s_test_framework_1" || v != 4 || c.gateway.SecurePort != 40123 || c.gateway.BindAddress != "127.0.0.1" ||
		c.gateway.ClientCAFile != "/tmp/k8s_test_framework_1/client-cert-auth-ca.crt" || !slices.Equal(c.authz.Modes, []string{"RBAC"}) ||
		c.authn.ServiceAccountSigningKeyFile != "/tmp/k8s_test_framework_1/sa-signer.key" || !slices.Equal(c.authn.ServiceAccountIssuers, []string{"https://127.0.0.1:40123/"}) ||
		*ignored["etcd-servers"] != "http://127.0.0.1:40124" || c.dataDir != "" || c.gateway.ShutdownTimeout.String() != standInShutdownTimeout ||
		c.gateway.ServiceClusterIPRange != "10.0.0.0/24" || c.gateway.AdvertiseAddress != "127.0.0.1" {
		t.Errorf("parsed: cert-dir %q, v %d, gateway %+v, authz %v, authn %+v", certDir, v, c.gateway, c.authz.Modes, c.authn)
	}
	if err := fs.Parse([]string{"--no-such-flag"}); err == nil {
		t.Error("an unknown flag is accepted (kube-apiserver refuses it)")
	}
	help := fs.FlagUsages()
	if regexp.MustCompile(`(?m)^\s*--insecure-port\b`).MatchString(help) || !regexp.MustCompile(`(?m)^\s*--cert-dir\b`).MatchString(help) {
		t.Errorf("help:\n%s", help)
	}
}
