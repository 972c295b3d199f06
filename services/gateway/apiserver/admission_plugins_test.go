package apiserver_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"platform.io/libs/naming"
	admissionserver "platform.io/services/admission/server"
	authz "platform.io/services/authz/server"
	"platform.io/services/gateway/gatewaytest"
	"platform.io/services/gateway/server"
)

// The built-in admission plugins of the spec's default set, each seen end to end: a request
// through the gateway's TLS front door, the admission service over gRPC, and storage. The plugins'
// own packages test every rule; these check that the request path gives each plugin what it needs
// (the object, the old object, the namespace, dry-run) and returns its answer in the Status shape.

func pod(name string, mutate ...func(spec map[string]any)) map[string]any {
	spec := map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx"}}}
	for _, m := range mutate {
		m(spec)
	}
	return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": name}, "spec": spec}
}

// seen waits (dry-run creates, bounded) until a plugin has the object it reads from its informer,
// as check tells from the answer, then creates for real and returns the stored object.
func seen(t *testing.T, e *gatewaytest.Env, what, collection string, obj map[string]any, check func(map[string]any) bool) map[string]any {
	t.Helper()
	waitFor(t, what, func() bool {
		r := do(t, e, "POST", collection+"?dryRun=All", obj)
		return r.code == http.StatusCreated && check(r.obj(t))
	})
	return must(t, do(t, e, "POST", collection, obj), http.StatusCreated)
}

func createNamespace(t *testing.T, e *gatewaytest.Env, name string, labels map[string]string) {
	t.Helper()
	must(t, do(t, e, "POST", "/api/v1/namespaces", map[string]any{"metadata": map[string]any{"name": name, "labels": labels}}), http.StatusCreated)
}

func TestAdmissionPluginsThroughGateway(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{Configure: func(c *server.Config) { c.EnableControllers = false }})

	t.Run("NamespaceLifecycle", func(t *testing.T) {
		msg := do(t, e, "POST", "/api/v1/namespaces/nowhere/configmaps", configMap("c", nil)).status(t, http.StatusNotFound, "NotFound")
		if !strings.Contains(msg, `namespaces "nowhere" not found`) {
			t.Errorf("create in a missing namespace: %q", msg)
		}
		createNamespace(t, e, "leaving", nil)
		must(t, do(t, e, "DELETE", "/api/v1/namespaces/leaving", nil), http.StatusOK)
		msg = do(t, e, "POST", "/api/v1/namespaces/leaving/configmaps", configMap("c", nil)).status(t, http.StatusForbidden, "Forbidden")
		if !strings.Contains(msg, "because it is being terminated") {
			t.Errorf("create in a terminating namespace: %q", msg)
		}
		// The system namespaces may not be deleted.
		for _, name := range []string{"default", naming.SystemNamespace, naming.PublicNamespace} {
			msg := do(t, e, "DELETE", "/api/v1/namespaces/"+name, nil).status(t, http.StatusForbidden, "Forbidden")
			if !strings.Contains(msg, "may not be deleted") {
				t.Errorf("delete of namespace %s: %q", name, msg)
			}
		}
	})

	createNamespace(t, e, "plugins", nil)
	const pods = "/api/v1/namespaces/plugins/pods"

	t.Run("DefaultTolerationSeconds", func(t *testing.T) {
		got := must(t, do(t, e, "POST", pods, pod("tolerant")), http.StatusCreated)
		keys := map[string]any{}
		for _, tol := range path(got, "spec.tolerations").([]any) {
			m := tol.(map[string]any)
			keys[m["key"].(string)] = m["tolerationSeconds"]
		}
		for _, k := range []string{naming.TaintNodeNotReady, naming.TaintNodeUnreachable} {
			if keys[k] != float64(300) {
				t.Errorf("toleration %s: %v (all: %v)", k, keys[k], keys)
			}
		}
	})

	t.Run("Priority", func(t *testing.T) {
		msg := do(t, e, "POST", pods, pod("unknown-class", func(s map[string]any) { s["priorityClassName"] = "nope" })).status(t, http.StatusForbidden, "Forbidden")
		if !strings.Contains(msg, "no PriorityClass with name nope was found") {
			t.Errorf("unknown class: %q", msg)
		}
		must(t, do(t, e, "POST", "/apis/scheduling."+naming.GroupSuffix+"/v1/priorityclasses",
			map[string]any{"metadata": map[string]any{"name": "high"}, "value": 1000, "preemptionPolicy": "Never"}), http.StatusCreated)
		got := seen(t, e, "the class", pods, pod("high", func(s map[string]any) { s["priorityClassName"] = "high" }),
			func(m map[string]any) bool { return path(m, "spec.priority") != nil })
		if path(got, "spec.priority") != float64(1000) || path(got, "spec.preemptionPolicy") != "Never" {
			t.Errorf("priority from the class: %v %v", path(got, "spec.priority"), path(got, "spec.preemptionPolicy"))
		}
		// The system classes are stored by the gateway's post-start hook and resolve.
		got = must(t, do(t, e, "POST", pods, pod("critical", func(s map[string]any) { s["priorityClassName"] = "system-node-critical" })), http.StatusCreated)
		if path(got, "spec.priority") != float64(2000001000) {
			t.Errorf("system-node-critical: %v", path(got, "spec.priority"))
		}
	})

	t.Run("RuntimeClass", func(t *testing.T) {
		msg := do(t, e, "POST", pods, pod("no-runtime", func(s map[string]any) { s["runtimeClassName"] = "gvisor" })).status(t, http.StatusForbidden, "Forbidden")
		if !strings.Contains(msg, "gvisor") {
			t.Errorf("unknown runtime class: %q", msg)
		}
		must(t, do(t, e, "POST", "/apis/node."+naming.GroupSuffix+"/v1/runtimeclasses", map[string]any{
			"metadata": map[string]any{"name": "gvisor"}, "handler": "runsc",
			"overhead":   map[string]any{"podFixed": map[string]any{"memory": "64Mi"}},
			"scheduling": map[string]any{"nodeSelector": map[string]any{"sandbox": "yes"}},
		}), http.StatusCreated)
		got := seen(t, e, "the runtime class", pods, pod("sandboxed", func(s map[string]any) { s["runtimeClassName"] = "gvisor" }),
			func(m map[string]any) bool { return path(m, "spec.overhead") != nil })
		if path(got, "spec.overhead.memory") != "64Mi" || path(got, "spec.nodeSelector.sandbox") != "yes" {
			t.Errorf("runtime class overhead and scheduling: %v %v", path(got, "spec.overhead"), path(got, "spec.nodeSelector"))
		}
	})

	t.Run("LimitRanger", func(t *testing.T) {
		createNamespace(t, e, "limited", nil)
		must(t, do(t, e, "POST", "/api/v1/namespaces/limited/limitranges", map[string]any{
			"metadata": map[string]any{"name": "limits"},
			"spec": map[string]any{"limits": []any{map[string]any{
				"type": "Container", "max": map[string]any{"cpu": "1"},
				"default": map[string]any{"cpu": "500m"}, "defaultRequest": map[string]any{"cpu": "100m"},
			}}},
		}), http.StatusCreated)
		got := seen(t, e, "the limit range", "/api/v1/namespaces/limited/pods", pod("defaulted"), func(m map[string]any) bool {
			return path(path(m, "spec.containers").([]any)[0].(map[string]any), "resources.limits") != nil
		})
		c := path(got, "spec.containers").([]any)[0].(map[string]any)
		if path(c, "resources.limits.cpu") != "500m" || path(c, "resources.requests.cpu") != "100m" {
			t.Errorf("defaults from the limit range: %v", c["resources"])
		}
		big := pod("big", func(s map[string]any) {
			s["containers"] = []any{map[string]any{"name": "c", "image": "nginx", "resources": map[string]any{"limits": map[string]any{"cpu": "2"}}}}
		})
		msg := do(t, e, "POST", "/api/v1/namespaces/limited/pods", big).status(t, http.StatusForbidden, "Forbidden")
		if !strings.Contains(msg, "maximum cpu usage per Container is 1") {
			t.Errorf("over the maximum: %q", msg)
		}
	})

	t.Run("PodSecurity", func(t *testing.T) {
		createNamespace(t, e, "baseline", map[string]string{naming.PodSecurityLabelPrefix + "enforce": "baseline", naming.PodSecurityLabelPrefix + "warn": "restricted"})
		privileged := pod("root", func(s map[string]any) {
			s["containers"] = []any{map[string]any{"name": "c", "image": "nginx", "securityContext": map[string]any{"privileged": true}}}
		})
		msg := do(t, e, "POST", "/api/v1/namespaces/baseline/pods", privileged).status(t, http.StatusForbidden, "Forbidden")
		if !strings.Contains(msg, `violates PodSecurity "baseline:latest": privileged`) {
			t.Errorf("privileged pod under baseline: %q", msg)
		}
		// Baseline admits a plain pod; the restricted warn level adds warnings to the answer.
		r := do(t, e, "POST", "/api/v1/namespaces/baseline/pods", pod("plain"))
		must(t, r, http.StatusCreated)
		if w := strings.Join(r.header.Values("Warning"), "\n"); !strings.Contains(w, `would violate PodSecurity`) || !strings.Contains(w, `restricted:latest`) {
			t.Errorf("warnings of the warn level: %q", w)
		}
		// A stricter enforce level on a namespace with violating pods is admitted with warnings.
		// (The plugin reads pods from its informer: wait, with dry-run updates, until it has the pod.)
		createNamespace(t, e, "loose", nil)
		must(t, do(t, e, "POST", "/api/v1/namespaces/loose/pods", privileged), http.StatusCreated)
		enforce := `{"metadata":{"labels":{"` + naming.PodSecurityLabelPrefix + `enforce":"baseline"}}}`
		waitFor(t, "the violating pod to be seen", func() bool {
			r := do(t, e, "PATCH", "/api/v1/namespaces/loose?dryRun=All", enforce, "Content-Type", "application/merge-patch+json")
			return r.code == http.StatusOK && len(r.header.Values("Warning")) > 0
		})
		r = do(t, e, "PATCH", "/api/v1/namespaces/loose", enforce, "Content-Type", "application/merge-patch+json")
		must(t, r, http.StatusOK)
		if w := strings.Join(r.header.Values("Warning"), "\n"); !strings.Contains(w, "root") || !strings.Contains(w, "privileged") {
			t.Errorf("warnings naming the violating pod: %q", w)
		}
	})

	t.Run("TaintNodesByCondition", func(t *testing.T) {
		got := must(t, do(t, e, "POST", "/api/v1/nodes", map[string]any{"metadata": map[string]any{"name": "n1"}}), http.StatusCreated)
		taints, _ := path(got, "spec.taints").([]any)
		if len(taints) != 1 || path(taints[0].(map[string]any), "key") != naming.TaintNodeNotReady || path(taints[0].(map[string]any), "effect") != "NoSchedule" {
			t.Errorf("new node's taints: %v", taints)
		}
	})

	t.Run("storage classes and claims", func(t *testing.T) {
		sc := "/apis/storage." + naming.GroupSuffix + "/v1/storageclasses"
		must(t, do(t, e, "POST", sc, map[string]any{"metadata": map[string]any{"name": "fast", "annotations": map[string]any{naming.IsDefaultStorageClassAnnotation: "true"}},
			"provisioner": "example.com/fast", "allowVolumeExpansion": false}), http.StatusCreated)
		claim := map[string]any{"metadata": map[string]any{"name": "data"}, "spec": map[string]any{
			"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}}}
		got := seen(t, e, "the default class", "/api/v1/namespaces/plugins/persistentvolumeclaims", claim,
			func(m map[string]any) bool { return path(m, "spec.storageClassName") != nil })
		// DefaultStorageClass names the default class; StorageObjectInUseProtection adds its finalizer.
		if path(got, "spec.storageClassName") != "fast" {
			t.Errorf("DefaultStorageClass: %v", path(got, "spec.storageClassName"))
		}
		if f := fmt.Sprint(path(got, "metadata.finalizers")); !strings.Contains(f, naming.PVCProtectionFinalizer) {
			t.Errorf("StorageObjectInUseProtection: finalizers %s", f)
		}
		// PersistentVolumeClaimResize: a bound claim of a class without expansion may not grow.
		got["status"] = map[string]any{"phase": "Bound"}
		got = must(t, do(t, e, "PUT", "/api/v1/namespaces/plugins/persistentvolumeclaims/data/status", got), http.StatusOK)
		got["spec"].(map[string]any)["resources"] = map[string]any{"requests": map[string]any{"storage": "2Gi"}}
		msg := do(t, e, "PUT", "/api/v1/namespaces/plugins/persistentvolumeclaims/data", got).status(t, http.StatusForbidden, "Forbidden")
		if !strings.Contains(msg, "storageclass that provisions the pvc must support resize") {
			t.Errorf("PersistentVolumeClaimResize: %q", msg)
		}
	})

	t.Run("DefaultIngressClass", func(t *testing.T) {
		net := "/apis/networking." + naming.GroupSuffix + "/v1"
		must(t, do(t, e, "POST", net+"/ingressclasses", map[string]any{"metadata": map[string]any{"name": "edge", "annotations": map[string]any{naming.IsDefaultIngressClassAnnotation: "true"}},
			"spec": map[string]any{"controller": "example.com/edge"}}), http.StatusCreated)
		got := seen(t, e, "the default class", net+"/namespaces/plugins/ingresses", map[string]any{"metadata": map[string]any{"name": "web"},
			"spec": map[string]any{"defaultBackend": map[string]any{"service": map[string]any{"name": "web", "port": map[string]any{"number": 80}}}}},
			func(m map[string]any) bool { return path(m, "spec.ingressClassName") != nil })
		if path(got, "spec.ingressClassName") != "edge" {
			t.Errorf("ingress class: %v", path(got, "spec.ingressClassName"))
		}
	})

	t.Run("CertificateSubjectRestriction", func(t *testing.T) {
		csr := map[string]any{"metadata": map[string]any{"name": "masters"}, "spec": map[string]any{
			"request": csrPEM(t, "evil", "system:masters"), "signerName": naming.SignerAPIServerClient,
			"usages": []any{"client auth"}}}
		msg := do(t, e, "POST", "/apis/certificates."+naming.GroupSuffix+"/v1/certificatesigningrequests", csr).status(t, http.StatusForbidden, "Forbidden")
		if !strings.Contains(msg, "system:masters") {
			t.Errorf("system:masters for the API server client signer: %q", msg)
		}
	})

	t.Run("dry run", func(t *testing.T) {
		// Mutations are applied to a dry-run answer; nothing is stored.
		got := must(t, do(t, e, "POST", pods+"?dryRun=All", pod("dry")), http.StatusCreated)
		if path(got, "spec.tolerations") == nil {
			t.Errorf("dry-run answer lacks the mutating plugins' changes: %v", got["spec"])
		}
		must(t, do(t, e, "GET", pods+"/dry", nil), http.StatusNotFound)
		// Validating plugins still reject a dry-run.
		do(t, e, "POST", pods+"?dryRun=All", pod("dry", func(s map[string]any) { s["priorityClassName"] = "nope" })).status(t, http.StatusForbidden, "Forbidden")
	})
}

// TestResourceQuotaThroughGateway: concurrent creators never take a namespace over its quota, and
// the quota's usage counts exactly what was stored; dry-run requests are checked, never charged.
// Everything runs right after the namespace's first quota is created: the gateway must not skip
// admission for the namespace while the new interest is still on its way.
func TestResourceQuotaThroughGateway(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{})
	createNamespace(t, e, "quota", nil)
	const quotas = "/api/v1/namespaces/quota/resourcequotas"
	const limit = 10
	q := must(t, do(t, e, "POST", quotas, map[string]any{"metadata": map[string]any{"name": "q"}, "spec": map[string]any{"hard": map[string]any{"configmaps": fmt.Sprint(limit)}}}), http.StatusCreated)
	// Play the quota controller (not run here): usage is known and zero.
	q["status"] = map[string]any{"hard": map[string]any{"configmaps": fmt.Sprint(limit)}, "used": map[string]any{"configmaps": "0"}}
	must(t, do(t, e, "PUT", quotas+"/q/status", q), http.StatusOK)

	must(t, do(t, e, "POST", "/api/v1/namespaces/quota/configmaps?dryRun=All", configMap("dry", nil)), http.StatusCreated)
	if used := path(must(t, do(t, e, "GET", quotas+"/q", nil), http.StatusOK), "status.used.configmaps"); used != "0" {
		t.Fatalf("a dry-run create was charged: used %v", used)
	}

	const clients, each = 16, 4
	var created, refused atomic.Int64
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r := do(t, e, "POST", "/api/v1/namespaces/quota/configmaps", configMap(fmt.Sprintf("c%d-%d", c, i), nil))
				switch {
				case r.code == http.StatusCreated:
					created.Add(1)
				case r.code == http.StatusForbidden && strings.Contains(string(r.body), "exceeded quota: q"):
					refused.Add(1)
				default:
					t.Errorf("create: %d %s", r.code, r.body)
				}
			}
		}()
	}
	wg.Wait()
	list := must(t, do(t, e, "GET", "/api/v1/namespaces/quota/configmaps", nil), http.StatusOK)
	stored := len(list["items"].([]any))
	if created.Load() != limit || stored != limit || refused.Load() != clients*each-limit {
		t.Errorf("created %d, stored %d, refused %d; want %d, %d, %d", created.Load(), stored, refused.Load(), limit, limit, clients*each-limit)
	}
	if used := path(must(t, do(t, e, "GET", quotas+"/q", nil), http.StatusOK), "status.used.configmaps"); used != fmt.Sprint(limit) {
		t.Errorf("quota usage %v, want %d", used, limit)
	}
	// A dry-run over the quota is refused like the real request.
	do(t, e, "POST", "/api/v1/namespaces/quota/configmaps?dryRun=All", configMap("dry", nil)).status(t, http.StatusForbidden, "Forbidden")

	// A quota limiting a resource whose usage the controller has not computed refuses it
	// (upstream's "status unknown").
	createNamespace(t, e, "unknown", nil)
	q = must(t, do(t, e, "POST", "/api/v1/namespaces/unknown/resourcequotas", map[string]any{"metadata": map[string]any{"name": "q"}, "spec": map[string]any{"hard": map[string]any{"configmaps": "1"}}}), http.StatusCreated)
	q["status"] = map[string]any{"hard": map[string]any{"configmaps": "1"}}
	must(t, do(t, e, "PUT", "/api/v1/namespaces/unknown/resourcequotas/q/status", q), http.StatusOK)
	// The plugin reads quotas through its informer: until it has seen the status write, the
	// quota it knows has no status.hard and covers nothing (as upstream). Wait with dry runs
	// until it refuses, then the real create must be refused as well.
	waitFor(t, "the quota's status in the plugin", func() bool {
		return do(t, e, "POST", "/api/v1/namespaces/unknown/configmaps?dryRun=All", configMap("c", nil)).code == http.StatusForbidden
	})
	msg := do(t, e, "POST", "/api/v1/namespaces/unknown/configmaps", configMap("c", nil)).status(t, http.StatusForbidden, "Forbidden")
	if !strings.Contains(msg, "status unknown for quota: q") {
		t.Errorf("create before usage is known: %q", msg)
	}
}

// TestServiceAccountPluginThroughGateway: with ServiceAccount on, a pod gets its namespace's
// default service account and the projected token volume; a missing account is refused.
func TestServiceAccountPluginThroughGateway(t *testing.T) {
	e := gatewaytest.Start(t, gatewaytest.Options{ConfigureAdmission: func(c *admissionserver.Config) { c.DisablePlugins = nil }})
	createNamespace(t, e, "sa", nil)
	msg := do(t, e, "POST", "/api/v1/namespaces/sa/pods", pod("early")).status(t, http.StatusForbidden, "Forbidden")
	if !strings.Contains(msg, `serviceaccount "default" not found`) {
		t.Errorf("pod before the default service account exists: %q", msg)
	}
	must(t, do(t, e, "POST", "/api/v1/namespaces/sa/serviceaccounts", map[string]any{"metadata": map[string]any{"name": "default"}}), http.StatusCreated)
	got := must(t, do(t, e, "POST", "/api/v1/namespaces/sa/pods", pod("p")), http.StatusCreated)
	if path(got, "spec.serviceAccountName") != "default" {
		t.Errorf("service account: %v", path(got, "spec.serviceAccountName"))
	}
	volumes, _ := path(got, "spec.volumes").([]any)
	if len(volumes) != 1 || !strings.HasPrefix(path(volumes[0].(map[string]any), "name").(string), naming.ServiceAccountTokenVolumePrefix) ||
		path(volumes[0].(map[string]any), "projected") == nil {
		t.Errorf("token volume: %v", volumes)
	}
	mounts, _ := path(path(got, "spec.containers").([]any)[0].(map[string]any), "volumeMounts").([]any)
	if len(mounts) != 1 || path(mounts[0].(map[string]any), "mountPath") != naming.ServiceAccountTokenMountPath {
		t.Errorf("token mount: %v", mounts)
	}
}

// csrPEM is a PEM certificate request for the common name and organizations.
func csrPEM(t *testing.T, cn string, orgs ...string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: orgs}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// TestOptionalAdmissionPluginsThroughGateway: the plugins off by default, enabled by flag and
// configured through the AdmissionConfiguration file, one case each through the gateway.
// (ImagePolicyWebhook needs a backend: its package tests it against a real HTTPS one.)
func TestOptionalAdmissionPluginsThroughGateway(t *testing.T) {
	dir := t.TempDir()
	configFile := filepath.Join(dir, "admission.yaml")
	config := `apiVersion: apiserver.config.` + naming.GroupSuffix + `/v1
kind: AdmissionConfiguration
plugins:
- name: EventRateLimit
  configuration:
    apiVersion: eventratelimit.admission.` + naming.GroupSuffix + `/v1alpha1
    kind: Configuration
    limits:
    - type: Namespace
      qps: 1
      burst: 2
      cacheSize: 10
`
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	e := gatewaytest.Start(t, gatewaytest.Options{ConfigureAdmission: func(c *admissionserver.Config) {
		c.EnablePlugins = []string{"AlwaysPullImages", "DenyServiceExternalIPs", "ExtendedResourceToleration", "LimitPodHardAntiAffinityTopology",
			"PodNodeSelector", "PodTolerationRestriction", "SecurityContextDeny", "NamespaceAutoProvision", "NamespaceExists", "NodeRestriction", "EventRateLimit", "AlwaysAdmit"}
		c.ConfigFile = configFile
	}})

	t.Run("NamespaceAutoProvision", func(t *testing.T) {
		must(t, do(t, e, "POST", "/api/v1/namespaces/auto/configmaps", configMap("c", nil)), http.StatusCreated)
		must(t, do(t, e, "GET", "/api/v1/namespaces/auto", nil), http.StatusOK)
	})

	createNamespace(t, e, "opt", nil)
	const pods = "/api/v1/namespaces/opt/pods"
	t.Run("AlwaysPullImages and ExtendedResourceToleration", func(t *testing.T) {
		got := must(t, do(t, e, "POST", pods, pod("gpu", func(s map[string]any) {
			s["containers"] = []any{map[string]any{"name": "c", "image": "nginx", "imagePullPolicy": "IfNotPresent",
				"resources": map[string]any{"limits": map[string]any{"example.com/gpu": "1"}, "requests": map[string]any{"example.com/gpu": "1"}}}}
		})), http.StatusCreated)
		if p := path(path(got, "spec.containers").([]any)[0].(map[string]any), "imagePullPolicy"); p != "Always" {
			t.Errorf("AlwaysPullImages: %v", p)
		}
		if tol := fmt.Sprint(path(got, "spec.tolerations")); !strings.Contains(tol, "example.com/gpu") {
			t.Errorf("ExtendedResourceToleration: %s", tol)
		}
	})
	t.Run("LimitPodHardAntiAffinityTopology", func(t *testing.T) {
		r := do(t, e, "POST", pods, pod("spread", func(s map[string]any) {
			s["affinity"] = map[string]any{"podAntiAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": []any{
				map[string]any{"topologyKey": "zone", "labelSelector": map[string]any{"matchLabels": map[string]any{"app": "x"}}}}}}
		}))
		if msg := r.status(t, http.StatusForbidden, "Forbidden"); !strings.Contains(msg, "has TopologyKey zone") {
			t.Errorf("anti-affinity on zone: %q", msg)
		}
	})
	t.Run("SecurityContextDeny", func(t *testing.T) {
		do(t, e, "POST", pods, pod("root", func(s map[string]any) { s["securityContext"] = map[string]any{"runAsUser": 0} })).status(t, http.StatusForbidden, "Forbidden")
	})
	t.Run("PodNodeSelector and PodTolerationRestriction", func(t *testing.T) {
		must(t, do(t, e, "POST", "/api/v1/namespaces", map[string]any{"metadata": map[string]any{"name": "prod", "annotations": map[string]any{
			naming.NamespaceNodeSelectorAnnotation:       "env=prod",
			naming.NamespaceDefaultTolerationsAnnotation: `[{"key":"dedicated","operator":"Equal","value":"prod","effect":"NoSchedule"}]`,
		}}}), http.StatusCreated)
		got := seen(t, e, "the namespace's annotations", "/api/v1/namespaces/prod/pods", pod("p"),
			func(m map[string]any) bool { return path(m, "spec.nodeSelector.env") != nil })
		if path(got, "spec.nodeSelector.env") != "prod" || !strings.Contains(fmt.Sprint(path(got, "spec.tolerations")), "dedicated") {
			t.Errorf("node selector %v, tolerations %v", path(got, "spec.nodeSelector"), path(got, "spec.tolerations"))
		}
		do(t, e, "POST", "/api/v1/namespaces/prod/pods", pod("dev", func(s map[string]any) { s["nodeSelector"] = map[string]any{"env": "dev"} })).
			status(t, http.StatusForbidden, "Forbidden")
	})
	t.Run("DenyServiceExternalIPs", func(t *testing.T) {
		svc := map[string]any{"metadata": map[string]any{"name": "web"}, "spec": map[string]any{
			"ports": []any{map[string]any{"port": 80}}, "externalIPs": []any{"192.0.2.1"}}}
		msg := do(t, e, "POST", "/api/v1/namespaces/opt/services", svc).status(t, http.StatusForbidden, "Forbidden")
		if !strings.Contains(msg, "Use of external IPs is denied by admission control") {
			t.Errorf("external IPs: %q", msg)
		}
	})
	t.Run("NodeRestriction", func(t *testing.T) {
		node := e.Client("system:node:n1", "system:nodes")
		must(t, call(t, node, e, "POST", "/api/v1/nodes", map[string]any{"metadata": map[string]any{"name": "n1"}}), http.StatusCreated)
		msg := call(t, node, e, "POST", "/api/v1/nodes", map[string]any{"metadata": map[string]any{"name": "n2"}}).status(t, http.StatusForbidden, "Forbidden")
		if !strings.Contains(msg, "n2") {
			t.Errorf("a node creating another: %q", msg)
		}
	})
	t.Run("EventRateLimit", func(t *testing.T) {
		event := func(name string) map[string]any {
			return map[string]any{"metadata": map[string]any{"name": name}, "involvedObject": map[string]any{"kind": "Pod", "name": "p", "namespace": "opt"},
				"reason": "Test", "message": "m", "type": "Normal"}
		}
		// A burst of 2 refilled at 1/s: ten quick creates cannot all pass.
		created, limited := 0, 0
		for i := range 10 {
			r := do(t, e, "POST", "/api/v1/namespaces/opt/events", event(fmt.Sprint("e", i)))
			if r.code == http.StatusCreated {
				created++
				continue
			}
			r.status(t, http.StatusTooManyRequests, "TooManyRequests")
			limited++
		}
		if created < 2 || limited == 0 {
			t.Errorf("created %d, limited %d", created, limited)
		}
		// Another namespace has its own bucket.
		createNamespace(t, e, "other", nil)
		must(t, do(t, e, "POST", "/api/v1/namespaces/other/events", event("e0")), http.StatusCreated)
	})
}

// TestAlwaysDenyAndOwnerReferencesThroughGateway: AlwaysDeny refuses every write; with RBAC,
// OwnerReferencesPermissionEnforcement lets only users who may delete an object change its owner
// references.
func TestAlwaysDenyAndOwnerReferencesThroughGateway(t *testing.T) {
	deny := gatewaytest.Start(t, gatewaytest.Options{ConfigureAdmission: func(c *admissionserver.Config) {
		c.EnablePlugins = []string{"AlwaysDeny"}
	}})
	do(t, deny, "POST", "/api/v1/namespaces/default/configmaps", configMap("c", nil)).status(t, http.StatusForbidden, "Forbidden")
	must(t, do(t, deny, "GET", "/api/v1/namespaces/default/configmaps", nil), http.StatusOK)

	e := gatewaytest.Start(t, gatewaytest.Options{
		ConfigureAuthz:     func(c *authz.Config) { c.Modes = []string{authz.ModeRBAC} },
		ConfigureAdmission: func(c *admissionserver.Config) { c.EnablePlugins = []string{"OwnerReferencesPermissionEnforcement"} },
	})
	must(t, do(t, e, "POST", "/apis/rbac.authorization."+naming.GroupSuffix+"/v1/namespaces/default/roles", map[string]any{
		"metadata": map[string]any{"name": "no-delete"},
		"rules":    []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"get", "create", "update", "patch"}}},
	}), http.StatusCreated)
	must(t, do(t, e, "POST", "/apis/rbac.authorization."+naming.GroupSuffix+"/v1/namespaces/default/rolebindings", map[string]any{
		"metadata": map[string]any{"name": "bob"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization." + naming.GroupSuffix, "kind": "Role", "name": "no-delete"},
		"subjects": []any{map[string]any{"kind": "User", "name": "bob", "apiGroup": "rbac.authorization." + naming.GroupSuffix}},
	}), http.StatusCreated)
	bob := e.Client("bob")
	owner := must(t, do(t, e, "POST", "/api/v1/namespaces/default/configmaps", configMap("owner", nil)), http.StatusCreated)
	withOwner := configMap("owned", nil)
	withOwner["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": path(owner, "metadata.uid")}}
	waitFor(t, "bob's role to be enforced", func() bool {
		return call(t, bob, e, "GET", "/api/v1/namespaces/default/configmaps/owner", nil).code == http.StatusOK
	})
	// Creating with owner references is allowed (nothing to change yet); changing them is not.
	must(t, call(t, bob, e, "POST", "/api/v1/namespaces/default/configmaps", configMap("plain", nil)), http.StatusCreated)
	msg := call(t, bob, e, "PATCH", "/api/v1/namespaces/default/configmaps/plain", map[string]any{"metadata": map[string]any{"ownerReferences": path(withOwner, "metadata.ownerReferences")}},
		"Content-Type", "application/merge-patch+json").status(t, http.StatusForbidden, "Forbidden")
	if !strings.Contains(msg, "cannot set an ownerRef on a resource you can't delete") {
		t.Errorf("owner references without delete: %q", msg)
	}
	// The admin may.
	must(t, do(t, e, "PATCH", "/api/v1/namespaces/default/configmaps/plain", map[string]any{"metadata": map[string]any{"ownerReferences": path(withOwner, "metadata.ownerReferences")}},
		"Content-Type", "application/merge-patch+json"), http.StatusOK)
}
