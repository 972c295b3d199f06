package csrapproving_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"platform.io/libs/naming"
	"platform.io/services/controllers/apiclient"
	"platform.io/services/controllers/csrapproving"
	"platform.io/services/controllers/csrcleaner"
	"platform.io/services/controllers/internal/testenv"
	"platform.io/services/controllers/metrics"
)

const bound = 20 * time.Second

// quiet is how long a request that must stay pending is watched once the controller has looked
// at it.
const quiet = time.Second

const bootstrappers = "system:bootstrappers"

var (
	certGroup          = naming.Group("certificates.k8s.io")
	nodeClientRole     = "system:" + certGroup + ":certificatesigningrequests:nodeclient"
	selfNodeClientRole = "system:" + certGroup + ":certificatesigningrequests:selfnodeclient"
	goodUsages         = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}
)

// denials records the requests the controller found not authorized (its debug log line).
type denials struct {
	mu    sync.Mutex
	names map[string]int
}

func (d *denials) Enabled(context.Context, slog.Level) bool { return true }
func (d *denials) WithAttrs([]slog.Attr) slog.Handler       { return d }
func (d *denials) WithGroup(string) slog.Handler            { return d }
func (d *denials) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message != "node client certificate request not authorized" {
		return nil
	}
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "name" {
			d.mu.Lock()
			d.names[a.Value.String()]++
			d.mu.Unlock()
		}
		return true
	})
	return nil
}

// seen waits until the controller has found name not authorized.
func (d *denials) seen(t *testing.T, name string) {
	t.Helper()
	testenv.Eventually(t, bound, name+" found not authorized", func() (bool, string) {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.names[name] > 0, fmt.Sprint(d.names)
	})
}

// start runs the controller as the controller manager (RBAC: what the default policy grants it).
func start(t *testing.T, env *testenv.Env) (*metrics.Metrics, *denials) {
	t.Helper()
	inf := env.Informers().Certificates().V1().CertificateSigningRequests()
	m := metrics.New(prometheus.NewRegistry())
	d := &denials{names: map[string]int{}}
	c, err := csrapproving.New(env.Clients.Certificates, env.Clients.Authorization, inf, csrapproving.Options{Metrics: m, Log: slog.New(d)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go inf.Informer().Run(ctx.Done())
	go func() { defer close(done); c.Run(ctx, csrapproving.DefaultWorkers) }()
	t.Cleanup(func() { cancel(); <-done })
	return m, d
}

// bind binds a ClusterRole to subjects (as an admin).
func bind(t *testing.T, env *testenv.Env, name, role string, subjects ...rbacv1.Subject) {
	t.Helper()
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: naming.Group(rbacv1.GroupName), Kind: "ClusterRole", Name: role},
		Subjects:   subjects,
	}
	if _, err := env.Admin.RBAC.ClusterRoleBindings().Create(context.Background(), b, metav1.CreateOptions{}); err != nil {
		t.Fatalf("binding %s: %v", role, err)
	}
}

func group(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: naming.Group(rbacv1.GroupName), Name: name}
}

func user(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: naming.Group(rbacv1.GroupName), Name: name}
}

// requester is a client of the certificates API with a client certificate of one identity.
type requester struct {
	t      *testing.T
	client rest.Interface
}

func as(t *testing.T, env *testenv.Env, name string, groups ...string) *requester {
	t.Helper()
	cert, key := env.ClientCert(name, groups...)
	c, err := apiclient.New(&rest.Config{Host: env.URL, TLSClientConfig: rest.TLSClientConfig{CAFile: env.CAFile, CertData: cert, KeyData: key}})
	if err != nil {
		t.Fatal(err)
	}
	return &requester{t: t, client: c.Certificates.RESTClient()}
}

// request describes a CertificateSigningRequest.
type request struct {
	name, cn string
	orgs     []string
	dnsNames []string
	signer   string
	usages   []certificatesv1.KeyUsage
}

// node is a valid node client request for CN system:node:<nodeName>.
func node(name, nodeName string) request {
	return request{name: name, cn: "system:node:" + nodeName, orgs: []string{"system:nodes"},
		signer: naming.SignerAPIServerClientKubelet, usages: goodUsages}
}

func (r *requester) create(in request) {
	r.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		r.t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: in.cn, Organization: in.orgs}, DNSNames: in.dnsNames}, key)
	if err != nil {
		r.t.Fatal(err)
	}
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: in.name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: in.signer,
			Usages:     in.usages,
		},
	}
	// A binding just created takes effect within a moment (the authorization service compiles
	// the policy from its watch): forbidden is retried until then.
	testenv.Eventually(r.t, bound, "creating "+in.name, func() (bool, string) {
		err := r.client.Post().Resource(csrcleaner.Resource).Body(csr).Do(context.Background()).Error()
		if err != nil && !apierrors.IsForbidden(err) {
			r.t.Fatalf("creating %s: %v", in.name, err)
		}
		return err == nil, testenv.Short(err)
	})
}

// admin reads requests.
type admin struct{ client rest.Interface }

func newAdmin(t *testing.T, env *testenv.Env) admin {
	return admin{client: env.Admin.Certificates.RESTClient()}
}

func (a admin) get(name string) (*certificatesv1.CertificateSigningRequest, error) {
	out := &certificatesv1.CertificateSigningRequest{}
	err := a.client.Get().Resource(csrcleaner.Resource).Name(name).Do(context.Background()).Into(out)
	return out, err
}

func approvedCondition(csr *certificatesv1.CertificateSigningRequest) *certificatesv1.CertificateSigningRequestCondition {
	for i, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved {
			return &csr.Status.Conditions[i]
		}
	}
	return nil
}

// approved waits until name carries the controller's Approved condition (with the message for a
// request of another node's certificate).
func (a admin) approved(t *testing.T, name string) {
	t.Helper()
	a.approvedWith(t, name, csrapproving.ApprovedMessage)
}

// approvedWith waits until name carries the controller's Approved condition with message.
func (a admin) approvedWith(t *testing.T, name, message string) {
	t.Helper()
	testenv.Eventually(t, bound, name+" auto-approved", func() (bool, string) {
		csr, err := a.get(name)
		if err != nil {
			return false, testenv.Short(err)
		}
		c := approvedCondition(csr)
		if c == nil {
			return false, fmt.Sprint("conditions ", csr.Status.Conditions)
		}
		if c.Status != "True" || c.Reason != csrapproving.ApprovedReason || c.Message != message {
			t.Fatalf("%s: Approved condition %+v", name, *c)
		}
		return true, ""
	})
}

// anyApproved is true once one of names has an Approved condition.
func (a admin) anyApproved(names ...string) func() (bool, string) {
	return func() (bool, string) {
		for _, n := range names {
			csr, err := a.get(n)
			if err == nil && approvedCondition(csr) != nil {
				return true, n + " approved"
			}
		}
		return false, ""
	}
}

// syncedAtLeast waits until the controller has made n syncs.
func syncedAtLeast(t *testing.T, m *metrics.Metrics, n float64) {
	t.Helper()
	testenv.Eventually(t, bound, fmt.Sprint(n, " syncs"), func() (bool, string) {
		got := testutil.ToFloat64(m.Syncs.WithLabelValues(csrapproving.Name))
		return got >= n, fmt.Sprint(got, " syncs")
	})
}

func noErrors(t *testing.T, m *metrics.Metrics) {
	t.Helper()
	if n := testutil.ToFloat64(m.Errors.WithLabelValues(csrapproving.Name)); n != 0 {
		t.Errorf("%v sync errors", n)
	}
}

// A bootstrap credential (group system:bootstrappers) bound to the nodeclient role gets its node
// client request approved; without the role (a second token's group) its request stays pending.
func TestBootstrapNodeClient(t *testing.T) {
	env := testenv.StartRBAC(t)
	api := newAdmin(t, env)
	m, denied := start(t, env)
	// kubeadm's bindings: bootstrappers may create requests, and have them approved.
	bind(t, env, "test-bootstrappers-create", "system:node-bootstrapper", group(bootstrappers), group("test:other-bootstrappers"))
	bind(t, env, "test-bootstrappers-nodeclient", nodeClientRole, group(bootstrappers))

	as(t, env, "system:bootstrap:abc123", bootstrappers).create(node("bootstrap-n1", "n1"))
	api.approved(t, "bootstrap-n1")

	// The other group may create requests but not have them approved.
	as(t, env, "system:bootstrap:def456", "test:other-bootstrappers").create(node("unbound-n2", "n2"))
	denied.seen(t, "unbound-n2")
	testenv.Never(t, quiet, "approval without the nodeclient role", api.anyApproved("unbound-n2"))
	noErrors(t, m)
}

// A node renewing its own client certificate (user system:node:n1, CN system:node:n1) is
// approved once the selfnodeclient role is bound to it, and stays pending before: the controller
// looks again (with backoff) and approves after the binding is created.
func TestSelfNodeClient(t *testing.T) {
	env := testenv.StartRBAC(t)
	api := newAdmin(t, env)
	m, denied := start(t, env)
	bind(t, env, "test-nodes-create", "system:node-bootstrapper", group("system:nodes"))

	as(t, env, "system:node:n1", "system:nodes").create(node("renew-n1", "n1"))
	denied.seen(t, "renew-n1")
	testenv.Never(t, quiet, "approval without the selfnodeclient role", api.anyApproved("renew-n1"))
	if csr, err := api.get("renew-n1"); err != nil || len(csr.Status.Conditions) != 0 {
		t.Fatalf("renew-n1 not pending: %v %v", err, csr.Status.Conditions)
	}

	bind(t, env, "test-nodes-selfnodeclient", selfNodeClientRole, group("system:nodes"))
	api.approvedWith(t, "renew-n1", csrapproving.SelfApprovedMessage)
	// The role covers requests for the node's own name only: nodeclient is what another node's
	// certificate needs (NodeRestriction refuses such a request from a node anyway, so the
	// case is a bootstrapper's: TestBootstrapNodeClient).
	noErrors(t, m)
}

// As upstream, a node's own request is also approved when the node may create nodeclient (the
// permission asked after selfnodeclient), with the other message.
func TestSelfNodeClientThroughNodeClient(t *testing.T) {
	env := testenv.StartRBAC(t)
	api := newAdmin(t, env)
	m, _ := start(t, env)
	bind(t, env, "test-nodes-create", "system:node-bootstrapper", group("system:nodes"))
	bind(t, env, "test-nodes-nodeclient", nodeClientRole, group("system:nodes"))
	as(t, env, "system:node:n2", "system:nodes").create(node("renew-n2", "n2"))
	api.approvedWith(t, "renew-n2", csrapproving.ApprovedMessage)
	noErrors(t, m)
}

// Requests that are not valid node client requests stay pending even though their requester may
// have any node's client certificate approved.
func TestNotNodeClientRequests(t *testing.T) {
	env := testenv.StartRBAC(t)
	api := newAdmin(t, env)
	m, _ := start(t, env)
	bind(t, env, "test-bootstrappers-create", "system:node-bootstrapper", group(bootstrappers))
	bind(t, env, "test-bootstrappers-nodeclient", nodeClientRole, group(bootstrappers))
	bootstrap := as(t, env, "system:bootstrap:abc123", bootstrappers)

	bad := []request{}
	add := func(name string, edit func(*request)) {
		r := node(name, "n1")
		edit(&r)
		bad = append(bad, r)
	}
	add("wrong-org", func(r *request) { r.orgs = []string{"system:masters"} })
	add("extra-org", func(r *request) { r.orgs = []string{"system:nodes", "system:masters"} })
	add("no-org", func(r *request) { r.orgs = nil })
	add("extra-usage", func(r *request) { r.usages = append(r.usages, certificatesv1.UsageServerAuth) })
	add("no-client-auth", func(r *request) {
		r.usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment}
	})
	add("no-digital-signature", func(r *request) {
		r.usages = []certificatesv1.KeyUsage{certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}
	})
	add("with-san", func(r *request) { r.dnsNames = []string{"n1.example.com"} })
	add("not-a-node", func(r *request) { r.cn = "system:admin" })
	add("empty-node-name", func(r *request) { r.cn = "system:node:" })
	add("other-signer", func(r *request) { r.signer = "example.com/node-client" })
	var names []string
	for _, r := range bad {
		bootstrap.create(r)
		names = append(names, r.name)
	}
	// Upstream's other valid usage set: without key encipherment (non-RSA keys).
	good := node("no-key-encipherment", "n1")
	good.usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	bootstrap.create(good)
	api.approved(t, good.name)

	// Every request looked at (the approved one twice: its approval is an update).
	syncedAtLeast(t, m, float64(len(bad)+2))
	testenv.Never(t, quiet, "approval of a request that is not a node client request", api.anyApproved(names...))
	noErrors(t, m)
}
