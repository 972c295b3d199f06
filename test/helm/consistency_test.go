package helm

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestReferences checks what Platform's dry run does not (it validates the objects' structure,
// types and metadata, but not upstream's semantic rules for workloads, and no API server checks
// references between objects): every workload's selector matches its pod template; every
// Service, PodDisruptionBudget and NetworkPolicy selects a rendered workload; Services' named
// target ports exist; pods' ConfigMaps and ServiceAccounts are rendered; every container runs
// non-root on a read-only root file system with every capability dropped.
func TestReferences(t *testing.T) {
	requireSetup(t)
	files := valuesFiles(t)
	for _, name := range sortedKeys(files) {
		t.Run(name, func(t *testing.T) {
			objs := render(t, "platform", files[name])
			type workload struct {
				name   string
				labels map[string]string
				ports  map[string]bool
			}
			var workloads []workload
			rendered := map[string]bool{}
			for _, o := range objs {
				rendered[o.GetKind()+"/"+o.GetName()] = true
			}
			for _, o := range objs {
				if o.GetKind() != "Deployment" && o.GetKind() != "StatefulSet" && o.GetKind() != "Job" {
					continue
				}
				labels, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
				if o.GetKind() != "Job" {
					sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
					if len(sel) == 0 || !subset(sel, labels) {
						t.Errorf("%s %s: selector %v does not match its pod labels %v", o.GetKind(), o.GetName(), sel, labels)
					}
				}
				w := workload{name: o.GetName(), labels: labels, ports: map[string]bool{}}
				spec, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
				if sa, _ := spec["serviceAccountName"].(string); sa != "" && !rendered["ServiceAccount/"+sa] {
					t.Errorf("%s: ServiceAccount %s is not rendered", o.GetName(), sa)
				}
				volumes, _, _ := unstructured.NestedSlice(spec, "volumes")
				for _, v := range volumes {
					if cm, ok, _ := unstructured.NestedString(v.(map[string]any), "configMap", "name"); ok && !rendered["ConfigMap/"+cm] {
						t.Errorf("%s: ConfigMap %s is not rendered", o.GetName(), cm)
					}
				}
				if o.GetKind() == "StatefulSet" {
					if svc, _, _ := unstructured.NestedString(o.Object, "spec", "serviceName"); !rendered["Service/"+svc] {
						t.Errorf("%s: its Service %s is not rendered", o.GetName(), svc)
					}
				}
				if nonRoot, _, _ := unstructured.NestedBool(spec, "securityContext", "runAsNonRoot"); !nonRoot {
					t.Errorf("%s: the pod may run as root", o.GetName())
				}
				containers, _, _ := unstructured.NestedSlice(spec, "containers")
				for _, c := range containers {
					c := c.(map[string]any)
					ports, _, _ := unstructured.NestedSlice(c, "ports")
					for _, p := range ports {
						if n, ok := p.(map[string]any)["name"].(string); ok {
							w.ports[n] = true
						}
					}
					ro, _, _ := unstructured.NestedBool(c, "securityContext", "readOnlyRootFilesystem")
					esc, found, _ := unstructured.NestedBool(c, "securityContext", "allowPrivilegeEscalation")
					drop, _, _ := unstructured.NestedStringSlice(c, "securityContext", "capabilities", "drop")
					uid, _, _ := unstructured.NestedFieldNoCopy(c, "securityContext", "runAsUser")
					if !ro || !found || esc || len(drop) != 1 || drop[0] != "ALL" || fmt.Sprint(uid) != "65532" {
						t.Errorf("%s %s: security context %v", o.GetName(), c["name"], c["securityContext"])
					}
					if _, ok := c["resources"]; !ok {
						t.Errorf("%s %s: no resources", o.GetName(), c["name"])
					}
				}
				workloads = append(workloads, w)
			}
			selects := func(sel map[string]string) []workload {
				var out []workload
				for _, w := range workloads {
					if subset(sel, w.labels) {
						out = append(out, w)
					}
				}
				return out
			}
			for _, o := range objs {
				var sel map[string]string
				switch o.GetKind() {
				case "Service":
					sel, _, _ = unstructured.NestedStringMap(o.Object, "spec", "selector")
				case "PodDisruptionBudget":
					sel, _, _ = unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
				case "NetworkPolicy":
					sel, _, _ = unstructured.NestedStringMap(o.Object, "spec", "podSelector", "matchLabels")
					ingress, _, _ := unstructured.NestedSlice(o.Object, "spec", "ingress")
					for _, rule := range ingress {
						from, _, _ := unstructured.NestedSlice(rule.(map[string]any), "from")
						for _, peer := range from {
							if ps, ok, _ := unstructured.NestedStringMap(peer.(map[string]any), "podSelector", "matchLabels"); ok && len(selects(ps)) != 1 {
								t.Errorf("NetworkPolicy %s admits pods %v: %d workloads have them", o.GetName(), ps, len(selects(ps)))
							}
						}
					}
				default:
					continue
				}
				matched := selects(sel)
				if len(sel) == 0 || len(matched) != 1 {
					t.Errorf("%s %s selects %v: %d workloads", o.GetKind(), o.GetName(), sel, len(matched))
					continue
				}
				if o.GetKind() == "Service" {
					ports, _, _ := unstructured.NestedSlice(o.Object, "spec", "ports")
					for _, p := range ports {
						if tp, ok := p.(map[string]any)["targetPort"].(string); ok && !matched[0].ports[tp] {
							t.Errorf("Service %s: target port %q is not a port of %s", o.GetName(), tp, matched[0].name)
						}
					}
				}
			}
		})
	}
}

func subset(a, b map[string]string) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
