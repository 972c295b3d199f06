package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"platform.io/libs/naming"
)

// Issue 14 "Versions served as upstream, with conversion": an HPA written through client-go's
// autoscaling/v2 client reads through its autoscaling/v1 client (CPU target in v1's field, the
// rest in upstream's annotations), is updated and watched through v1, and reads back in v2
// without loss; kubectl reads it in both versions.
func TestHPAVersionsConversion(t *testing.T) {
	s := useShared(t)
	ns := createNamespace(t, dynamicClient(t, s), "e2e-hpa-")
	c, err := kubernetes.NewForConfig(restConfig(t, s, "e2e-admin"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 60*time.Second)
	q := resource.MustParse
	ptr := func(i int32) *int32 { return &i }
	window := int32(120)
	minPolicy := autoscalingv2.MinChangePolicySelect
	spec := autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		MinReplicas:    ptr(2), MaxReplicas: 10,
		Metrics: []autoscalingv2.MetricSpec{
			{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceMemory,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptrQ(q("512Mi"))}}},
			{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "packets"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptrQ(q("1k"))}}},
			{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr(70)}}},
		},
		Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &window,
			SelectPolicy: &minPolicy, Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 10, PeriodSeconds: 60}}}},
	}
	created, err := c.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	v1, err := c.AutoscalingV1().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	prefix := "autoscaling.alpha." + naming.Domain + "/"
	if v1.UID != created.UID || v1.Spec.TargetCPUUtilizationPercentage == nil || *v1.Spec.TargetCPUUtilizationPercentage != 70 ||
		v1.Annotations[prefix+"metrics"] == "" || v1.Annotations[prefix+"behavior"] == "" {
		t.Fatalf("v1 view: uid %s, spec %+v, annotations %v", v1.UID, v1.Spec, v1.Annotations)
	}
	var other []autoscalingv1.MetricSpec
	if err := json.Unmarshal([]byte(v1.Annotations[prefix+"metrics"]), &other); err != nil || len(other) != 2 || other[1].Pods == nil || other[1].Pods.MetricName != "packets" {
		t.Errorf("metrics annotation %q: %v", v1.Annotations[prefix+"metrics"], err)
	}

	// Watched and updated through v1; back in v2 nothing is lost.
	w, err := c.AutoscalingV1().HorizontalPodAutoscalers(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: v1.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	v1.Spec.MaxReplicas = 12
	if _, err := c.AutoscalingV1().HorizontalPodAutoscalers(ns).Update(ctx, v1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		got, ok := ev.Object.(*autoscalingv1.HorizontalPodAutoscaler)
		if ev.Type != watch.Modified || !ok || got.Spec.MaxReplicas != 12 || got.Annotations[prefix+"metrics"] == "" {
			t.Errorf("v1 watch: %s %#v", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("no watch event for the v1 update")
	}
	v2, err := c.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := created.Spec // as stored, with v2's defaults (behavior.scaleUp)
	want.MaxReplicas = 12
	if !apiequality.Semantic.DeepEqual(v2.Spec, want) || len(v2.Annotations) != 0 {
		t.Errorf("v2 after the v1 round trip:\n got %+v\nwant %+v\nannotations %v", v2.Spec, want, v2.Annotations)
	}

	// kubectl reads it in both versions (v2 preferred).
	k := newKubectl(t, s, ns)
	if out := k.ok("", "get", "horizontalpodautoscalers.v1.autoscaling", "web", "-o", "jsonpath={.apiVersion} {.spec.targetCPUUtilizationPercentage}"); out != "autoscaling/v1 70" {
		t.Errorf("kubectl get hpa.v1: %q", out)
	}
	if out := k.ok("", "get", "hpa", "web", "-o", "jsonpath={.apiVersion} {.spec.maxReplicas} {.spec.metrics[1].pods.metric.name}"); out != "autoscaling/v2 12 packets" {
		t.Errorf("kubectl get hpa: %q", out)
	}
	if out := k.ok("", "get", "horizontalpodautoscalers.v1.autoscaling", "web"); !strings.Contains(out, "Deployment/web") {
		t.Errorf("kubectl get hpa.v1 table:\n%s", out)
	}
}

func ptrQ(q resource.Quantity) *resource.Quantity { return &q }

// Issue 14 "Deprecation signals": kubectl prints upstream's warning for core componentstatuses,
// and `kubectl get componentstatuses` lists the services behind the gateway, healthy.
func TestKubectlComponentStatuses(t *testing.T) {
	s := useShared(t)
	k := newKubectl(t, s, "")
	out, stderr, code := k.run("", "get", "componentstatuses")
	if code != 0 || !strings.Contains(stderr, "Warning: v1 ComponentStatus is deprecated in v1.19+") {
		t.Fatalf("kubectl get componentstatuses: exit %d\nstdout %s\nstderr %s", code, out, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || strings.Join(strings.Fields(lines[0]), " ") != "NAME STATUS MESSAGE ERROR" {
		t.Fatalf("kubectl get componentstatuses:\n%s", out)
	}
	for i, name := range []string{"storage", "authentication", "authorization", "admission"} {
		if got := strings.Join(strings.Fields(lines[i+1]), " "); got != name+" Healthy ok" {
			t.Errorf("row %d: %q, want %q", i+1, got, name+" Healthy ok")
		}
	}
	if got := k.ok("", "get", "cs", "storage", "-o", "jsonpath={.conditions[0].type}={.conditions[0].status}"); got != "Healthy=True" {
		t.Errorf("kubectl get cs storage: %q", got)
	}
}
