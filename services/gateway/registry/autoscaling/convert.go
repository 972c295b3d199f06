// Package autoscaling holds the conversions of HorizontalPodAutoscalers between autoscaling/v1
// (served) and autoscaling/v2 (stored), written from upstream's facts (its conversions live in
// k8s.io/kubernetes, which is not imported).
package autoscaling

import (
	"encoding/json"
	"fmt"
	"reflect"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"

	"platform.io/libs/naming"
	"platform.io/services/gateway/registry/builtin"
)

// HorizontalPodAutoscalers are stored as autoscaling/v2 and served as autoscaling/v1 too, with
// upstream's conversion (its facts, our code). v1 has one metric, the CPU utilization target
// (spec.targetCPUUtilizationPercentage, status.currentCPUUtilizationPercentage); what it cannot
// say travels in annotations, so that objects written through one version read through the
// other without loss (spec "Deprecation rules", rule 2):
//
//   - autoscaling.alpha.<domain>/metrics: the metrics other than a CPU utilization target, in
//     v1's metric form (JSON list of autoscaling/v1 MetricSpec);
//   - .../current-metrics: every current metric (v1 MetricStatus), the CPU one included;
//   - .../conditions: the status conditions (v1 HorizontalPodAutoscalerCondition);
//   - .../behavior: spec.behavior, encoded as upstream encodes it (its internal type's JSON, field
//     names capitalised: {"ScaleUp":{"StabilizationWindowSeconds":0,...}}).
//
// Reading through v1 adds them; writing through v1 takes them out again. Facts kept from
// upstream: the CPU utilization metric comes back last among the metrics; a v1 object without
// any metric gets the implicit 80% CPU target; a Resource current metric comes back with an
// averageValue (0 when it had none), an Object metric target with a value (0 when it had none).
var (
	hpaMetricsAnnotation        = "autoscaling.alpha." + naming.Domain + "/metrics"
	hpaCurrentMetricsAnnotation = "autoscaling.alpha." + naming.Domain + "/current-metrics"
	hpaConditionsAnnotation     = "autoscaling.alpha." + naming.Domain + "/conditions"
	hpaBehaviorAnnotation       = "autoscaling.alpha." + naming.Domain + "/behavior"
)

// hpaDefaultCPUUtilization is the CPU target of an HPA that names no metric.
const hpaDefaultCPUUtilization = 80

// hpaBehaviorJSON, hpaRulesJSON and hpaPolicyJSON are the shape of the behavior annotation:
// upstream writes its internal Go type, which has no JSON field names.
type hpaBehaviorJSON struct {
	ScaleUp   *hpaRulesJSON
	ScaleDown *hpaRulesJSON
}

type hpaRulesJSON struct {
	StabilizationWindowSeconds *int32
	SelectPolicy               *autoscalingv2.ScalingPolicySelect
	Policies                   []hpaPolicyJSON
	Tolerance                  *resource.Quantity
}

type hpaPolicyJSON struct {
	Type          autoscalingv2.HPAScalingPolicyType
	Value         int32
	PeriodSeconds int32
}

// isCPUUtilizationTarget tells whether a v2 metric is the one v1's targetCPUUtilizationPercentage
// says.
func isCPUUtilizationTarget(m autoscalingv2.MetricSpec) bool {
	return m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil &&
		m.Resource.Name == corev1.ResourceCPU && m.Resource.Target.AverageUtilization != nil
}

// hpaV2ToV1 converts a stored HorizontalPodAutoscaler to autoscaling/v1.
func hpaV2ToV1(in *autoscalingv2.HorizontalPodAutoscaler) (*autoscalingv1.HorizontalPodAutoscaler, error) {
	in = in.DeepCopy()
	out := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: in.ObjectMeta}
	out.Spec = autoscalingv1.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv1.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
		MinReplicas:    in.Spec.MinReplicas,
		MaxReplicas:    in.Spec.MaxReplicas,
	}
	for _, m := range in.Spec.Metrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU {
			if u := m.Resource.Target.AverageUtilization; u != nil {
				out.Spec.TargetCPUUtilizationPercentage = ptrTo(*u)
			}
			break
		}
	}
	out.Status = autoscalingv1.HorizontalPodAutoscalerStatus{
		ObservedGeneration: in.Status.ObservedGeneration,
		LastScaleTime:      in.Status.LastScaleTime,
		CurrentReplicas:    in.Status.CurrentReplicas,
		DesiredReplicas:    in.Status.DesiredReplicas,
	}
	for _, m := range in.Status.CurrentMetrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU && m.Resource.Current.AverageUtilization != nil {
			out.Status.CurrentCPUUtilizationPercentage = ptrTo(*m.Resource.Current.AverageUtilization)
		}
	}

	var other []autoscalingv1.MetricSpec
	for _, m := range in.Spec.Metrics {
		if !isCPUUtilizationTarget(m) {
			other = append(other, metricSpecToV1(m))
		}
	}
	current := make([]autoscalingv1.MetricStatus, len(in.Status.CurrentMetrics))
	for i, m := range in.Status.CurrentMetrics {
		current[i] = metricStatusToV1(m)
	}
	conditions := make([]autoscalingv1.HorizontalPodAutoscalerCondition, len(in.Status.Conditions))
	for i, c := range in.Status.Conditions {
		conditions[i] = autoscalingv1.HorizontalPodAutoscalerCondition{Type: autoscalingv1.HorizontalPodAutoscalerConditionType(c.Type),
			Status: c.Status, LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message}
	}
	set := func(key string, v any) error {
		data, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encoding %s: %w", key, err)
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[key] = string(data)
		return nil
	}
	if len(other) > 0 {
		if err := set(hpaMetricsAnnotation, other); err != nil {
			return nil, err
		}
	}
	if len(current) > 0 {
		if err := set(hpaCurrentMetricsAnnotation, current); err != nil {
			return nil, err
		}
	}
	if b := in.Spec.Behavior; b != nil {
		if err := set(hpaBehaviorAnnotation, hpaBehaviorJSON{ScaleUp: rulesToJSON(b.ScaleUp), ScaleDown: rulesToJSON(b.ScaleDown)}); err != nil {
			return nil, err
		}
	}
	if len(conditions) > 0 {
		if err := set(hpaConditionsAnnotation, conditions); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// hpaV1ToV2 converts an autoscaling/v1 HorizontalPodAutoscaler to the stored version, taking
// what v1 cannot say out of the annotations. A malformed annotation is an error.
func hpaV1ToV2(in *autoscalingv1.HorizontalPodAutoscaler) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	in = in.DeepCopy()
	out := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: in.ObjectMeta}
	out.Spec = autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
		MinReplicas:    in.Spec.MinReplicas,
		MaxReplicas:    in.Spec.MaxReplicas,
	}
	if u := in.Spec.TargetCPUUtilizationPercentage; u != nil {
		out.Spec.Metrics = []autoscalingv2.MetricSpec{cpuUtilizationTarget(*u)}
	}
	out.Status = autoscalingv2.HorizontalPodAutoscalerStatus{
		ObservedGeneration: in.Status.ObservedGeneration,
		LastScaleTime:      in.Status.LastScaleTime,
		CurrentReplicas:    in.Status.CurrentReplicas,
		DesiredReplicas:    in.Status.DesiredReplicas,
	}
	if u := in.Status.CurrentCPUUtilizationPercentage; u != nil {
		out.Status.CurrentMetrics = []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptrTo(*u)}}}}
	}

	annotations := out.Annotations
	took := false
	take := func(key string, into any) (bool, error) {
		v, ok := annotations[key]
		if !ok {
			return false, nil
		}
		if err := json.Unmarshal([]byte(v), into); err != nil {
			return false, fmt.Errorf("annotation %s: %w", key, err)
		}
		delete(annotations, key)
		took = true
		return true, nil
	}
	var other []autoscalingv1.MetricSpec
	if ok, err := take(hpaMetricsAnnotation, &other); err != nil {
		return nil, err
	} else if ok {
		metrics := make([]autoscalingv2.MetricSpec, 0, len(other)+1)
		for _, m := range other {
			metrics = append(metrics, metricSpecFromV1(m))
		}
		// The CPU target of the v1 field comes after the others.
		out.Spec.Metrics = append(metrics, out.Spec.Metrics...)
	}
	var current []autoscalingv1.MetricStatus
	if ok, err := take(hpaCurrentMetricsAnnotation, &current); err != nil {
		return nil, err
	} else if ok {
		// The annotation has every current metric, the CPU one with more than the v1 field says.
		out.Status.CurrentMetrics = make([]autoscalingv2.MetricStatus, len(current))
		for i, m := range current {
			out.Status.CurrentMetrics[i] = metricStatusFromV1(m)
		}
	}
	if len(out.Spec.Metrics) == 0 {
		out.Spec.Metrics = []autoscalingv2.MetricSpec{cpuUtilizationTarget(hpaDefaultCPUUtilization)}
	}
	var behavior hpaBehaviorJSON
	if ok, err := take(hpaBehaviorAnnotation, &behavior); err != nil {
		return nil, err
	} else if ok {
		out.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: rulesFromJSON(behavior.ScaleUp), ScaleDown: rulesFromJSON(behavior.ScaleDown)}
	}
	var conditions []autoscalingv1.HorizontalPodAutoscalerCondition
	if ok, err := take(hpaConditionsAnnotation, &conditions); err != nil {
		return nil, err
	} else if ok {
		out.Status.Conditions = make([]autoscalingv2.HorizontalPodAutoscalerCondition, len(conditions))
		for i, c := range conditions {
			out.Status.Conditions[i] = autoscalingv2.HorizontalPodAutoscalerCondition{Type: autoscalingv2.HorizontalPodAutoscalerConditionType(c.Type),
				Status: c.Status, LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message}
		}
	}
	if took && len(annotations) == 0 {
		out.Annotations = nil
	}
	return out, nil
}

func cpuUtilizationTarget(percent int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptrTo(percent)}}}
}

func rulesToJSON(in *autoscalingv2.HPAScalingRules) *hpaRulesJSON {
	if in == nil {
		return nil
	}
	out := &hpaRulesJSON{StabilizationWindowSeconds: in.StabilizationWindowSeconds, SelectPolicy: in.SelectPolicy, Tolerance: in.Tolerance}
	for _, p := range in.Policies {
		out.Policies = append(out.Policies, hpaPolicyJSON{Type: p.Type, Value: p.Value, PeriodSeconds: p.PeriodSeconds})
	}
	return out
}

func rulesFromJSON(in *hpaRulesJSON) *autoscalingv2.HPAScalingRules {
	if in == nil {
		return nil
	}
	out := &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: in.StabilizationWindowSeconds, SelectPolicy: in.SelectPolicy, Tolerance: in.Tolerance}
	for _, p := range in.Policies {
		out.Policies = append(out.Policies, autoscalingv2.HPAScalingPolicy{Type: p.Type, Value: p.Value, PeriodSeconds: p.PeriodSeconds})
	}
	return out
}

// metricSpecToV1 is a v2 metric in v1's (v2beta1-shaped) metric form.
func metricSpecToV1(in autoscalingv2.MetricSpec) autoscalingv1.MetricSpec {
	out := autoscalingv1.MetricSpec{Type: autoscalingv1.MetricSourceType(in.Type)}
	if o := in.Object; o != nil {
		m := &autoscalingv1.ObjectMetricSource{Target: autoscalingv1.CrossVersionObjectReference(o.DescribedObject),
			MetricName: o.Metric.Name, Selector: o.Metric.Selector, AverageValue: o.Target.AverageValue}
		if o.Target.Value != nil {
			m.TargetValue = *o.Target.Value
		}
		out.Object = m
	}
	if p := in.Pods; p != nil {
		m := &autoscalingv1.PodsMetricSource{MetricName: p.Metric.Name, Selector: p.Metric.Selector}
		if p.Target.AverageValue != nil {
			m.TargetAverageValue = *p.Target.AverageValue
		}
		out.Pods = m
	}
	if r := in.Resource; r != nil {
		out.Resource = &autoscalingv1.ResourceMetricSource{Name: r.Name, TargetAverageUtilization: r.Target.AverageUtilization, TargetAverageValue: r.Target.AverageValue}
	}
	if c := in.ContainerResource; c != nil {
		out.ContainerResource = &autoscalingv1.ContainerResourceMetricSource{Name: c.Name, Container: c.Container,
			TargetAverageUtilization: c.Target.AverageUtilization, TargetAverageValue: c.Target.AverageValue}
	}
	if e := in.External; e != nil {
		out.External = &autoscalingv1.ExternalMetricSource{MetricName: e.Metric.Name, MetricSelector: e.Metric.Selector,
			TargetValue: e.Target.Value, TargetAverageValue: e.Target.AverageValue}
	}
	return out
}

// metricSpecFromV1 is the reverse of metricSpecToV1; the target's type follows from which
// values are set, as upstream decides it.
func metricSpecFromV1(in autoscalingv1.MetricSpec) autoscalingv2.MetricSpec {
	out := autoscalingv2.MetricSpec{Type: autoscalingv2.MetricSourceType(in.Type)}
	if o := in.Object; o != nil {
		t := autoscalingv2.ValueMetricType
		if o.AverageValue != nil {
			t = autoscalingv2.AverageValueMetricType
		}
		value := o.TargetValue
		out.Object = &autoscalingv2.ObjectMetricSource{DescribedObject: autoscalingv2.CrossVersionObjectReference(o.Target),
			Metric: autoscalingv2.MetricIdentifier{Name: o.MetricName, Selector: o.Selector},
			Target: autoscalingv2.MetricTarget{Type: t, Value: &value, AverageValue: o.AverageValue}}
	}
	if p := in.Pods; p != nil {
		avg := p.TargetAverageValue
		out.Pods = &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: p.MetricName, Selector: p.Selector},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg}}
	}
	if r := in.Resource; r != nil {
		out.Resource = &autoscalingv2.ResourceMetricSource{Name: r.Name, Target: resourceTarget(r.TargetAverageUtilization, r.TargetAverageValue)}
	}
	if c := in.ContainerResource; c != nil {
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricSource{Name: c.Name, Container: c.Container,
			Target: resourceTarget(c.TargetAverageUtilization, c.TargetAverageValue)}
	}
	if e := in.External; e != nil {
		t := autoscalingv2.AverageValueMetricType
		if e.TargetValue != nil {
			t = autoscalingv2.ValueMetricType
		}
		out.External = &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: e.MetricName, Selector: e.MetricSelector},
			Target: autoscalingv2.MetricTarget{Type: t, Value: e.TargetValue, AverageValue: e.TargetAverageValue}}
	}
	return out
}

func resourceTarget(utilization *int32, average *resource.Quantity) autoscalingv2.MetricTarget {
	t := autoscalingv2.AverageValueMetricType
	if utilization != nil {
		t = autoscalingv2.UtilizationMetricType
	}
	return autoscalingv2.MetricTarget{Type: t, AverageUtilization: utilization, AverageValue: average}
}

func metricStatusToV1(in autoscalingv2.MetricStatus) autoscalingv1.MetricStatus {
	out := autoscalingv1.MetricStatus{Type: autoscalingv1.MetricSourceType(in.Type)}
	if o := in.Object; o != nil {
		m := &autoscalingv1.ObjectMetricStatus{Target: autoscalingv1.CrossVersionObjectReference(o.DescribedObject),
			MetricName: o.Metric.Name, Selector: o.Metric.Selector, AverageValue: o.Current.AverageValue}
		if o.Current.Value != nil {
			m.CurrentValue = *o.Current.Value
		}
		out.Object = m
	}
	if p := in.Pods; p != nil {
		m := &autoscalingv1.PodsMetricStatus{MetricName: p.Metric.Name, Selector: p.Metric.Selector}
		if p.Current.AverageValue != nil {
			m.CurrentAverageValue = *p.Current.AverageValue
		}
		out.Pods = m
	}
	if r := in.Resource; r != nil {
		m := &autoscalingv1.ResourceMetricStatus{Name: r.Name, CurrentAverageUtilization: r.Current.AverageUtilization}
		if r.Current.AverageValue != nil {
			m.CurrentAverageValue = *r.Current.AverageValue
		}
		out.Resource = m
	}
	if c := in.ContainerResource; c != nil {
		m := &autoscalingv1.ContainerResourceMetricStatus{Name: c.Name, Container: c.Container, CurrentAverageUtilization: c.Current.AverageUtilization}
		if c.Current.AverageValue != nil {
			m.CurrentAverageValue = *c.Current.AverageValue
		}
		out.ContainerResource = m
	}
	if e := in.External; e != nil {
		m := &autoscalingv1.ExternalMetricStatus{MetricName: e.Metric.Name, MetricSelector: e.Metric.Selector, CurrentAverageValue: e.Current.AverageValue}
		if e.Current.Value != nil {
			m.CurrentValue = *e.Current.Value
		}
		out.External = m
	}
	return out
}

func metricStatusFromV1(in autoscalingv1.MetricStatus) autoscalingv2.MetricStatus {
	out := autoscalingv2.MetricStatus{Type: autoscalingv2.MetricSourceType(in.Type)}
	if o := in.Object; o != nil {
		value := o.CurrentValue
		out.Object = &autoscalingv2.ObjectMetricStatus{DescribedObject: autoscalingv2.CrossVersionObjectReference(o.Target),
			Metric:  autoscalingv2.MetricIdentifier{Name: o.MetricName, Selector: o.Selector},
			Current: autoscalingv2.MetricValueStatus{Value: &value, AverageValue: o.AverageValue}}
	}
	if p := in.Pods; p != nil {
		avg := p.CurrentAverageValue
		out.Pods = &autoscalingv2.PodsMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: p.MetricName, Selector: p.Selector},
			Current: autoscalingv2.MetricValueStatus{AverageValue: &avg}}
	}
	if r := in.Resource; r != nil {
		avg := r.CurrentAverageValue
		out.Resource = &autoscalingv2.ResourceMetricStatus{Name: r.Name,
			Current: autoscalingv2.MetricValueStatus{AverageValue: &avg, AverageUtilization: r.CurrentAverageUtilization}}
	}
	if c := in.ContainerResource; c != nil {
		avg := c.CurrentAverageValue
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricStatus{Name: c.Name, Container: c.Container,
			Current: autoscalingv2.MetricValueStatus{AverageValue: &avg, AverageUtilization: c.CurrentAverageUtilization}}
	}
	if e := in.External; e != nil {
		value := e.CurrentValue
		out.External = &autoscalingv2.ExternalMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: e.MetricName, Selector: e.MetricSelector},
			Current: autoscalingv2.MetricValueStatus{Value: &value, AverageValue: e.CurrentAverageValue}}
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }

// Conversions are the conversions of every kind this group serves in a second version, by the
// served version's Go type.
var Conversions = map[reflect.Type]builtin.Conversion{
	reflect.TypeOf(&autoscalingv1.HorizontalPodAutoscaler{}): {
		ToStored: func(o runtime.Object) (runtime.Object, error) {
			in, ok := o.(*autoscalingv1.HorizontalPodAutoscaler)
			if !ok {
				return nil, fmt.Errorf("converting to autoscaling/v2: got %T", o)
			}
			return hpaV1ToV2(in)
		},
		FromStored: func(o runtime.Object) (runtime.Object, error) {
			in, ok := o.(*autoscalingv2.HorizontalPodAutoscaler)
			if !ok {
				return nil, fmt.Errorf("converting to autoscaling/v1: got %T", o)
			}
			return hpaV2ToV1(in)
		},
	},
}

// AddToScheme registers the conversions in the scheme too: the field manager converts
// objects to the version each managedFields entry was written in (an object written through
// autoscaling/v2 and applied through autoscaling/v1 is compared in both).
func AddToScheme(s *runtime.Scheme) {
	must := func(err error) {
		if err != nil {
			panic(fmt.Sprintf("autoscaling: registering a version conversion: %v", err))
		}
	}
	must(s.AddConversionFunc((*autoscalingv1.HorizontalPodAutoscaler)(nil), (*autoscalingv2.HorizontalPodAutoscaler)(nil),
		func(a, b any, _ conversion.Scope) error {
			out, err := hpaV1ToV2(a.(*autoscalingv1.HorizontalPodAutoscaler))
			if err != nil {
				return err
			}
			*b.(*autoscalingv2.HorizontalPodAutoscaler) = *out
			return nil
		}))
	must(s.AddConversionFunc((*autoscalingv2.HorizontalPodAutoscaler)(nil), (*autoscalingv1.HorizontalPodAutoscaler)(nil),
		func(a, b any, _ conversion.Scope) error {
			out, err := hpaV2ToV1(a.(*autoscalingv2.HorizontalPodAutoscaler))
			if err != nil {
				return err
			}
			*b.(*autoscalingv1.HorizontalPodAutoscaler) = *out
			return nil
		}))
}
