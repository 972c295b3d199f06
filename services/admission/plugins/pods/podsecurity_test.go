package pods

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
	"platform.io/services/admission/admission/admissiontest"
)

// objectsWithPods is the admission service's objects plus a pod lister, which PodSecurity
// uses to dry-run a new enforce level.
type objectsWithPods struct {
	*admissiontest.Objects
	pods admissiontest.Lister[*corev1.Pod]
}

func (o *objectsWithPods) Pods() admission.Lister[*corev1.Pod] { return &o.pods }

func psNamespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func privilegedPod(name string) *corev1.Pod {
	t := true
	pd := pod(name, "nginx")
	pd.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: &t}
	return pd
}

const (
	privilegedDetail = `privileged (container "c0" must not set securityContext.privileged=true)`
	restrictedDetail = `allowPrivilegeEscalation != false (container "c0" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c0" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c0" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c0" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`
)

var psLabel = func(mode string) string { return naming.PodSecurityLabelPrefix + mode }

func TestPodSecurityPods(t *testing.T) {
	objects := &admissiontest.Objects{}
	objects.NamespaceList.Add(
		psNamespace("restricted", map[string]string{psLabel("enforce"): "restricted"}),
		psNamespace("baseline", map[string]string{psLabel("enforce"): "baseline"}),
		psNamespace("warned", map[string]string{psLabel("warn"): "baseline", psLabel("audit"): "restricted", psLabel("audit-version"): "v1.30"}),
		psNamespace("open", nil),
		psNamespace("exempt", map[string]string{psLabel("enforce"): "restricted"}),
		psNamespace("broken", map[string]string{psLabel("enforce"): "bogus"}),
	)
	config := `{"apiVersion": "pod-security.admission.config.k8s.io/v1", "kind": "PodSecurityConfiguration",
		"exemptions": {"usernames": ["system:serviceaccount:kube:deployer"], "namespaces": ["exempt"], "runtimeClasses": ["kata"]}}`
	p := build(t, admission.PodSecurity, objects, config)
	kata := "kata"
	cases := []struct {
		name        string
		ns          string
		pod         *corev1.Pod
		user        string
		code        int32
		msg         string
		warnings    []string
		annotations map[string]string
	}{
		{"upstream: enforce rejects a violating pod with the checks' detail", "baseline", privilegedPod("p"), "", 403,
			`pods "p" is forbidden: violates PodSecurity "baseline:latest": ` + privilegedDetail, nil,
			map[string]string{psLabel("enforce-policy"): "baseline:latest"}},
		{"upstream: restricted lists every missing setting", "restricted", pod("p", "nginx"), "", 403,
			`pods "p" is forbidden: violates PodSecurity "restricted:latest": ` + restrictedDetail, nil, nil},
		{"upstream: warn follows a stricter enforce level, but a pod within it gets no warning", "baseline", pod("p", "nginx"), "", 0, "", nil,
			map[string]string{psLabel("enforce-policy"): "baseline:latest"}},
		{"upstream: warn warns, audit annotates (at its own version)", "warned", privilegedPod("p"), "", 0, "",
			[]string{`would violate PodSecurity "baseline:latest": ` + privilegedDetail},
			map[string]string{psLabel("enforce-policy"): "privileged:latest", psLabel("audit-violations"): `would violate PodSecurity "restricted:v1.30": ` + privilegedDetail + `, ` + restrictedDetail}},
		{"upstream: a fully privileged namespace records the policy only", "open", privilegedPod("p"), "", 0, "", nil,
			map[string]string{psLabel("enforce-policy"): "privileged:latest"}},
		{"upstream: exempt namespaces are not evaluated", "exempt", privilegedPod("p"), "", 0, "", nil,
			map[string]string{psLabel("exempt"): "namespace"}},
		{"upstream: exempt users are not evaluated", "restricted", privilegedPod("p"), "system:serviceaccount:kube:deployer", 0, "", nil,
			map[string]string{psLabel("exempt"): "user"}},
		{"upstream: pods of exempt runtime classes are not evaluated", "restricted", func() *corev1.Pod {
			pd := privilegedPod("p")
			pd.Spec.RuntimeClassName = &kata
			return pd
		}(), "", 0, "", nil, map[string]string{psLabel("exempt"): "runtimeClass"}},
		{"upstream: an invalid enforce label fails closed (restricted) and is recorded", "broken", pod("p", "nginx"), "", 403,
			`pods "p" is forbidden: violates PodSecurity "restricted:latest": ` + restrictedDetail, nil,
			map[string]string{psLabel("error"): `Failed to parse policy: metadata.labels[` + psLabel("enforce") + `]: Invalid value: "bogus": must be one of privileged, baseline, restricted`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.pod.Namespace = c.ns
			a := req(admission.Create, "", "pods", "", "Pod", c.ns, c.pod, nil)
			if c.user != "" {
				a.User = &admission.User{Name: c.user}
			}
			wantStatus(t, admit(p, a), c.code, c.msg)
			if got := a.Warnings(); !reflect.DeepEqual(got, c.warnings) {
				t.Errorf("warnings\n got %q\nwant %q", got, c.warnings)
			}
			got := a.Annotations()
			for k, v := range c.annotations {
				if got[k] != v {
					t.Errorf("annotation %s\n got %q\nwant %q", k, got[k], v)
				}
			}
		})
	}

	t.Run("upstream: updates that change no image are not evaluated", func(t *testing.T) {
		old := privilegedPod("p")
		old.Namespace = "baseline"
		pd := old.DeepCopy()
		pd.Labels = map[string]string{"new": "label"}
		wantStatus(t, admit(p, req(admission.Update, "", "pods", "", "Pod", "baseline", pd, old)), 0, "")
		pd.Spec.Containers[0].Image = "nginx:2"
		wantStatus(t, admit(p, req(admission.Update, "", "pods", "", "Pod", "baseline", pd, old)), 403, `pods "p" is forbidden: violates PodSecurity "baseline:latest": `+privilegedDetail)
	})
	t.Run("upstream: added ephemeral containers are evaluated", func(t *testing.T) {
		tr := true
		old := pod("p", "nginx")
		old.Namespace = "baseline"
		pd := old.DeepCopy()
		pd.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "dbg", Image: "busybox", SecurityContext: &corev1.SecurityContext{Privileged: &tr}}}}
		wantStatus(t, admit(p, req(admission.Update, "", "pods", ephemeralContainers, "Pod", "baseline", pd, old)), 403,
			`pods "p" is forbidden: violates PodSecurity "baseline:latest": privileged (container "dbg" must not set securityContext.privileged=true)`)
	})
	t.Run("upstream: status and other ignored subresources are not evaluated", func(t *testing.T) {
		pd := privilegedPod("p")
		wantStatus(t, admit(p, req(admission.Update, "", "pods", "status", "Pod", "baseline", pd, pd.DeepCopy())), 0, "")
	})
}

func TestPodSecurityWorkloads(t *testing.T) {
	objects := &admissiontest.Objects{}
	objects.NamespaceList.Add(psNamespace("ns", map[string]string{psLabel("enforce"): "baseline", psLabel("audit"): "baseline"}))
	p := build(t, admission.PodSecurity, objects, "")
	tmpl := corev1.PodTemplateSpec{Spec: privilegedPod("x").Spec}
	workloads := []struct {
		group, resource, kind string
		obj                   runtime.Object
	}{
		{"apps", "deployments", "Deployment", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns"}, Spec: appsv1.DeploymentSpec{Template: tmpl}}},
		{"apps", "daemonsets", "DaemonSet", &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns"}, Spec: appsv1.DaemonSetSpec{Template: tmpl}}},
		{"batch", "cronjobs", "CronJob", &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns"}, Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}}}}},
		{"", "replicationcontrollers", "ReplicationController", &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns"}, Spec: corev1.ReplicationControllerSpec{Template: &tmpl}}},
		{"", "podtemplates", "PodTemplate", &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns"}, Template: tmpl}},
	}
	for _, w := range workloads {
		t.Run("upstream: pod templates are warned and audited, never rejected: "+w.resource, func(t *testing.T) {
			a := req(admission.Create, w.group, w.resource, "", w.kind, "ns", w.obj.DeepCopyObject(), nil)
			wantStatus(t, admit(p, a), 0, "")
			want := []string{`would violate PodSecurity "baseline:latest": ` + privilegedDetail}
			if got := a.Warnings(); !reflect.DeepEqual(got, want) {
				t.Errorf("warnings %q", got)
			}
			if got := a.Annotations()[psLabel("audit-violations")]; got != want[0] {
				t.Errorf("audit annotation %q", got)
			}
			if _, ok := a.Annotations()[psLabel("enforce-policy")]; ok {
				t.Error("workloads are not enforced")
			}
		})
	}
	t.Run("upstream: a replication controller without template is skipped", func(t *testing.T) {
		a := req(admission.Create, "", "replicationcontrollers", "", "ReplicationController", "ns", &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "w"}}, nil)
		wantStatus(t, admit(p, a), 0, "")
		if len(a.Warnings()) != 0 {
			t.Errorf("warnings %q", a.Warnings())
		}
	})
}

func TestPodSecurityNamespaces(t *testing.T) {
	objects := &objectsWithPods{Objects: &admissiontest.Objects{}}
	owner := func(pd *corev1.Pod, uid string) *corev1.Pod {
		tr := true
		pd.OwnerReferences = []metav1.OwnerReference{{UID: types.UID(uid), Controller: &tr, Name: "rs", Kind: "ReplicaSet", APIVersion: "apps/v1"}}
		return pd
	}
	for _, pd := range []*corev1.Pod{privilegedPod("web-1"), privilegedPod("web-2"), owner(privilegedPod("rs-b"), "u1"), owner(privilegedPod("rs-a"), "u1"), pod("fine", "nginx")} {
		pd.Namespace = "ns"
		objects.pods.Add(pd)
	}
	// The dry-run needs the pod lister: build over the wrapper.
	deps := admissiontest.Deps(objects.Objects, nil)
	deps.Objects = objects
	p, err := newPodSecurity(deps, nil)
	if err != nil {
		t.Fatal(err)
	}

	nsReq := func(op admission.Operation, labels, oldLabels map[string]string) *admission.Attributes {
		a := req(op, "", "namespaces", "", "Namespace", "", psNamespace("ns", labels), nil)
		if op == admission.Update {
			a.OldObject = psNamespace("ns", oldLabels)
		}
		return a
	}
	t.Run("upstream: invalid labels are refused on create", func(t *testing.T) {
		wantStatus(t, admit(p, nsReq(admission.Create, map[string]string{psLabel("enforce"): "bogus", psLabel("warn-version"): "v2"}, nil)), 422,
			`Namespace "ns" is invalid: [metadata.labels[`+psLabel("enforce")+`]: Invalid value: "bogus": must be one of privileged, baseline, restricted, metadata.labels[`+psLabel("warn-version")+`]: Invalid value: "v2": must be "latest" or "v1.x"]`)
	})
	t.Run("upstream: unchanged invalid labels do not block other updates", func(t *testing.T) {
		bad := map[string]string{psLabel("enforce"): "bogus"}
		wantStatus(t, admit(p, nsReq(admission.Update, bad, bad)), 0, "")
	})
	t.Run("upstream: a stricter enforce level is dry-run against existing pods", func(t *testing.T) {
		a := nsReq(admission.Update, map[string]string{psLabel("enforce"): "baseline"}, nil)
		wantStatus(t, admit(p, a), 0, "")
		// Four pods are privileged (one of them a second replica of rs); upstream names the
		// lexically first pod of each distinct violation and counts the others.
		want := []string{
			`existing pods in namespace "ns" violate the new PodSecurity enforce level "baseline:latest"`,
			`rs-a (and 3 other pods): privileged`,
		}
		if got := a.Warnings(); !reflect.DeepEqual(got, want) {
			t.Errorf("warnings\n got %q\nwant %q", got, want)
		}
	})
	t.Run("upstream: relaxing the level needs no dry-run", func(t *testing.T) {
		a := nsReq(admission.Update, map[string]string{psLabel("enforce"): "baseline"}, map[string]string{psLabel("enforce"): "restricted"})
		wantStatus(t, admit(p, a), 0, "")
		if len(a.Warnings()) != 0 {
			t.Errorf("warnings %q", a.Warnings())
		}
	})
	t.Run("upstream: the dry-run is bounded by the pod limit", func(t *testing.T) {
		ps := p.(*podSecurity)
		ps.maxPods = 2
		defer func() { ps.maxPods = namespaceMaxPodsToCheck }()
		a := nsReq(admission.Update, map[string]string{psLabel("enforce"): "restricted"}, nil)
		wantStatus(t, admit(p, a), 0, "")
		if got := a.Warnings(); len(got) == 0 || got[0] != "new PodSecurity enforce level only checked against the first 2 of 5 existing pods" {
			t.Errorf("warnings %q", got)
		}
	})
}

func TestPodSecurityConfiguration(t *testing.T) {
	for _, c := range []struct {
		name, config string
		ok           bool
	}{
		{"upstream: v1beta1 is read", `{"apiVersion": "pod-security.admission.config.k8s.io/v1beta1", "kind": "PodSecurityConfiguration", "defaults": {"enforce": "baseline"}}`, true},
		{"Platform's group is read", `{"apiVersion": "pod-security.admission.config.` + naming.GroupSuffix + `/v1", "kind": "PodSecurityConfiguration"}`, true},
		{"upstream validation: a bad default level", `{"defaults": {"warn": "strict"}}`, false},
		{"upstream validation: a bad default version", `{"defaults": {"audit-version": "1.30"}}`, false},
		{"upstream validation: duplicate exempt namespaces", `{"exemptions": {"namespaces": ["a", "a"]}}`, false},
		{"upstream validation: empty exempt user", `{"exemptions": {"usernames": [""]}}`, false},
		{"another kind", `{"apiVersion": "v1", "kind": "ConfigMap"}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := newPodSecurity(admissiontest.Deps(&admissiontest.Objects{}, nil), []byte(c.config))
			if (err == nil) != c.ok {
				t.Fatalf("err = %v", err)
			}
		})
	}
	t.Run("configured defaults apply to unlabelled namespaces", func(t *testing.T) {
		objects := &admissiontest.Objects{}
		objects.NamespaceList.Add(psNamespace("ns", nil))
		p := build(t, admission.PodSecurity, objects, `{"defaults": {"enforce": "baseline"}}`)
		wantStatus(t, admit(p, podReq(admission.Create, "", privilegedPod("p"), nil)), 403, `pods "p" is forbidden: violates PodSecurity "baseline:latest": `+privilegedDetail)
	})
}

func TestPodSecurityExemptNamespaceWarning(t *testing.T) {
	p := build(t, admission.PodSecurity, &admissiontest.Objects{}, `{"exemptions": {"namespaces": ["quiet"]}}`)
	ns := func(labels map[string]string) *corev1.Namespace { return psNamespace("quiet", labels) }
	cases := []struct {
		name   string
		op     admission.Operation
		labels map[string]string
		want   []string
	}{
		{"upstream: labels that would apply a policy to an exempt namespace are warned about", admission.Create,
			map[string]string{psLabel("enforce"): "restricted", psLabel("warn"): "baseline"},
			[]string{`namespace "quiet" is exempt from Pod Security, and the policy (enforce=restricted:latest, warn=baseline:latest) will be ignored`}},
		{"upstream: and on updates that make enforce stricter", admission.Update,
			map[string]string{psLabel("enforce"): "baseline"},
			[]string{`namespace "quiet" is exempt from Pod Security, and the policy (enforce=baseline:latest) will be ignored`}},
		{"upstream: privileged labels need no warning", admission.Create, map[string]string{psLabel("enforce"): "privileged"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := req(c.op, "", "namespaces", "", "Namespace", "", ns(c.labels), nil)
			if c.op == admission.Update {
				a.OldObject = ns(nil)
			}
			wantStatus(t, admit(p, a), 0, "")
			if got := a.Warnings(); !reflect.DeepEqual(got, c.want) {
				t.Errorf("warnings\n got %q\nwant %q", got, c.want)
			}
		})
	}
}
