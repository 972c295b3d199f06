package pods

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/admission/admissiontest"
)

func rl(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func limitRange(name string, items ...corev1.LimitRangeItem) *corev1.LimitRange {
	return &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.LimitRangeSpec{Limits: items}}
}

func TestLimitRangerDefaults(t *testing.T) {
	objects := &admissiontest.Objects{}
	objects.LimitRangeList.Add(limitRange("defaults", corev1.LimitRangeItem{
		Type:           corev1.LimitTypeContainer,
		Default:        rl("cpu", "500m", "memory", "256Mi"),
		DefaultRequest: rl("cpu", "100m", "memory", "128Mi"),
	}))
	objects.LimitRangeList.Add(&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: "other"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Default: rl("cpu", "9")}}}})
	p := build(t, admission.LimitRanger, objects, "")

	pd := pod("p", "a", "b")
	pd.Spec.Containers[1].Resources = corev1.ResourceRequirements{Requests: rl("cpu", "200m"), Limits: rl("cpu", "1")}
	pd.Spec.InitContainers = []corev1.Container{{Name: "init"}}
	if err := admit(p, podReq(admission.Create, "", pd, nil)); err != nil {
		t.Fatal(err)
	}
	eq := func(l corev1.ResourceList, name, want string) {
		t.Helper()
		if q := l[corev1.ResourceName(name)]; q.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("%s = %s, want %s", name, q.String(), want)
		}
	}
	// upstream: containers and init containers get the missing defaults; set values stay.
	eq(pd.Spec.Containers[0].Resources.Requests, "cpu", "100m")
	eq(pd.Spec.Containers[0].Resources.Limits, "memory", "256Mi")
	eq(pd.Spec.Containers[1].Resources.Requests, "cpu", "200m")
	eq(pd.Spec.Containers[1].Resources.Limits, "cpu", "1")
	eq(pd.Spec.Containers[1].Resources.Requests, "memory", "128Mi")
	eq(pd.Spec.InitContainers[0].Resources.Limits, "cpu", "500m")
	want := "LimitRanger plugin set: cpu, memory request for container c0; cpu, memory limit for container c0; memory request for container c1; memory limit for container c1; cpu, memory request for init container init; cpu, memory limit for init container init"
	if got := pd.Annotations[naming.LimitRangerAnnotation]; got != want {
		t.Errorf("annotation\n got %q\nwant %q", got, want)
	}

	t.Run("upstream: pod updates are not defaulted", func(t *testing.T) {
		pd := pod("p", "a")
		if err := admit(p, podReq(admission.Update, "", pd, pod("p", "a"))); err != nil {
			t.Fatal(err)
		}
		if pd.Spec.Containers[0].Resources.Requests != nil || pd.Annotations != nil {
			t.Errorf("update changed: %+v", pd)
		}
	})
	t.Run("upstream: objects being deleted are left alone", func(t *testing.T) {
		old := pod("p", "a")
		now := metav1.NewTime(time.Now())
		old.DeletionTimestamp = &now
		pd := pod("p", "a")
		if err := admit(p, podReq(admission.Update, resize, pd, old)); err != nil {
			t.Fatal(err)
		}
		if pd.Spec.Containers[0].Resources.Requests != nil {
			t.Error("defaulted a pod on its way out")
		}
	})
}

func TestLimitRangerValidation(t *testing.T) {
	container := func(requests, limits corev1.ResourceList) *corev1.Pod {
		pd := pod("p", "a")
		pd.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: requests, Limits: limits}
		return pd
	}
	always := corev1.ContainerRestartPolicyAlways
	cases := []struct {
		name string
		item corev1.LimitRangeItem
		pod  *corev1.Pod
		msg  string
	}{
		{"upstream: container within min and max", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: rl("cpu", "100m"), Max: rl("cpu", "1")},
			container(rl("cpu", "200m"), rl("cpu", "500m")), ""},
		{"upstream: container min without request", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: rl("memory", "64Mi")},
			container(nil, nil), "minimum memory usage per Container is 64Mi.  No request is specified"},
		{"upstream: container below min", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: rl("cpu", "100m")},
			container(rl("cpu", "50m"), nil), "minimum cpu usage per Container is 100m, but request is 50m"},
		{"upstream: container above max", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Max: rl("cpu", "1")},
			container(rl("cpu", "500m"), rl("cpu", "2")), "maximum cpu usage per Container is 1, but limit is 2"},
		{"upstream: container max without limit", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Max: rl("cpu", "1")},
			container(rl("cpu", "500m"), nil), "maximum cpu usage per Container is 1.  No limit is specified"},
		{"upstream: several violations are aggregated in resource order", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Max: rl("memory", "1Gi", "cpu", "1")},
			container(nil, rl("cpu", "2", "memory", "2Gi")), "[maximum cpu usage per Container is 1, but limit is 2, maximum memory usage per Container is 1Gi, but limit is 2Gi]"},
		{"upstream: limit to request ratio exceeded", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: rl("cpu", "2")},
			container(rl("cpu", "100m"), rl("cpu", "300m")), "cpu max limit to request ratio per Container is 2, but provided ratio is 3.000000"},
		{"upstream: ratio with no request", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: rl("cpu", "2")},
			container(nil, rl("cpu", "300m")), "cpu max limit to request ratio per Container is 2, but no request is specified or request is 0"},
		{"upstream: pod max over the sum of containers", corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: rl("cpu", "1")},
			func() *corev1.Pod {
				pd := pod("p", "a", "b")
				for i := range pd.Spec.Containers {
					pd.Spec.Containers[i].Resources = corev1.ResourceRequirements{Requests: rl("cpu", "300m"), Limits: rl("cpu", "600m")}
				}
				return pd
			}(), "maximum cpu usage per Pod is 1, but limit is 1200m"},
		{"upstream: pod totals count sidecars (restartable init containers) and the largest init container", corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: rl("memory", "1Gi")},
			func() *corev1.Pod {
				pd := container(rl("memory", "256Mi"), rl("memory", "256Mi"))
				pd.Spec.InitContainers = []corev1.Container{
					{Name: "side", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: rl("memory", "256Mi"), Limits: rl("memory", "256Mi")}},
					{Name: "big", Resources: corev1.ResourceRequirements{Requests: rl("memory", "900Mi"), Limits: rl("memory", "900Mi")}},
				}
				return pd
			}(), "maximum memory usage per Pod is 1Gi, but limit is 1156Mi"},
		{"upstream: init containers are held to Container items", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Max: rl("cpu", "1")},
			func() *corev1.Pod {
				pd := container(rl("cpu", "1"), rl("cpu", "1"))
				pd.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1"), Limits: rl("cpu", "3")}}}
				return pd
			}(), "maximum cpu usage per Container is 1, but limit is 3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objects := &admissiontest.Objects{}
			objects.LimitRangeList.Add(limitRange("lr", c.item))
			p := build(t, admission.LimitRanger, objects, "")
			err := p.(admission.Validator).Validate(t.Context(), podReq(admission.Create, "", c.pod, nil))
			if c.msg == "" {
				wantStatus(t, err, 0, "")
				return
			}
			wantStatus(t, err, 403, `pods "p" is forbidden: `+c.msg)
		})
	}
}

func TestLimitRangerClaimsAndResize(t *testing.T) {
	objects := &admissiontest.Objects{}
	objects.LimitRangeList.Add(limitRange("storage", corev1.LimitRangeItem{Type: corev1.LimitTypePersistentVolumeClaim, Min: rl("storage", "1Gi"), Max: rl("storage", "10Gi")}),
		limitRange("cpu", corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Max: rl("cpu", "1")}))
	p := build(t, admission.LimitRanger, objects, "")
	claim := func(size string) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns"}}
		if size != "" {
			c.Spec.Resources.Requests = rl("storage", size)
		}
		return c
	}
	claimReq := func(op admission.Operation, c *corev1.PersistentVolumeClaim) *admission.Attributes {
		return req(op, "", "persistentvolumeclaims", "", "PersistentVolumeClaim", "ns", c, nil)
	}
	wantStatus(t, admit(p, claimReq(admission.Create, claim("5Gi"))), 0, "")
	wantStatus(t, admit(p, claimReq(admission.Create, claim("500Mi"))), 403, `persistentvolumeclaims "data" is forbidden: minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi`)
	wantStatus(t, admit(p, claimReq(admission.Update, claim("20Gi"))), 403, `persistentvolumeclaims "data" is forbidden: maximum storage usage per PersistentVolumeClaim is 10Gi, but request is 20Gi`)
	wantStatus(t, admit(p, claimReq(admission.Create, claim(""))), 403, `persistentvolumeclaims "data" is forbidden: [minimum storage usage per PersistentVolumeClaim is 1Gi.  No request is specified, maximum storage usage per PersistentVolumeClaim is 10Gi.  No request is specified]`)

	// upstream (1.33): in-place resizes through pods/resize are held to the limits.
	old := pod("p", "a")
	old.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: rl("cpu", "500m"), Limits: rl("cpu", "1")}
	grown := old.DeepCopy()
	grown.Spec.Containers[0].Resources.Limits = rl("cpu", "2")
	wantStatus(t, admit(p, podReq(admission.Update, resize, grown, old)), 403, `pods "p" is forbidden: maximum cpu usage per Container is 1, but limit is 2`)
}
