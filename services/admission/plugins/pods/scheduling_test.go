package pods

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/admission/admissiontest"
)

func namespace(name string, annotations map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
}

func TestPodNodeSelector(t *testing.T) {
	objects := &admissiontest.Objects{}
	objects.NamespaceList.Add(
		namespace("ns", map[string]string{naming.NamespaceNodeSelectorAnnotation: "env=prod"}),
		namespace("plain", nil),
		namespace("empty", map[string]string{naming.NamespaceNodeSelectorAnnotation: ""}),
		namespace("bad", map[string]string{naming.NamespaceNodeSelectorAnnotation: "env in (a,b)"}),
	)
	config := `{"podNodeSelectorPluginConfig": {"clusterDefaultNodeSelector": "tier=default", "ns": "env=prod,zone=a", "plain": "tier=default"}}`
	p := build(t, admission.PodNodeSelector, objects, config)
	cases := []struct {
		name, ns string
		have     map[string]string
		want     map[string]string
		code     int32
		msg      string
	}{
		{"upstream: the namespace annotation is merged into the pod", "ns", nil, map[string]string{"env": "prod"}, 0, ""},
		{"upstream: pod terms stay next to the namespace's", "ns", map[string]string{"zone": "a"}, map[string]string{"env": "prod", "zone": "a"}, 0, ""},
		{"upstream: a conflicting term is rejected", "ns", map[string]string{"env": "dev"}, nil, 403, `pods "p" is forbidden: pod node label selector conflicts with its namespace node label selector`},
		{"upstream: a term outside the namespace whitelist is rejected", "ns", map[string]string{"disk": "ssd"}, nil, 403, `pods "p" is forbidden: pod node label selector labels conflict with its namespace whitelist`},
		{"upstream: without annotation the cluster default applies", "plain", nil, map[string]string{"tier": "default"}, 0, ""},
		{"upstream: an empty annotation means no selector (not the default)", "empty", map[string]string{"x": "y"}, map[string]string{"x": "y"}, 0, ""},
		{"upstream: an unparsable annotation fails the request", "bad", nil, nil, 500, ""},
		{"upstream: a missing namespace is a 404", "gone", nil, nil, 404, `namespaces "gone" not found`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pd := pod("p", "a")
			pd.Namespace = c.ns
			pd.Spec.NodeSelector = c.have
			a := req(admission.Create, "", "pods", "", "Pod", c.ns, pd, nil)
			err := admit(p, a)
			if c.code == 500 {
				// The parse error's text is the label library's; the class and its source matter.
				se, ok := err.(apierrors.APIStatus)
				if !ok || se.Status().Code != 500 || !strings.Contains(se.Status().Message, "invalid selector") {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if c.code != 0 {
				wantStatus(t, err, c.code, c.msg)
				return
			}
			wantStatus(t, err, 0, "")
			if !reflect.DeepEqual(pd.Spec.NodeSelector, c.want) {
				t.Fatalf("selector %v, want %v", pd.Spec.NodeSelector, c.want)
			}
		})
	}
	t.Run("upstream: a namespace the lister lags behind is read from storage", func(t *testing.T) {
		deps := admissiontest.Deps(&admissiontest.Objects{}, nil)
		store := deps.Store.(*admissiontest.Store)
		store.Objects = &admissiontest.Objects{}
		store.Objects.NamespaceList.Add(namespace("fresh", map[string]string{naming.NamespaceNodeSelectorAnnotation: "a=b"}))
		pl, err := newPodNodeSelector(deps, nil)
		if err != nil {
			t.Fatal(err)
		}
		pd := pod("p", "a")
		if err := admit(pl, req(admission.Create, "", "pods", "", "Pod", "fresh", pd, nil)); err != nil {
			t.Fatal(err)
		}
		if pd.Spec.NodeSelector["a"] != "b" {
			t.Fatalf("selector %v", pd.Spec.NodeSelector)
		}
	})
	t.Run("a bad selector in the configuration fails at start", func(t *testing.T) {
		if _, err := newPodNodeSelector(admissiontest.Deps(&admissiontest.Objects{}, nil), []byte(`{"podNodeSelectorPluginConfig": {"ns": "a in (b"}}`)); err == nil {
			t.Fatal("accepted")
		}
	})
}

func TestTolerationArithmetic(t *testing.T) {
	s := func(v int64) *int64 { return &v }
	tols := map[string]corev1.Toleration{
		"all":           {Operator: corev1.TolerationOpExists},
		"foo":           {Key: "foo", Operator: corev1.TolerationOpExists},
		"foo-bar":       {Key: "foo", Operator: corev1.TolerationOpEqual, Value: "bar"},
		"foo-nosched":   {Key: "foo", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		"foo-noexec":    {Key: "foo", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		"foo-noexec-10": {Key: "foo", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: s(10)},
		"foo-noexec-0":  {Key: "foo", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: s(0)},
		"faz-nosched":   {Key: "faz", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
	supersets := []struct {
		ss, t string
		want  bool
	}{
		{"all", "foo-noexec-10", true}, // upstream: empty key with Exists covers everything
		{"foo", "foo-bar", true},
		{"foo-bar", "foo", false},
		{"foo", "foo-nosched", true}, // an empty effect covers every effect
		{"foo-nosched", "foo", false},
		{"foo-noexec", "foo-noexec-10", true}, // no limit covers a limit
		{"foo-noexec-10", "foo-noexec", false},
		{"foo-noexec-10", "foo-noexec-0", true},
		{"foo-noexec-0", "foo-noexec-10", false},
		{"foo-nosched", "faz-nosched", false},
	}
	for _, c := range supersets {
		if got := isSuperset(tols[c.ss], tols[c.t]); got != c.want {
			t.Errorf("isSuperset(%s, %s) = %v", c.ss, c.t, got)
		}
	}
	merged := mergeTolerations([]corev1.Toleration{tols["foo-noexec-10"], tols["faz-nosched"]}, []corev1.Toleration{tols["foo-noexec"], tols["faz-nosched"]})
	if want := []corev1.Toleration{tols["faz-nosched"], tols["foo-noexec"]}; !reflect.DeepEqual(merged, want) {
		t.Errorf("upstream MergeTolerations: subsets dropped, the first of equals kept: got %+v", merged)
	}
	if !verifyAgainstWhitelist([]corev1.Toleration{tols["foo-bar"]}, []corev1.Toleration{tols["foo"]}) ||
		verifyAgainstWhitelist([]corev1.Toleration{tols["faz-nosched"]}, []corev1.Toleration{tols["foo"]}) ||
		!verifyAgainstWhitelist([]corev1.Toleration{tols["faz-nosched"]}, nil) {
		t.Error("upstream VerifyAgainstWhitelist: covered allowed, uncovered refused, empty whitelist allows all")
	}
}

func TestPodTolerationRestriction(t *testing.T) {
	tol := func(key string, effect corev1.TaintEffect) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}
	}
	memPressure := tol(naming.TaintNodeMemoryPressure, corev1.TaintEffectNoSchedule)
	objects := &admissiontest.Objects{}
	objects.NamespaceList.Add(
		namespace("ns", map[string]string{
			naming.NamespaceDefaultTolerationsAnnotation:   `[{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]`,
			naming.NamespaceTolerationsWhitelistAnnotation: `[{"key": "dedicated", "operator": "Exists"}, {"key": "` + naming.TaintNodeMemoryPressure + `", "operator": "Exists"}]`,
		}),
		namespace("plain", nil),
		namespace("nodefaults", map[string]string{naming.NamespaceDefaultTolerationsAnnotation: ""}),
		namespace("broken", map[string]string{naming.NamespaceDefaultTolerationsAnnotation: "not json"}),
	)
	config := `{"apiVersion": "podtolerationrestriction.admission.k8s.io/v1alpha1", "kind": "Configuration",
		"default": [{"key": "cluster", "operator": "Exists", "effect": "NoSchedule"}],
		"whitelist": [{"key": "cluster", "operator": "Exists"}, {"key": "gpu", "operator": "Exists"}]}`
	p := build(t, admission.PodTolerationRestriction, objects, config)
	burstable := func(pd *corev1.Pod) *corev1.Pod {
		pd.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
		return pd
	}
	cases := []struct {
		name string
		op   admission.Operation
		ns   string
		pod  *corev1.Pod
		want []corev1.Toleration
		code int32
		msg  string
	}{
		{"upstream: namespace defaults merged into a new pod", admission.Create, "ns", pod("p", "a"), []corev1.Toleration{tol("dedicated", corev1.TaintEffectNoSchedule)}, 0, ""},
		{"upstream: without namespace defaults the cluster's apply", admission.Create, "plain", pod("p", "a"), []corev1.Toleration{tol("cluster", corev1.TaintEffectNoSchedule)}, 0, ""},
		{"upstream: an empty annotation means no defaults at all", admission.Create, "nodefaults", pod("p", "a"), nil, 0, ""},
		{"upstream: pods that are not BestEffort tolerate memory pressure", admission.Create, "ns", burstable(pod("p", "a")), []corev1.Toleration{tol("dedicated", corev1.TaintEffectNoSchedule), memPressure}, 0, ""},
		{"upstream: tolerations outside the namespace whitelist are rejected", admission.Create, "ns", func() *corev1.Pod {
			pd := pod("p", "a")
			pd.Spec.Tolerations = []corev1.Toleration{tol("gpu", "")}
			return pd
		}(), nil, 500, "pod tolerations (possibly merged with namespace default tolerations) conflict with its namespace whitelist"},
		{"upstream: the cluster whitelist applies without a namespace one", admission.Create, "plain", func() *corev1.Pod {
			pd := pod("p", "a")
			pd.Spec.Tolerations = []corev1.Toleration{tol("other", "")}
			return pd
		}(), nil, 500, "pod tolerations (possibly merged with namespace default tolerations) conflict with its cluster whitelist"},
		{"upstream: updates get no defaults but are held to the whitelist", admission.Update, "plain", func() *corev1.Pod {
			pd := pod("p", "a")
			pd.Spec.Tolerations = []corev1.Toleration{tol("gpu", corev1.TaintEffectNoSchedule)}
			return pd
		}(), []corev1.Toleration{tol("gpu", corev1.TaintEffectNoSchedule)}, 0, ""},
		{"upstream: an annotation that is not JSON fails the request", admission.Create, "broken", pod("p", "a"), nil, 500, "invalid character 'o' in literal null (expecting 'u')"},
		{"upstream: a missing namespace is a 404", admission.Create, "gone", pod("p", "a"), nil, 404, `namespaces "gone" not found`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.pod.Namespace = c.ns
			var old *corev1.Pod
			if c.op == admission.Update {
				old = c.pod.DeepCopy()
			}
			a := req(c.op, "", "pods", "", "Pod", c.ns, c.pod, nil)
			if old != nil {
				a.OldObject = old
			}
			err := admit(p, a)
			wantStatus(t, err, c.code, c.msg)
			if c.code == 0 && !reflect.DeepEqual(c.pod.Spec.Tolerations, c.want) {
				t.Fatalf("tolerations\n got %+v\nwant %+v", c.pod.Spec.Tolerations, c.want)
			}
		})
	}
	t.Run("configuration errors name the plugin", func(t *testing.T) {
		for _, cfg := range []string{
			`{"apiVersion": "v1", "kind": "Configuration"}`,
			`{"default": [{"key": "a", "operator": "Bogus"}]}`,
			`{"whitelist": [{"operator": "Equal", "value": "x"}]}`,
		} {
			if _, err := newPodTolerationRestriction(admissiontest.Deps(&admissiontest.Objects{}, nil), []byte(cfg)); err == nil {
				t.Errorf("accepted %s", cfg)
			}
		}
	})
}

func TestPriority(t *testing.T) {
	never := corev1.PreemptNever
	lower := corev1.PreemptLowerPriority
	i32 := func(v int32) *int32 { return &v }
	class := func(name string, value int32, def bool, policy *corev1.PreemptionPolicy) *schedulingv1.PriorityClass {
		return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, GlobalDefault: def, PreemptionPolicy: policy}
	}
	cases := []struct {
		name       string
		classes    []*schedulingv1.PriorityClass
		mod        func(*corev1.Pod)
		wantClass  string
		wantValue  int32
		wantPolicy corev1.PreemptionPolicy
		code       int32
		msg        string
	}{
		{"upstream: no class and no default gives 0 and PreemptLowerPriority", nil, func(*corev1.Pod) {}, "", 0, lower, 0, ""},
		{"upstream: the global default class applies (lowest value on a race)", []*schedulingv1.PriorityClass{class("d1", 50, true, &never), class("d2", 10, true, &lower)}, func(*corev1.Pod) {}, "d2", 10, lower, 0, ""},
		{"upstream: a named class resolves value and policy", []*schedulingv1.PriorityClass{class("high", 1000, false, &never)}, func(p *corev1.Pod) { p.Spec.PriorityClassName = "high" }, "high", 1000, never, 0, ""},
		{"upstream: an unknown class is rejected", nil, func(p *corev1.Pod) { p.Spec.PriorityClassName = "nope" }, "", 0, "", 403, `pods "p" is forbidden: no PriorityClass with name nope was found`},
		{"system classes resolve without stored objects", nil, func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-node-critical" }, "system-node-critical", 2000001000, lower, 0, ""},
		{"upstream: a priority other than the class's is rejected", []*schedulingv1.PriorityClass{class("high", 1000, false, nil)}, func(p *corev1.Pod) {
			p.Spec.PriorityClassName = "high"
			p.Spec.Priority = i32(5)
		}, "", 0, "", 403, `pods "p" is forbidden: the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name`},
		{"upstream: the class's own priority may be given", []*schedulingv1.PriorityClass{class("high", 1000, false, nil)}, func(p *corev1.Pod) {
			p.Spec.PriorityClassName = "high"
			p.Spec.Priority = i32(1000)
		}, "high", 1000, "", 0, ""},
		{"upstream: a preemption policy other than the class's is rejected", []*schedulingv1.PriorityClass{class("high", 1000, false, &never)}, func(p *corev1.Pod) {
			p.Spec.PriorityClassName = "high"
			p.Spec.PreemptionPolicy = &lower
		}, "", 0, "", 403, `pods "p" is forbidden: the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objects := &admissiontest.Objects{}
			objects.PriorityClassList.Add(c.classes...)
			p := build(t, admission.Priority, objects, "")
			pd := pod("p", "a")
			c.mod(pd)
			err := admit(p, podReq(admission.Create, "", pd, nil))
			wantStatus(t, err, c.code, c.msg)
			if c.code != 0 {
				return
			}
			if pd.Spec.PriorityClassName != c.wantClass || pd.Spec.Priority == nil || *pd.Spec.Priority != c.wantValue {
				t.Fatalf("class %q priority %v", pd.Spec.PriorityClassName, pd.Spec.Priority)
			}
			if c.wantPolicy == "" {
				if pd.Spec.PreemptionPolicy != nil {
					t.Fatalf("policy %v", *pd.Spec.PreemptionPolicy)
				}
			} else if pd.Spec.PreemptionPolicy == nil || *pd.Spec.PreemptionPolicy != c.wantPolicy {
				t.Fatalf("policy %v", pd.Spec.PreemptionPolicy)
			}
		})
	}
	t.Run("upstream: an update keeps the stored priority and policy", func(t *testing.T) {
		p := build(t, admission.Priority, &admissiontest.Objects{}, "")
		old := pod("p", "a")
		old.Spec.Priority, old.Spec.PreemptionPolicy = i32(7), &never
		pd := pod("p", "a")
		if err := admit(p, podReq(admission.Update, "", pd, old)); err != nil {
			t.Fatal(err)
		}
		if *pd.Spec.Priority != 7 || *pd.Spec.PreemptionPolicy != never {
			t.Fatalf("got %v %v", *pd.Spec.Priority, *pd.Spec.PreemptionPolicy)
		}
	})
	t.Run("upstream: only one global default PriorityClass", func(t *testing.T) {
		objects := &admissiontest.Objects{}
		objects.PriorityClassList.Add(class("d", 1, true, nil))
		p := build(t, admission.Priority, objects, "")
		pcReq := func(op admission.Operation, pc *schedulingv1.PriorityClass) *admission.Attributes {
			return req(op, schedulingGroup, "priorityclasses", "", "PriorityClass", "", pc, nil)
		}
		wantStatus(t, admit(p, pcReq(admission.Create, class("e", 2, true, nil))), 403, `priorityclasses.`+schedulingGroup+` "e" is forbidden: PriorityClass d is already marked as default. Only one default can exist`)
		wantStatus(t, admit(p, pcReq(admission.Update, class("e", 2, true, nil))), 403, `priorityclasses.`+schedulingGroup+` "e" is forbidden: PriorityClass d is already marked as default. Only one default can exist`)
		wantStatus(t, admit(p, pcReq(admission.Update, class("d", 3, true, nil))), 0, "")
		wantStatus(t, admit(p, pcReq(admission.Create, class("f", 2, false, nil))), 0, "")
	})
}

func TestRuntimeClass(t *testing.T) {
	objects := &admissiontest.Objects{}
	objects.RuntimeClassList.Add(
		&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata"}, Handler: "kata",
			Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}},
			Scheduling: &nodev1.Scheduling{
				NodeSelector: map[string]string{"runtime": "kata"},
				Tolerations:  []corev1.Toleration{{Key: "kata", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			}},
		&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "runc"}, Handler: "runc"},
	)
	p := build(t, admission.RuntimeClass, objects, "")
	rc := func(name string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.RuntimeClassName = &name }
	}
	cases := []struct {
		name string
		mod  func(*corev1.Pod)
		code int32
		msg  string
		chk  func(*testing.T, *corev1.Pod)
	}{
		{"upstream: overhead and scheduling come from the class", rc("kata"), 0, "", func(t *testing.T, p *corev1.Pod) {
			if q := p.Spec.Overhead[corev1.ResourceCPU]; q.String() != "250m" {
				t.Errorf("overhead %v", p.Spec.Overhead)
			}
			if p.Spec.NodeSelector["runtime"] != "kata" || len(p.Spec.Tolerations) != 1 || p.Spec.Tolerations[0].Key != "kata" {
				t.Errorf("scheduling %v %v", p.Spec.NodeSelector, p.Spec.Tolerations)
			}
		}},
		{"upstream: the same overhead set by the pod is accepted", func(p *corev1.Pod) {
			rc("kata")(p)
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.25")}
		}, 0, "", nil},
		{"upstream: a different overhead is rejected", func(p *corev1.Pod) {
			rc("kata")(p)
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}, 403, `pods "p" is forbidden: pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead`, nil},
		{"upstream: a conflicting node selector is rejected", func(p *corev1.Pod) {
			rc("kata")(p)
			p.Spec.NodeSelector = map[string]string{"runtime": "runc"}
		}, 403, `pods "p" is forbidden: conflict: runtimeClass.scheduling.nodeSelector[runtime] = kata; pod.spec.nodeSelector[runtime] = runc`, nil},
		{"upstream: an unknown class is rejected", rc("gvisor"), 403, `pods "p" is forbidden: pod rejected: RuntimeClass "gvisor" not found`, nil},
		{"upstream: overhead without a class defining one is rejected", func(p *corev1.Pod) {
			rc("runc")(p)
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}, 403, `pods "p" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead`, nil},
		{"upstream: no class, no overhead: nothing to do", func(*corev1.Pod) {}, 0, "", func(t *testing.T, p *corev1.Pod) {
			if p.Spec.Overhead != nil || p.Spec.NodeSelector != nil {
				t.Errorf("changed: %+v", p.Spec)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pd := pod("p", "a")
			c.mod(pd)
			wantStatus(t, admit(p, podReq(admission.Create, "", pd, nil)), c.code, c.msg)
			if c.chk != nil {
				c.chk(t, pd)
			}
		})
	}
	t.Run("the class's objects are not aliased into the pod", func(t *testing.T) {
		pd := pod("p", "a")
		rc("kata")(pd)
		if err := admit(p, podReq(admission.Create, "", pd, nil)); err != nil {
			t.Fatal(err)
		}
		pd.Spec.NodeSelector["runtime"] = "changed"
		pd.Spec.Overhead[corev1.ResourceMemory] = resource.MustParse("1Gi")
		stored, _ := objects.RuntimeClassList.Get("", "kata")
		if stored.Scheduling.NodeSelector["runtime"] != "kata" || len(stored.Overhead.PodFixed) != 1 {
			t.Fatal("the plugin handed the lister's maps to the pod")
		}
	})
}
