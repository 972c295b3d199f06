package pods

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/admission/admissiontest"
)

func TestAlwaysPullImages(t *testing.T) {
	p := build(t, admission.AlwaysPullImages, &admissiontest.Objects{}, "")
	withAll := func(p *corev1.Pod) *corev1.Pod {
		p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "init:1", ImagePullPolicy: corev1.PullNever}}
		p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "dbg", Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent}}}
		return p
	}
	cases := []struct {
		name     string
		a        *admission.Attributes
		wantPull bool // every container ends with Always
		unchange bool // the pod must come out unchanged
	}{
		{"upstream: create sets Always on init, regular and ephemeral containers", podReq(admission.Create, "", withAll(pod("p", "nginx")), nil), true, false},
		{"upstream: an update bringing a new image sets Always", podReq(admission.Update, "", withAll(pod("p", "nginx:2")), withAll(pod("p", "nginx"))), true, false},
		{"upstream: an update with no new image is left alone", podReq(admission.Update, "", withAll(pod("p", "nginx")), withAll(pod("p", "nginx"))), false, true},
		{"upstream: subresources are ignored", podReq(admission.Update, "ephemeralcontainers", withAll(pod("p", "nginx")), pod("p", "nginx")), false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := c.a.Object.DeepCopyObject()
			if err := p.(admission.Mutator).Admit(context.Background(), c.a); err != nil {
				t.Fatal(err)
			}
			got := c.a.Object.(*corev1.Pod)
			if c.unchange && !reflect.DeepEqual(before, got) {
				t.Fatalf("pod changed: %+v", got.Spec)
			}
			if c.wantPull {
				visitContainers(&got.Spec, func(ct *corev1.Container, _ *field.Path) bool {
					if ct.ImagePullPolicy != corev1.PullAlways {
						t.Errorf("container %s pull policy %q", ct.Name, ct.ImagePullPolicy)
					}
					return true
				})
			}
		})
	}

	t.Run("upstream: validation rejects a policy other than Always (set after mutation)", func(t *testing.T) {
		pd := pod("p", "nginx")
		pd.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
		err := p.(admission.Validator).Validate(context.Background(), podReq(admission.Create, "", pd, nil))
		wantStatus(t, err, 403, `pods "p" is forbidden: spec.containers[0].imagePullPolicy: Unsupported value: "IfNotPresent": supported values: "Always"`)
	})
	t.Run("upstream: several offending containers are aggregated", func(t *testing.T) {
		pd := pod("p", "nginx")
		pd.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "i"}}
		err := p.(admission.Validator).Validate(context.Background(), podReq(admission.Create, "", pd, nil))
		wantStatus(t, err, 403, `[pods "p" is forbidden: spec.initContainers[0].imagePullPolicy: Unsupported value: "": supported values: "Always", pods "p" is forbidden: spec.containers[0].imagePullPolicy: Unsupported value: "": supported values: "Always"]`)
	})
	t.Run("upstream: an object that is not a pod is a 400", func(t *testing.T) {
		a := req(admission.Create, "", "pods", "", "Pod", "ns", &corev1.Service{}, nil)
		wantStatus(t, p.(admission.Mutator).Admit(context.Background(), a), 400, "Resource was marked with kind Pod but was unable to be converted")
	})
}

func TestDefaultTolerationSeconds(t *testing.T) {
	s := func(v int64) *int64 { return &v }
	notReady := func(sec int64) corev1.Toleration {
		return corev1.Toleration{Key: naming.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: s(sec)}
	}
	unreachable := func(sec int64) corev1.Toleration {
		return corev1.Toleration{Key: naming.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: s(sec)}
	}
	cases := []struct {
		name   string
		config string
		have   []corev1.Toleration
		want   []corev1.Toleration
	}{
		{"upstream: both added with 300s by default", "", nil, []corev1.Toleration{notReady(300), unreachable(300)}},
		{"upstream: the flags' values come from the configuration", `{"defaultNotReadyTolerationSeconds": 60, "defaultUnreachableTolerationSeconds": 120}`, nil, []corev1.Toleration{notReady(60), unreachable(120)}},
		{"upstream 1.34 configuration form is read too", `{"defaultTolerationSecondsConfig": {"notReadyTolerationSeconds": 10}}`, nil, []corev1.Toleration{notReady(10), unreachable(300)}},
		{"upstream: an existing not-ready toleration is kept, only unreachable added", "", []corev1.Toleration{notReady(5)}, []corev1.Toleration{notReady(5), unreachable(300)}},
		{"upstream: a toleration with an empty effect covers NoExecute", "", []corev1.Toleration{{Key: naming.TaintNodeUnreachable, Operator: corev1.TolerationOpExists}}, []corev1.Toleration{{Key: naming.TaintNodeUnreachable, Operator: corev1.TolerationOpExists}, notReady(300)}},
		{"upstream: an empty key (tolerate everything) covers both", "", []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
		{"upstream: a NoSchedule toleration does not count", "", []corev1.Toleration{{Key: naming.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}, []corev1.Toleration{{Key: naming.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}, notReady(300), unreachable(300)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := build(t, admission.DefaultTolerationSeconds, &admissiontest.Objects{}, c.config)
			pd := pod("p", "nginx")
			pd.Spec.Tolerations = c.have
			if err := admit(p, podReq(admission.Create, "", pd, nil)); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(pd.Spec.Tolerations, c.want) {
				t.Fatalf("tolerations\n got %+v\nwant %+v", pd.Spec.Tolerations, c.want)
			}
		})
	}
	t.Run("upstream validation: negative seconds are refused at start", func(t *testing.T) {
		r := admission.NewRegistry()
		Register(r)
		f, _ := r.Factory(admission.DefaultTolerationSeconds)
		_, err := f(admissiontest.Deps(&admissiontest.Objects{}, nil), []byte(`{"defaultUnreachableTolerationSeconds": -1}`))
		if err == nil || err.Error() != "DefaultTolerationSeconds: invalid config: defaultUnreachableTolerationSeconds: Invalid value: -1: must be not less than 0" {
			t.Fatalf("err = %v", err)
		}
		if _, err := f(admissiontest.Deps(&admissiontest.Objects{}, nil), []byte(`{`)); err == nil {
			t.Fatal("bad JSON accepted")
		}
	})
}

func TestExtendedResourceToleration(t *testing.T) {
	p := build(t, admission.ExtendedResourceToleration, &admissiontest.Objects{}, "")
	q := resource.MustParse("1")
	withRequests := func(names ...string) *corev1.Pod {
		pd := pod("p", "a")
		pd.Spec.Containers[0].Resources.Requests = corev1.ResourceList{}
		for _, n := range names {
			pd.Spec.Containers[0].Resources.Requests[corev1.ResourceName(n)] = q
		}
		pd.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"example.com/fpga": q}}}}
		return pd
	}
	tol := func(k string) corev1.Toleration {
		return corev1.Toleration{Key: k, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	}
	cases := []struct {
		name string
		pod  *corev1.Pod
		want []corev1.Toleration
	}{
		{"upstream: extended resources of containers and init containers, sorted", withRequests("example.com/gpu", "cpu"), []corev1.Toleration{tol("example.com/fpga"), tol("example.com/gpu")}},
		{"upstream: native resources (unprefixed or the platform's domain) and quota names are not extended", withRequests("memory", naming.ResourceDefaultNamespacePrefix+"thing", "requests.example.com/x"), []corev1.Toleration{tol("example.com/fpga")}},
		{"upstream: an identical toleration is not added twice", func() *corev1.Pod {
			pd := withRequests()
			pd.Spec.Tolerations = []corev1.Toleration{tol("example.com/fpga")}
			return pd
		}(), []corev1.Toleration{tol("example.com/fpga")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := admit(p, podReq(admission.Create, "", c.pod, nil)); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.pod.Spec.Tolerations, c.want) {
				t.Fatalf("got %+v\nwant %+v", c.pod.Spec.Tolerations, c.want)
			}
		})
	}
}

func TestLimitPodHardAntiAffinityTopology(t *testing.T) {
	p := build(t, admission.LimitPodHardAntiAffinityTopology, &admissiontest.Objects{}, "")
	withKey := func(required, preferred string) *corev1.Pod {
		pd := pod("p", "a")
		aa := &corev1.PodAntiAffinity{}
		if required != "" {
			aa.RequiredDuringSchedulingIgnoredDuringExecution = []corev1.PodAffinityTerm{{TopologyKey: required}}
		}
		if preferred != "" {
			aa.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.WeightedPodAffinityTerm{{Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: preferred}}}
		}
		pd.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: aa}
		return pd
	}
	cases := []struct {
		name string
		pod  *corev1.Pod
		code int32
		msg  string
	}{
		{"upstream: the hostname key is allowed", withKey(naming.LabelHostname, ""), 0, ""},
		{"upstream: another required key is forbidden", withKey("topology.example.com/zone", ""), 403, `pods "p" is forbidden: affinity.PodAntiAffinity.RequiredDuringScheduling has TopologyKey topology.example.com/zone but only key ` + naming.LabelHostname + ` is allowed`},
		{"upstream: preferred terms are not limited", withKey("", "topology.example.com/zone"), 0, ""},
		{"upstream: no affinity at all", pod("p", "a"), 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantStatus(t, admit(p, podReq(admission.Create, "", c.pod, nil)), c.code, c.msg)
		})
	}
}

func TestSecurityContextDeny(t *testing.T) {
	p := build(t, admission.SecurityContextDeny, &admissiontest.Objects{}, "")
	i := func(v int64) *int64 { return &v }
	cases := []struct {
		name string
		mod  func(*corev1.Pod)
		msg  string
	}{
		{"upstream: plain pod admitted", func(*corev1.Pod) {}, ""},
		{"upstream: pod supplementalGroups", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SupplementalGroups: []int64{1}}
		}, "pod.Spec.SecurityContext.SupplementalGroups is forbidden"},
		{"upstream: pod seLinuxOptions", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SELinuxOptions: &corev1.SELinuxOptions{}}
		}, "pod.Spec.SecurityContext.SELinuxOptions is forbidden"},
		{"upstream: pod runAsUser", func(p *corev1.Pod) { p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: i(0)} }, "pod.Spec.SecurityContext.RunAsUser is forbidden"},
		{"upstream: pod fsGroup", func(p *corev1.Pod) { p.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: i(1)} }, "pod.Spec.SecurityContext.FSGroup is forbidden"},
		{"upstream: pod runAsNonRoot is allowed", func(p *corev1.Pod) {
			b := true
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: &b}
		}, ""},
		{"upstream: init container seLinuxOptions", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i", SecurityContext: &corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{}}}}
		}, "SecurityContext.SELinuxOptions is forbidden"},
		{"upstream: container runAsUser", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: i(1)}
		}, "SecurityContext.RunAsUser is forbidden"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pd := pod("p", "a")
			c.mod(pd)
			err := admit(p, podReq(admission.Update, "", pd, pd.DeepCopy()))
			if c.msg == "" {
				wantStatus(t, err, 0, "")
				return
			}
			wantStatus(t, err, 403, `pods "p" is forbidden: `+c.msg)
		})
	}
}
