// Package certs is `platform certs`: it creates the service PKI of the split stack (the cluster
// CA, the gateway's serving certificate, one mutual-TLS certificate per service, the controllers'
// and the administrator's client certificates and kubeconfigs, and the service account signing
// key) in a directory, as compose.yaml's init container does before any service starts.
//
// It is idempotent: a file that exists and is still valid (signed by the CA in the directory,
// the right names and usages, more than RenewBefore of life left) is kept, so running it on
// every `docker compose up` keeps the same CA and certificates, and renews only what is about to
// expire or what a changed flag (another --hosts, a new server URL) makes wrong. The services
// re-read their certificate files when they change, so a renewal needs no restart.
package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	"platform.io/libs/naming"
	"platform.io/libs/pki"
)

// Services are the split stack's services; each gets a certificate <name>.crt/<name>.key that
// serves its gRPC API and authenticates it to the services it calls (mutual TLS), with the
// service's name on the compose network, localhost and 127.0.0.1 as subject alternative names.
var Services = []string{"storage", "authn", "authz", "admission", "certificates", "controllers", "gateway"}

// File names in the PKI directory.
const (
	CACert            = "ca.crt"
	CAKey             = "ca.key"
	ServingCert       = "gateway-serving.crt"
	ServingKey        = "gateway-serving.key"
	AdminCert         = "admin.crt"
	AdminKey          = "admin.key"
	ControllersCert   = "controllers-client.crt"
	ControllersKey    = "controllers-client.key"
	ServiceAccountKey = "sa.key"
	// AdminKubeconfig is written to Options.KubeconfigDir; ControllersKubeconfig to Options.Dir.
	AdminKubeconfig       = "admin.kubeconfig"
	ControllersKubeconfig = "controllers.kubeconfig"
)

// Options say where the PKI goes and what it names.
type Options struct {
	// Dir holds the CA, the certificates, the keys and the controllers' kubeconfig.
	Dir string
	// KubeconfigDir receives admin.kubeconfig and a copy of ca.crt (default Dir).
	KubeconfigDir string
	// Server is the gateway URL in admin.kubeconfig (how the host reaches the published port).
	Server string
	// InternalServer is the gateway URL in controllers.kubeconfig (how containers reach it).
	InternalServer string
	// Hosts are extra subject alternative names of the gateway's serving certificate.
	Hosts []string
	// CAName is the common name of a new CA.
	CAName string
	// Validity of the issued (non-CA) certificates; RenewBefore: a certificate with less life
	// left than this is issued again.
	Validity, RenewBefore time.Duration
	// Owner, "uid:gid", is given to Dir and everything in it (the services' numeric user), when
	// set; KubeconfigOwnerOf names a path whose owner is given to the files in KubeconfigDir
	// (compose bind-mounts a file of the checkout there, so the host user can read them).
	Owner, KubeconfigOwnerOf string
	// ServiceHosts add subject alternative names to one service's certificate, each
	// "<service>=<host>[,<host>...]" (in Kubernetes: the names of the service's Service).
	ServiceHosts []string
	// Secret and AdminSecret, "<namespace>/<name>", keep the PKI in Kubernetes Secrets instead
	// of a persistent --dir (see EnsureWithSecrets); Kubeconfig is the API that holds them
	// (default: the pod's service account).
	Secret, AdminSecret, Kubeconfig string
}

// Result says, per file name, what Ensure did: "created", "renewed" or "kept".
type Result map[string]string

// RegisterFlags registers the command's flags with their defaults.
func (o *Options) RegisterFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Dir, "dir", "pki", "directory of the CA, the certificates, the keys and controllers.kubeconfig (created with mode 0700)")
	fs.StringVar(&o.KubeconfigDir, "kubeconfig-dir", "", "directory receiving admin.kubeconfig and a copy of ca.crt (default --dir)")
	fs.StringVar(&o.Server, "server", "https://127.0.0.1:6443", "gateway URL written into admin.kubeconfig")
	fs.StringVar(&o.InternalServer, "internal-server", "https://gateway:6443", "gateway URL written into controllers.kubeconfig (the name on the compose network)")
	fs.StringSliceVar(&o.Hosts, "hosts", nil, "extra DNS names or IP addresses of the gateway's serving certificate (besides localhost, 127.0.0.1 and gateway)")
	fs.StringVar(&o.CAName, "ca-name", naming.Product+"-ca", "common name of a new cluster CA")
	fs.DurationVar(&o.Validity, "validity", 365*24*time.Hour, "validity of the issued certificates")
	fs.DurationVar(&o.RenewBefore, "renew-before", 30*24*time.Hour, "issue a certificate again when less than this of its validity is left")
	fs.StringVar(&o.Owner, "owner", "", "uid:gid given to --dir and its files (needs root; the services' user)")
	fs.StringVar(&o.KubeconfigOwnerOf, "kubeconfig-owner-of", "", "give the files in --kubeconfig-dir the owner of this path (needs root)")
	fs.StringArrayVar(&o.ServiceHosts, "service-hosts", nil, "extra DNS names or IP addresses of one service's certificate, <service>=<host>[,<host>...] (repeatable), such as storage=storage.ns.svc")
	fs.StringVar(&o.Secret, "secret", "", "<namespace>/<name> of a Kubernetes Secret that keeps the PKI (all but the admin credentials): read into --dir first when it exists, written back when something changed")
	fs.StringVar(&o.AdminSecret, "admin-secret", "", "<namespace>/<name> of a Kubernetes Secret that keeps admin.kubeconfig, admin.crt, admin.key and ca.crt, the same way")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the Kubernetes API holding --secret and --admin-secret (default: the pod's service account)")
}

// Validate reports the options' errors, each naming its flag.
func (o *Options) Validate() error {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("--dir is required"))
	}
	for flag, u := range map[string]string{"--server": o.Server, "--internal-server": o.InternalServer} {
		if !strings.HasPrefix(u, "https://") {
			errs = append(errs, fmt.Errorf("%s %q must be an https URL", flag, u))
		}
	}
	if o.Validity <= 0 || o.RenewBefore < 0 || o.RenewBefore >= o.Validity {
		errs = append(errs, errors.New("--validity must be positive and longer than --renew-before"))
	}
	if o.Owner != "" {
		if _, _, err := parseOwner(o.Owner); err != nil {
			errs = append(errs, fmt.Errorf("--owner: %w", err))
		}
	}
	for _, sh := range o.ServiceHosts {
		name, hosts, ok := strings.Cut(sh, "=")
		if !ok || !slices.Contains(Services, name) || strings.TrimSpace(hosts) == "" {
			errs = append(errs, fmt.Errorf("--service-hosts %q must be <service>=<host>[,<host>...] with a service of %s", sh, strings.Join(Services, ", ")))
		}
	}
	for flag, v := range map[string]string{"--secret": o.Secret, "--admin-secret": o.AdminSecret} {
		if v != "" {
			if _, err := parseSecretRef(flag, v); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if o.Secret != "" && o.Secret == o.AdminSecret {
		errs = append(errs, errors.New("--secret and --admin-secret must name different Secrets"))
	}
	return errors.Join(errs...)
}

// serviceHosts are the extra names --service-hosts gives service.
func (o *Options) serviceHosts(service string) []string {
	var hosts []string
	for _, sh := range o.ServiceHosts {
		if name, list, ok := strings.Cut(sh, "="); ok && name == service {
			for _, h := range strings.Split(list, ",") {
				if h = strings.TrimSpace(h); h != "" && !slices.Contains(hosts, h) {
					hosts = append(hosts, h)
				}
			}
		}
	}
	return hosts
}

// Main is `platform certs`: it parses args, ensures the PKI and prints what it did; the exit code
// is 0, 1 on failure, 2 on invalid flags.
func Main(args []string, stdout, stderr io.Writer) int {
	var o Options
	fs := pflag.NewFlagSet("platform certs", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: platform certs [flags]\n\nCreates (or keeps, when still valid) the split stack's service PKI.\n\nFlags:")
		fs.PrintDefaults()
	}
	o.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := o.Validate(); err != nil {
		fmt.Fprintln(stderr, "platform certs: invalid configuration:\n"+err.Error())
		return 2
	}
	var res Result
	var err error
	if o.Secret != "" || o.AdminSecret != "" {
		var client kubernetes.Interface
		if client, err = o.kubeClient(); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			res, err = EnsureWithSecrets(ctx, o, client)
			cancel()
		}
	} else {
		res, err = Ensure(o)
	}
	if err != nil {
		fmt.Fprintln(stderr, "platform certs:", err)
		return 1
	}
	names := make([]string, 0, len(res))
	for n := range res {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(stdout, "%-8s %s\n", res[n], n)
	}
	return 0
}

// Ensure creates what is missing or no longer valid in o.Dir and o.KubeconfigDir and keeps the
// rest.
func Ensure(o Options) (Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.KubeconfigDir == "" {
		o.KubeconfigDir = o.Dir
	}
	if o.CAName == "" {
		o.CAName = naming.Product + "-ca"
	}
	res := Result{}
	ca, created, err := pki.EnsureCA(o.Dir, o.CAName)
	if err != nil {
		return nil, err
	}
	res[CACert] = state(created, false)
	if err := ensureSigningKey(filepath.Join(o.Dir, ServiceAccountKey), res); err != nil {
		return nil, err
	}
	is := issuer{ca: ca, o: o, res: res, newCA: created}
	gatewayHosts := []string{"localhost", "127.0.0.1", "gateway"}
	for _, h := range o.Hosts {
		// compose passes --hosts "${PLATFORM_HOSTS}", empty when unset.
		if h = strings.TrimSpace(h); h != "" && !slices.Contains(gatewayHosts, h) {
			gatewayHosts = append(gatewayHosts, h)
		}
	}
	if err := is.ensure(ServingCert, ServingKey, want{cn: "gateway", hosts: gatewayHosts, server: true}); err != nil {
		return nil, err
	}
	for _, name := range Services {
		hosts := []string{name, "localhost", "127.0.0.1"}
		for _, h := range o.serviceHosts(name) {
			if !slices.Contains(hosts, h) {
				hosts = append(hosts, h)
			}
		}
		w := want{cn: name, hosts: hosts, server: true, client: true}
		if err := is.ensure(name+".crt", name+".key", w); err != nil {
			return nil, err
		}
	}
	if err := is.ensure(AdminCert, AdminKey, want{cn: "admin", groups: []string{"system:masters"}, client: true}); err != nil {
		return nil, err
	}
	if err := is.ensure(ControllersCert, ControllersKey, want{cn: naming.ControllerManagerUser, client: true}); err != nil {
		return nil, err
	}
	if err := writeKubeconfig(filepath.Join(o.Dir, ControllersKubeconfig), ca, o.InternalServer, naming.ControllerManagerUser,
		filepath.Join(o.Dir, ControllersCert), filepath.Join(o.Dir, ControllersKey), "", res); err != nil {
		return nil, err
	}
	if err := writeKubeconfig(filepath.Join(o.KubeconfigDir, AdminKubeconfig), ca, o.Server, "admin",
		filepath.Join(o.Dir, AdminCert), filepath.Join(o.Dir, AdminKey), "default", res); err != nil {
		return nil, err
	}
	if o.KubeconfigDir != o.Dir {
		if err := writeIfChanged(filepath.Join(o.KubeconfigDir, CACert), ca.CertPEM, 0o644, res); err != nil {
			return nil, err
		}
	}
	if o.Owner != "" {
		uid, gid, _ := parseOwner(o.Owner)
		if err := chownTree(o.Dir, uid, gid); err != nil {
			return nil, err
		}
	}
	if o.KubeconfigOwnerOf != "" {
		uid, gid, err := ownerOf(o.KubeconfigOwnerOf)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig-owner-of: %w", err)
		}
		for _, f := range []string{AdminKubeconfig, CACert} {
			p := filepath.Join(o.KubeconfigDir, f)
			if _, err := os.Stat(p); err == nil {
				if err := os.Chown(p, uid, gid); err != nil {
					return nil, err
				}
			}
		}
	}
	return res, nil
}

func state(created, renewed bool) string {
	switch {
	case created:
		return "created"
	case renewed:
		return "renewed"
	}
	return "kept"
}

func ensureSigningKey(path string, res Result) error {
	_, err := os.Stat(path)
	existed := err == nil
	if err := pki.EnsureSigningKey(path); err != nil {
		return err
	}
	res[filepath.Base(path)] = state(!existed, false)
	return nil
}

// want is what a certificate must be.
type want struct {
	cn             string
	groups         []string
	hosts          []string
	server, client bool
}

type issuer struct {
	ca  *pki.CA
	o   Options
	res Result
	// newCA: the CA was just created, so nothing signed before can be valid.
	newCA bool
}

// ensure keeps certFile/keyFile when they are valid and issues them otherwise.
func (is *issuer) ensure(certName, keyName string, w want) error {
	certFile, keyFile := filepath.Join(is.o.Dir, certName), filepath.Join(is.o.Dir, keyName)
	_, statErr := os.Stat(certFile)
	existed := statErr == nil
	if existed && is.valid(certFile, keyFile, w) {
		is.res[certName] = "kept"
		return nil
	}
	var certPEM, keyPEM []byte
	var err error
	switch {
	case w.server && w.client:
		certPEM, keyPEM, err = is.ca.IssuePeer(w.cn, w.hosts, is.o.Validity)
	case w.server:
		certPEM, keyPEM, err = is.ca.IssueServing(w.cn, w.hosts, is.o.Validity)
	default:
		certPEM, keyPEM, err = is.ca.IssueClient(w.cn, w.groups, is.o.Validity)
	}
	if err != nil {
		return err
	}
	if err := pki.WritePair(certFile, keyFile, certPEM, keyPEM); err != nil {
		return err
	}
	is.res[certName] = state(!existed, true)
	return nil
}

// valid tells whether the pair on disk matches w, belongs together, chains to the CA and has
// more than RenewBefore left.
func (is *issuer) valid(certFile, keyFile string, w want) bool {
	if is.newCA {
		return false
	}
	certPEM, err1 := os.ReadFile(certFile)
	keyPEM, err2 := os.ReadFile(keyFile)
	if err1 != nil || err2 != nil {
		return false
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return false
	}
	cert, err := pki.ParseCertificatePEM(certPEM)
	if err != nil {
		return false
	}
	if time.Until(cert.NotAfter) < is.o.RenewBefore {
		return false
	}
	roots := x509.NewCertPool()
	roots.AddCert(is.ca.Cert)
	var usages []x509.ExtKeyUsage
	if w.server {
		usages = append(usages, x509.ExtKeyUsageServerAuth)
	}
	if w.client {
		usages = append(usages, x509.ExtKeyUsageClientAuth)
	}
	for _, u := range usages {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
			return false
		}
	}
	if cert.Subject.CommonName != w.cn || !slices.Equal(cert.Subject.Organization, w.groups) {
		return false
	}
	for _, h := range w.hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
				return false
			}
		} else if !slices.Contains(cert.DNSNames, h) {
			return false
		}
	}
	return true
}

// writeKubeconfig writes a kubeconfig for user from the pair on disk; the file is rewritten only
// when its content changes.
func writeKubeconfig(path string, ca *pki.CA, server, user, certFile, keyFile, namespace string, res Result) error {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return err
	}
	old, _ := os.ReadFile(path)
	// Render into a scratch file next to the target, then keep whichever is current.
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".new")
	if err := pki.WriteKubeconfig(tmp, pki.Kubeconfig{ClusterName: naming.Product, UserName: user, Server: server,
		CAPEM: ca.CertPEM, CertPEM: certPEM, KeyPEM: keyPEM, Namespace: namespace}); err != nil {
		return err
	}
	data, err := os.ReadFile(tmp)
	if err != nil {
		return err
	}
	name := filepath.Base(path)
	if old != nil && bytes.Equal(old, data) {
		res[name] = "kept"
		return os.Remove(tmp)
	}
	res[name] = state(old == nil, true)
	return os.Rename(tmp, path)
}

func writeIfChanged(path string, data []byte, mode os.FileMode, res Result) error {
	old, err := os.ReadFile(path)
	if err == nil && bytes.Equal(old, data) {
		res[filepath.Base(path)] = "kept"
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	res[filepath.Base(path)] = state(old == nil, true)
	return os.Rename(tmp, path)
}

func parseOwner(s string) (uid, gid int, err error) {
	u, g, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("%q is not uid:gid", s)
	}
	if uid, err = strconv.Atoi(u); err != nil || uid < 0 {
		return 0, 0, fmt.Errorf("%q is not uid:gid", s)
	}
	if gid, err = strconv.Atoi(g); err != nil || gid < 0 {
		return 0, 0, fmt.Errorf("%q is not uid:gid", s)
	}
	return uid, gid, nil
}

func chownTree(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
}
