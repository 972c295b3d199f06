package e2e

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"platform.io/libs/naming"
	"platform.io/test/stack"
)

// The kubernetes naming profile: the system speaks upstream's names, so client-go's typed
// clientset (k8s.io/client-go/kubernetes, over upstream's Protobuf media type) and kubectl's
// commands that hard-code upstream's groups work unchanged. `make test` runs this package once
// in each profile (PLATFORM_NAMING_PROFILE); these tests are about the kubernetes profile and run
// in that pass, on the shared split stack and on an all-in-one.

func requireKubernetesProfile(t *testing.T) {
	t.Helper()
	if naming.ProfileName() != naming.KubernetesProfile {
		t.Skipf("runs in the kubernetes naming profile pass of `make test` (PLATFORM_NAMING_PROFILE=kubernetes); this pass is %s", naming.ProfileName())
	}
}

func TestKubernetesProfileTypedClientset(t *testing.T) {
	requireKubernetesProfile(t)
	typedClientset(t, useShared(t))
}

func TestKubernetesProfileTypedClientsetAllInOne(t *testing.T) {
	requireKubernetesProfile(t)
	t.Parallel()
	typedClientset(t, startStack(t, stack.Options{Mode: stack.AllInOne}))
}

func typedClientset(t *testing.T, s *stack.Stack) {
	cfg := restConfig(t, s, "e2e-admin")
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 90*time.Second)
	ns := createNamespace(t, dynamicClient(t, s), "e2e-kprof-")

	// Discovery and the control plane's namespaces carry upstream's names.
	groups, err := c.Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, g := range groups.Groups {
		served[g.Name] = true
		if strings.HasSuffix(g.Name, ".platform.io") {
			t.Errorf("group %s served in the kubernetes profile", g.Name)
		}
	}
	for _, g := range []string{"rbac.authorization.k8s.io", "certificates.k8s.io", "coordination.k8s.io", "authentication.k8s.io", "authorization.k8s.io"} {
		if !served[g] {
			t.Errorf("discovery lacks %s", g)
		}
	}
	for _, name := range []string{"kube-system", "kube-public", "kube-node-lease"} {
		if _, err := c.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("namespace %s: %v", name, err)
		}
	}

	// Authentication: who am I, with upstream's extra keys.
	ssr, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview: %v", err)
	}
	if ssr.Status.UserInfo.Username != "e2e-admin" || len(ssr.Status.UserInfo.Extra["authentication.kubernetes.io/credential-id"]) != 1 {
		t.Errorf("SelfSubjectReview: %+v", ssr.Status.UserInfo)
	}

	// RBAC through the typed client, checked with a SubjectAccessReview: a Role that lets reader
	// get config maps, bound in the namespace.
	role, err := c.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "cm-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a Role: %v", err)
	}
	if role.APIVersion != "" && role.APIVersion != "rbac.authorization.k8s.io/v1" {
		t.Errorf("Role apiVersion %q", role.APIVersion)
	}
	if _, err := c.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cm-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cm-reader"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "reader"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a RoleBinding: %v", err)
	}
	review := func(verb string) (bool, error) {
		sar, err := c.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "reader", ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Resource: "configmaps"}}}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return sar.Status.Allowed, nil
	}
	stack.Eventually(t, 30*time.Second, "reader allowed to get config maps", func() error {
		if ok, err := review("get"); err != nil || !ok {
			return fmt.Errorf("allowed %v, err %v", ok, err)
		}
		return nil
	})
	if ok, err := review("delete"); err != nil || ok {
		t.Errorf("reader may delete config maps: %v %v", ok, err)
	}
	reader, err := kubernetes.NewForConfig(restConfig(t, s, "reader", "e2e-readers"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reader.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("reader lists config maps: %v", err)
	}
	if _, err := reader.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("reader lists secrets: %v, want Forbidden", err)
	}

	// Coordination: a Lease acquired and renewed, as leader election does.
	now := metav1.NewMicroTime(time.Now().Truncate(time.Microsecond)) // MicroTime keeps microseconds
	lease, err := c.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "leader"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("e2e"), LeaseDurationSeconds: ptr.To[int32](15), AcquireTime: &now, RenewTime: &now}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a Lease: %v", err)
	}
	renewed := metav1.NewMicroTime(now.Add(5 * time.Second))
	lease.Spec.RenewTime = &renewed
	if _, err := c.CoordinationV1().Leases(ns).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("renewing the Lease: %v", err)
	}
	got, err := c.CoordinationV1().Leases(ns).Get(ctx, "leader", metav1.GetOptions{})
	if err != nil || got.Spec.RenewTime == nil || !got.Spec.RenewTime.Equal(&renewed) || *got.Spec.HolderIdentity != "e2e" {
		t.Errorf("the renewed Lease: %+v, %v", got, err)
	}

	// Certificates: a request signed by upstream's API server client signer after an approval
	// through the typed client's approval subresource.
	name := "kprof-" + strings.ToLower(utilrand.String(5))
	request, _ := newCSR(t, name, []string{"e2e"})
	csr, err := c.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: request, SignerName: certificatesv1.KubeAPIServerClientSignerName,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}, ExpirationSeconds: ptr.To[int32](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a CertificateSigningRequest: %v", err)
	}
	t.Cleanup(func() {
		_ = c.CertificatesV1().CertificateSigningRequests().Delete(ctxFor(t, 10*time.Second), name, metav1.DeleteOptions{})
	})
	if csr.Spec.Username != "e2e-admin" {
		t.Errorf("requestor %q", csr.Spec.Username)
	}
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: "True", Reason: "E2E", Message: "approved by the typed client"})
	if _, err := c.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, name, csr, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("UpdateApproval: %v", err)
	}
	var cert *x509.Certificate
	stack.Eventually(t, 30*time.Second, "the signed certificate", func() error {
		got, err := c.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		block, _ := pem.Decode(got.Status.Certificate)
		if block == nil {
			return errors.New("no certificate yet")
		}
		cert, err = x509.ParseCertificate(block.Bytes)
		return err
	})
	if cert.Subject.CommonName != name || len(cert.ExtKeyUsage) != 1 || cert.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Errorf("issued certificate: subject %v, usages %v", cert.Subject, cert.ExtKeyUsage)
	}
	verify(t, s, cert, x509.ExtKeyUsageClientAuth)
}

// kubectl's commands that hard-code upstream's groups: auth whoami and can-i, create role,
// create clusterrolebinding (certificate approve and deny are in TestCertificateSigningWithKubectl).
func TestKubernetesProfileKubectl(t *testing.T) {
	requireKubernetesProfile(t)
	s := useShared(t)
	ns := createNamespace(t, dynamicClient(t, s), "e2e-kprof-kubectl-")
	k := newKubectl(t, s, ns)
	if out := k.ok("", "auth", "whoami"); !strings.Contains(out, "authentication.kubernetes.io/credential-id") {
		t.Errorf("kubectl auth whoami:\n%s", out)
	}
	user := "kprof-" + strings.ToLower(utilrand.String(5))
	if out := k.ok("", "create", "role", "pod-reader", "--verb=get,list", "--resource=pods"); strings.TrimSpace(out) != "role.rbac.authorization.k8s.io/pod-reader created" {
		t.Errorf("kubectl create role: %q", out)
	}
	k.ok("", "create", "rolebinding", "pod-reader", "--role=pod-reader", "--user="+user)
	crb := "e2e-" + user
	if out := k.ok("", "create", "clusterrolebinding", crb, "--clusterrole=view", "--user="+user); strings.TrimSpace(out) != "clusterrolebinding.rbac.authorization.k8s.io/"+crb+" created" {
		t.Errorf("kubectl create clusterrolebinding: %q", out)
	}
	t.Cleanup(func() { k.run("", "delete", "clusterrolebinding", crb) })
	stack.Eventually(t, 30*time.Second, user+" may list pods cluster-wide", func() error {
		if out, _, _ := k.run("", "auth", "can-i", "list", "pods", "--all-namespaces", "--as="+user); strings.TrimSpace(out) != "yes" {
			return fmt.Errorf("kubectl auth can-i: %q", out)
		}
		return nil
	})
	if out, _, _ := k.run("", "auth", "can-i", "delete", "pods", "--as="+user); strings.TrimSpace(out) != "no" {
		t.Errorf("kubectl auth can-i delete pods: %q, want no", out)
	}
	if out := k.ok("", "get", "rolebindings", "-o", "jsonpath={.items[*].roleRef.apiGroup}"); strings.TrimSpace(out) != "rbac.authorization.k8s.io" {
		t.Errorf("role binding roleRef group: %q", out)
	}
}
