package apiserver_test

import (
	"encoding/pem"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"platform.io/libs/naming"
	authz "platform.io/services/authz/server"
	"platform.io/services/gateway/gatewaytest"
)

var csrAPI = "/apis/certificates." + naming.GroupSuffix + "/v1/certificatesigningrequests"

// csrBody is a v1 CertificateSigningRequest body; edit adjusts its spec.
func csrBody(name string, request []byte, edit ...func(spec map[string]any)) map[string]any {
	spec := map[string]any{"request": request, "signerName": "example.com/widgets", "usages": []any{"client auth", "digital signature"}}
	for _, f := range edit {
		f(spec)
	}
	return map[string]any{"apiVersion": "certificates." + naming.GroupSuffix + "/v1", "kind": "CertificateSigningRequest",
		"metadata": map[string]any{"name": name}, "spec": spec}
}

// condition is a status.conditions entry (without timestamps: the server sets them).
func condition(typ, status string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": "Test", "message": "set by the test"}
}

// withConditions returns a copy of a stored request with its conditions replaced.
func withConditions(obj map[string]any, conds ...map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range obj {
		out[k] = v
	}
	status, _ := obj["status"].(map[string]any)
	ns := map[string]any{}
	for k, v := range status {
		ns[k] = v
	}
	list := make([]any, 0, len(conds))
	for _, c := range conds {
		list = append(list, c)
	}
	ns["conditions"] = list
	out["status"] = ns
	return out
}

func conditionTypes(obj map[string]any) []string {
	var out []string
	list, _ := path(obj, "status.conditions").([]any)
	for _, c := range list {
		out = append(out, c.(map[string]any)["type"].(string))
	}
	return out
}

// Spec "CertificateSigningRequest": create stamps the requestor from the caller's identity and
// starts with an empty status; every malformed spec is 422 and stores nothing; spec never
// changes; the approval subresource sets Approved or Denied (never both, never removed); the
// status subresource issues a certificate only for an approved request, once; discovery lists
// the approval subresource; kubectl's columns.
func TestCertificateSigningRequestRules(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	carol := e.Client("carol", "dev")
	cert, _ := e.ClientCert("issued")

	t.Run("create takes the requestor from the caller", func(t *testing.T) {
		body := csrBody("carol-1", csrPEM(t, "carol"), func(s map[string]any) {
			s["username"], s["uid"], s["groups"] = "mallory", "forged", []any{"system:masters"}
			s["extra"] = map[string]any{"forged": []any{"x"}}
		})
		body["status"] = map[string]any{"conditions": []any{condition("Approved", "True")}, "certificate": []byte(cert)}
		got := must(t, call(t, carol, e, "POST", csrAPI, body), http.StatusCreated)
		stored := must(t, do(t, e, "GET", csrAPI+"/carol-1", nil), http.StatusOK)
		for _, obj := range []map[string]any{got, stored} {
			// The caller's extra attributes are recorded too (its client certificate's credential id).
			extra, _ := path(obj, "spec.extra").(map[string]any)
			if path(obj, "spec.username") != "carol" || path(obj, "spec.uid") != nil || extra["forged"] != nil || extra[naming.UserExtraKey("credential-id")] == nil {
				t.Errorf("requestor not from the caller: username %v uid %v extra %v", path(obj, "spec.username"), path(obj, "spec.uid"), extra)
			}
			groups, _ := path(obj, "spec.groups").([]any)
			if !slices.Contains(groups, any("dev")) || slices.Contains(groups, any("system:masters")) {
				t.Errorf("groups not from the caller: %v", groups)
			}
			if st, _ := obj["status"].(map[string]any); len(st) != 0 {
				t.Errorf("status not cleared on create: %v", st)
			}
		}
	})

	t.Run("malformed requests are 422 and not stored", func(t *testing.T) {
		goodCSR := csrPEM(t, "carol")
		block, _ := pem.Decode(goodCSR)
		tampered := append([]byte(nil), block.Bytes...)
		tampered[len(tampered)-1] ^= 0xff // a signature bit
		badSignature := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: tampered})
		garbage := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte(strings.Repeat("\x30\x82\xff", 20000))})
		set := func(k string, v any) func(map[string]any) { return func(s map[string]any) { s[k] = v } }
		for _, c := range []struct {
			name    string
			body    map[string]any
			field   string
			message string
		}{
			{"not PEM", csrBody("bad", []byte("hello, I am not PEM")), "spec.request", "no PEM data"},
			{"certificate PEM", csrBody("bad", cert), "spec.request", `found "CERTIFICATE"`},
			{"bad signature", csrBody("bad", badSignature), "spec.request", "signature"},
			{"unparseable", csrBody("bad", garbage), "spec.request", "cannot parse"},
			{"malformed signer", csrBody("bad", goodCSR, set("signerName", "widgets")), "spec.signerName", "example.com/signer-name"},
			{"signer without domain dots", csrBody("bad", goodCSR, set("signerName", "example/widgets")), "spec.signerName", "at least two segments"},
			{"signer with bad path", csrBody("bad", goodCSR, set("signerName", "example.com/Widgets_")), "spec.signerName", "validating component"},
			{"legacy signer", csrBody("bad", goodCSR, set("signerName", naming.SignerLegacyUnknown)), "spec.signerName", "the legacy signerName is not allowed via this API version"},
			{"unknown usage", csrBody("bad", goodCSR, set("usages", []any{"client auth", "world domination"})), "spec.usages[1]", "Unsupported value"},
			{"duplicate usage", csrBody("bad", goodCSR, set("usages", []any{"client auth", "client auth"})), "spec.usages[1]", "Duplicate value"},
			{"no usages", csrBody("bad", goodCSR, set("usages", []any{})), "spec.usages", "Required value"},
			{"expirationSeconds 599", csrBody("bad", goodCSR, set("expirationSeconds", 599)), "spec.expirationSeconds", "600"},
		} {
			t.Run(c.name, func(t *testing.T) {
				msg := call(t, carol, e, "POST", csrAPI, c.body).status(t, http.StatusUnprocessableEntity, "Invalid")
				if !strings.Contains(msg, c.field) || !strings.Contains(msg, c.message) {
					t.Errorf("message %q lacks %q and %q", msg, c.field, c.message)
				}
				do(t, e, "GET", csrAPI+"/bad", nil).status(t, http.StatusNotFound, "NotFound")
			})
		}
		// A missing signerName is a missing required field: 400 under the project's rule for
		// required fields (required.go), stored nothing either.
		noSigner := csrBody("bad", goodCSR)
		delete(noSigner["spec"].(map[string]any), "signerName")
		if msg := call(t, carol, e, "POST", csrAPI, noSigner).status(t, http.StatusBadRequest, "BadRequest"); !strings.Contains(msg, "spec.signerName: Required value") {
			t.Errorf("missing signerName: %q", msg)
		}
		do(t, e, "GET", csrAPI+"/bad", nil).status(t, http.StatusNotFound, "NotFound")
		// 600 seconds is allowed.
		must(t, call(t, carol, e, "POST", csrAPI, csrBody("ten-minutes", goodCSR, set("expirationSeconds", 600))), http.StatusCreated)
	})

	t.Run("spec is immutable", func(t *testing.T) {
		cur := must(t, call(t, carol, e, "POST", csrAPI, csrBody("immutable", csrPEM(t, "carol"))), http.StatusCreated)
		cur["spec"].(map[string]any)["usages"] = []any{"server auth"}
		msg := do(t, e, "PUT", csrAPI+"/immutable", cur).status(t, http.StatusUnprocessableEntity, "Invalid")
		if !strings.Contains(msg, "spec.usages") || !strings.Contains(msg, "field is immutable") {
			t.Errorf("PUT changing usages: %q", msg)
		}
		msg = do(t, e, "PATCH", csrAPI+"/immutable", map[string]any{"spec": map[string]any{"signerName": "example.com/other", "username": "mallory"}},
			"Content-Type", "application/merge-patch+json").status(t, http.StatusUnprocessableEntity, "Invalid")
		if !strings.Contains(msg, "spec.signerName") || !strings.Contains(msg, "spec.username") || !strings.Contains(msg, "field is immutable") {
			t.Errorf("PATCH changing the signer and requestor: %q", msg)
		}
		// Metadata still changes; status through the main resource is ignored.
		got := must(t, do(t, e, "PATCH", csrAPI+"/immutable", map[string]any{"metadata": map[string]any{"labels": map[string]any{"a": "b"}},
			"status": map[string]any{"conditions": []any{condition("Approved", "True")}}}, "Content-Type", "application/merge-patch+json"), http.StatusOK)
		if path(got, "metadata.labels.a") != "b" || len(conditionTypes(got)) != 0 || path(got, "spec.username") != "carol" {
			t.Errorf("main resource patch: %v", got)
		}
	})

	t.Run("approval", func(t *testing.T) {
		cur := must(t, call(t, carol, e, "POST", csrAPI, csrBody("approve-me", csrPEM(t, "carol"))), http.StatusCreated)
		// Only the conditions change through approval: the spec and labels in the body are ignored.
		body := withConditions(cur, condition("Approved", "True"))
		body["spec"] = map[string]any{"request": cur["spec"].(map[string]any)["request"], "signerName": "example.com/other", "usages": []any{"server auth"}}
		body["metadata"].(map[string]any)["labels"] = map[string]any{"sneaky": "yes"}
		approved := must(t, do(t, e, "PUT", csrAPI+"/approve-me/approval", body), http.StatusOK)
		if got := conditionTypes(approved); !slices.Equal(got, []string{"Approved"}) {
			t.Fatalf("conditions after approval: %v", got)
		}
		c := path(approved, "status.conditions").([]any)[0].(map[string]any)
		if c["lastUpdateTime"] == nil || c["lastTransitionTime"] == nil {
			t.Errorf("condition timestamps not defaulted: %v", c)
		}
		if path(approved, "spec.signerName") != "example.com/widgets" || path(approved, "metadata.labels") != nil {
			t.Errorf("approval changed more than conditions: %v", approved)
		}
		stored := must(t, do(t, e, "GET", csrAPI+"/approve-me", nil), http.StatusOK)
		if !slices.Equal(conditionTypes(stored), []string{"Approved"}) {
			t.Errorf("stored conditions: %v", conditionTypes(stored))
		}
		// GET on the subresource reads the object.
		must(t, do(t, e, "GET", csrAPI+"/approve-me/approval", nil), http.StatusOK)

		for _, c := range []struct {
			name    string
			conds   []map[string]any
			message string
		}{
			{"approved and denied", []map[string]any{condition("Approved", "True"), condition("Denied", "True")}, "mutually exclusive"},
			{"removing Approved", nil, `updates may not remove a condition of type "Approved"`},
			{"Approved False", []map[string]any{condition("Approved", "False")}, "status.conditions[0].status"},
			{"duplicate Approved", []map[string]any{condition("Approved", "True"), condition("Approved", "True")}, "status.conditions[1].type"},
			{"Failed not True", []map[string]any{condition("Approved", "True"), condition("Failed", "False")}, "status.conditions[1].status"},
		} {
			msg := do(t, e, "PUT", csrAPI+"/approve-me/approval", withConditions(stored, c.conds...)).status(t, http.StatusUnprocessableEntity, "Invalid")
			if !strings.Contains(msg, c.message) {
				t.Errorf("%s: message %q lacks %q", c.name, msg, c.message)
			}
		}
		// The same through PATCH (a merge patch replaces the list).
		msg := do(t, e, "PATCH", csrAPI+"/approve-me/approval", map[string]any{"status": map[string]any{"conditions": []any{condition("Denied", "True")}}},
			"Content-Type", "application/merge-patch+json").status(t, http.StatusUnprocessableEntity, "Invalid")
		if !strings.Contains(msg, `remove a condition of type "Approved"`) {
			t.Errorf("PATCH replacing Approved with Denied: %q", msg)
		}

		// Denying a pending request through PATCH; a denied request cannot be approved later.
		must(t, call(t, carol, e, "POST", csrAPI, csrBody("deny-me", csrPEM(t, "carol"))), http.StatusCreated)
		denied := must(t, do(t, e, "PATCH", csrAPI+"/deny-me/approval", map[string]any{"status": map[string]any{"conditions": []any{condition("Denied", "True")}}},
			"Content-Type", "application/merge-patch+json"), http.StatusOK)
		if !slices.Equal(conditionTypes(denied), []string{"Denied"}) {
			t.Errorf("conditions after denial: %v", conditionTypes(denied))
		}
		do(t, e, "PUT", csrAPI+"/deny-me/approval", withConditions(denied, condition("Approved", "True"))).status(t, http.StatusUnprocessableEntity, "Invalid")
		// No certificate for a denied request.
		denied["status"].(map[string]any)["certificate"] = []byte(cert)
		msg = do(t, e, "PUT", csrAPI+"/deny-me/status", denied).status(t, http.StatusUnprocessableEntity, "Invalid")
		if !strings.Contains(msg, "status.certificate") {
			t.Errorf("certificate for a denied request: %q", msg)
		}
	})

	t.Run("status issues the certificate once, after approval", func(t *testing.T) {
		cur := must(t, call(t, carol, e, "POST", csrAPI, csrBody("issue-me", csrPEM(t, "carol"))), http.StatusCreated)
		withCert := func(obj map[string]any, pemData []byte) map[string]any {
			out := withConditions(obj, func() []map[string]any {
				var cs []map[string]any
				for _, c := range path(obj, "status.conditions").([]any) {
					cs = append(cs, c.(map[string]any))
				}
				return cs
			}()...)
			out["status"].(map[string]any)["certificate"] = pemData
			return out
		}
		cur["status"] = map[string]any{"conditions": []any{}}
		msg := do(t, e, "PUT", csrAPI+"/issue-me/status", withCert(cur, cert)).status(t, http.StatusUnprocessableEntity, "Invalid")
		if !strings.Contains(msg, "status.certificate") || !strings.Contains(msg, "Approved") {
			t.Errorf("certificate before approval: %q", msg)
		}
		// Approval cannot be added through status: the stored (absent) Approved condition stays.
		got := must(t, do(t, e, "PUT", csrAPI+"/issue-me/status", withConditions(cur, condition("Approved", "True"))), http.StatusOK)
		if len(conditionTypes(got)) != 0 {
			t.Errorf("status added Approved: %v", conditionTypes(got))
		}
		approved := must(t, do(t, e, "PUT", csrAPI+"/issue-me/approval", withConditions(got, condition("Approved", "True"))), http.StatusOK)
		// Not a certificate: 422.
		msg = do(t, e, "PUT", csrAPI+"/issue-me/status", withCert(approved, []byte("not a certificate"))).status(t, http.StatusUnprocessableEntity, "Invalid")
		if !strings.Contains(msg, "status.certificate") {
			t.Errorf("garbage certificate: %q", msg)
		}
		issued := must(t, do(t, e, "PUT", csrAPI+"/issue-me/status", withCert(approved, cert)), http.StatusOK)
		if !slices.Equal(conditionTypes(issued), []string{"Approved"}) || path(issued, "status.certificate") == nil {
			t.Fatalf("issued: %v", issued["status"])
		}
		// Once set, the certificate never changes.
		other, _ := e.ClientCert("other")
		msg = do(t, e, "PUT", csrAPI+"/issue-me/status", withCert(issued, other)).status(t, http.StatusUnprocessableEntity, "Invalid")
		if !strings.Contains(msg, "may not modify existing certificate content") {
			t.Errorf("changing the certificate: %q", msg)
		}
		// Approved cannot be removed through status either: it is kept, and Failed may be added.
		failed := must(t, do(t, e, "PUT", csrAPI+"/issue-me/status", withCert(withConditions(issued, condition("Failed", "True")), cert)), http.StatusOK)
		if got := conditionTypes(failed); !slices.Contains(got, "Approved") || !slices.Contains(got, "Failed") || len(got) != 2 {
			t.Errorf("conditions after adding Failed through status: %v", got)
		}
		// A Failed request gets no certificate.
		must(t, call(t, carol, e, "POST", csrAPI, csrBody("fail-me", csrPEM(t, "carol"))), http.StatusCreated)
		fm := must(t, do(t, e, "GET", csrAPI+"/fail-me", nil), http.StatusOK)
		fm = must(t, do(t, e, "PUT", csrAPI+"/fail-me/approval", withConditions(fm, condition("Approved", "True"))), http.StatusOK)
		fm = must(t, do(t, e, "PUT", csrAPI+"/fail-me/status", withConditions(fm, path(fm, "status.conditions").([]any)[0].(map[string]any), condition("Failed", "True"))), http.StatusOK)
		do(t, e, "PUT", csrAPI+"/fail-me/status", withCert(fm, cert)).status(t, http.StatusUnprocessableEntity, "Invalid")
	})

	t.Run("discovery and columns", func(t *testing.T) {
		list := must(t, do(t, e, "GET", "/apis/certificates."+naming.GroupSuffix+"/v1", nil), http.StatusOK)
		var approval map[string]any
		for _, r := range list["resources"].([]any) {
			if r.(map[string]any)["name"] == "certificatesigningrequests/approval" {
				approval = r.(map[string]any)
			}
		}
		if approval == nil {
			t.Fatalf("discovery lacks certificatesigningrequests/approval: %s", list)
		}
		var verbs []string
		for _, v := range approval["verbs"].([]any) {
			verbs = append(verbs, v.(string))
		}
		if !slices.Equal(verbs, []string{"get", "patch", "update"}) || approval["kind"] != "CertificateSigningRequest" || approval["namespaced"] != false {
			t.Errorf("approval discovery entry: %v", approval)
		}
		tbl := must(t, do(t, e, "GET", csrAPI, nil, "Accept", "application/json;as=Table;g=meta.k8s.io;v=v1"), http.StatusOK)
		var names []string
		for _, c := range tbl["columnDefinitions"].([]any) {
			names = append(names, c.(map[string]any)["name"].(string))
		}
		if want := []string{"Name", "Age", "SignerName", "Requestor", "RequestedDuration", "Condition"}; !slices.Equal(names, want) {
			t.Errorf("columns %v, want %v", names, want)
		}
	})
}

// Spec "Endpoints": approving needs update on certificatesigningrequests/approval and approve on
// the signer (the CertificateApproval plugin); without the latter the write is 403.
func TestCertificateSigningRequestApprovalNeedsApprove(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{ConfigureAuthz: func(c *authz.Config) { c.Modes = []string{authz.ModeRBAC} }})
	created := must(t, do(t, e, "POST", csrAPI, csrBody("needs-approval", csrPEM(t, "someone"))), http.StatusCreated)
	must(t, do(t, e, "POST", rbacAPI+"/clusterroles", map[string]any{"metadata": map[string]any{"name": "csr-approver"}, "rules": []any{
		rule(s("get", "list", "watch"), s("certificates."+naming.GroupSuffix), s("certificatesigningrequests")),
		rule(s("update", "patch"), s("certificates."+naming.GroupSuffix), s("certificatesigningrequests/approval")),
	}}), http.StatusCreated)
	must(t, do(t, e, "POST", rbacAPI+"/clusterrolebindings", binding("ClusterRoleBinding", "dave-approves", "ClusterRole", "csr-approver", user("dave"))), http.StatusCreated)
	dave := e.Client("dave")
	waitWithin(t, time.Second, "dave's role to be enforced", func() bool {
		return call(t, dave, e, "GET", csrAPI+"/needs-approval", nil).code == http.StatusOK
	})
	body := withConditions(created, condition("Approved", "True"))
	msg := call(t, dave, e, "PUT", csrAPI+"/needs-approval/approval", body).status(t, http.StatusForbidden, "Forbidden")
	if !strings.Contains(msg, `user not permitted to approve requests with signerName "example.com/widgets"`) {
		t.Errorf("approval without approve on the signer: %q", msg)
	}
	if got := conditionTypes(must(t, do(t, e, "GET", csrAPI+"/needs-approval", nil), http.StatusOK)); len(got) != 0 {
		t.Errorf("a refused approval was stored: %v", got)
	}
	must(t, do(t, e, "POST", rbacAPI+"/clusterroles", map[string]any{"metadata": map[string]any{"name": "widget-signer-approver"}, "rules": []any{
		rule(s("approve"), s("certificates."+naming.GroupSuffix), s("signers"), "example.com/*"),
	}}), http.StatusCreated)
	must(t, do(t, e, "POST", rbacAPI+"/clusterrolebindings", binding("ClusterRoleBinding", "dave-approves-widgets", "ClusterRole", "widget-signer-approver", user("dave"))), http.StatusCreated)
	var last response
	waitWithin(t, time.Second, "the approve permission to take effect", func() bool {
		last = call(t, dave, e, "PUT", csrAPI+"/needs-approval/approval", body)
		return last.code != http.StatusForbidden
	})
	if got := conditionTypes(must(t, last, http.StatusOK)); !slices.Equal(got, []string{"Approved"}) {
		t.Errorf("conditions after an allowed approval: %v", got)
	}
}
