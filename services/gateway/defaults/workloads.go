package defaults

import (
	"maps"
	"math"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func deployment(d *appsv1.Deployment) {
	defPtr(&d.Spec.Replicas, 1)
	st := &d.Spec.Strategy
	def(&st.Type, appsv1.RollingUpdateDeploymentStrategyType)
	if st.Type == appsv1.RollingUpdateDeploymentStrategyType {
		defPtr(&st.RollingUpdate, appsv1.RollingUpdateDeployment{})
		defPtr(&st.RollingUpdate.MaxUnavailable, intstr.FromString("25%"))
		defPtr(&st.RollingUpdate.MaxSurge, intstr.FromString("25%"))
	}
	defPtr(&d.Spec.RevisionHistoryLimit, 10)
	defPtr(&d.Spec.ProgressDeadlineSeconds, 600)
	podSpec(&d.Spec.Template.Spec)
}

func statefulSet(ss *appsv1.StatefulSet) {
	s := &ss.Spec
	def(&s.PodManagementPolicy, appsv1.OrderedReadyPodManagement)
	if s.UpdateStrategy.Type == "" {
		s.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
		defPtr(&s.UpdateStrategy.RollingUpdate, appsv1.RollingUpdateStatefulSetStrategy{})
	}
	// An explicit RollingUpdate type without rollingUpdate stays so, as upstream.
	if s.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType && s.UpdateStrategy.RollingUpdate != nil {
		defPtr(&s.UpdateStrategy.RollingUpdate.Partition, 0)
	}
	defPtr(&s.PersistentVolumeClaimRetentionPolicy, appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{})
	def(&s.PersistentVolumeClaimRetentionPolicy.WhenDeleted, appsv1.RetainPersistentVolumeClaimRetentionPolicyType)
	def(&s.PersistentVolumeClaimRetentionPolicy.WhenScaled, appsv1.RetainPersistentVolumeClaimRetentionPolicyType)
	defPtr(&s.Replicas, 1)
	defPtr(&s.RevisionHistoryLimit, 10)
	podSpec(&s.Template.Spec)
	// Claim templates are whole claims upstream, so they get a claim's defaults, status included.
	for i := range s.VolumeClaimTemplates {
		t := &s.VolumeClaimTemplates[i]
		def(&t.Status.Phase, corev1.ClaimPending)
		pvcSpec(&t.Spec)
	}
}

func daemonSet(ds *appsv1.DaemonSet) {
	st := &ds.Spec.UpdateStrategy
	def(&st.Type, appsv1.RollingUpdateDaemonSetStrategyType)
	if st.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		defPtr(&st.RollingUpdate, appsv1.RollingUpdateDaemonSet{})
		defPtr(&st.RollingUpdate.MaxUnavailable, intstr.FromInt32(1))
		defPtr(&st.RollingUpdate.MaxSurge, intstr.FromInt32(0))
	}
	defPtr(&ds.Spec.RevisionHistoryLimit, 10)
	podSpec(&ds.Spec.Template.Spec)
}

func job(j *batchv1.Job) {
	s := &j.Spec
	if s.Completions == nil && s.Parallelism == nil { // a non-parallel job: one pod, once
		s.Completions = ptr[int32](1)
	}
	defPtr(&s.Parallelism, 1)
	if s.BackoffLimitPerIndex != nil {
		defPtr(&s.BackoffLimit, math.MaxInt32) // the per-index limit governs
	}
	defPtr(&s.BackoffLimit, 6)
	if labels := s.Template.Labels; labels != nil && len(j.Labels) == 0 {
		j.Labels = maps.Clone(labels)
	}
	defPtr(&s.CompletionMode, batchv1.NonIndexedCompletion)
	defPtr(&s.Suspend, false)
	if s.PodFailurePolicy != nil { // pod failure policies need pods fully terminated
		defPtr(&s.PodReplacementPolicy, batchv1.Failed)
	}
	defPtr(&s.PodReplacementPolicy, batchv1.TerminatingOrFailed)
	defPtr(&s.ManualSelector, false)
	jobTemplate(s)
}

// jobTemplate sets the defaults a job spec gets wherever it appears (in Jobs and CronJobs); the
// Job-level ones (parallelism, backoff limit and so on) are upstream's for Jobs only.
func jobTemplate(s *batchv1.JobSpec) {
	if s.PodFailurePolicy != nil {
		for _, rule := range s.PodFailurePolicy.Rules {
			for i := range rule.OnPodConditions {
				def(&rule.OnPodConditions[i].Status, corev1.ConditionTrue)
			}
		}
	}
	podSpec(&s.Template.Spec)
}

func cronJob(cj *batchv1.CronJob) {
	def(&cj.Spec.ConcurrencyPolicy, batchv1.AllowConcurrent)
	defPtr(&cj.Spec.Suspend, false)
	defPtr(&cj.Spec.SuccessfulJobsHistoryLimit, 3)
	defPtr(&cj.Spec.FailedJobsHistoryLimit, 1)
	jobTemplate(&cj.Spec.JobTemplate.Spec)
}

func horizontalPodAutoscaler(hpa *autoscalingv2.HorizontalPodAutoscaler) {
	s := &hpa.Spec
	defPtr(&s.MinReplicas, 1)
	if len(s.Metrics) == 0 { // 80% average CPU utilization
		s.Metrics = []autoscalingv2.MetricSpec{{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{
				Name:   corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr[int32](80)},
			},
		}}
	}
	// A behavior, once given, is filled in: upstream's built-in scaling rules become explicit.
	if b := s.Behavior; b != nil {
		defPtr(&b.ScaleUp, autoscalingv2.HPAScalingRules{})
		defPtr(&b.ScaleUp.StabilizationWindowSeconds, 0)
		defPtr(&b.ScaleUp.SelectPolicy, autoscalingv2.MaxChangePolicySelect)
		if b.ScaleUp.Policies == nil { // at most 4 pods or 100% more per 15s, whichever is more
			b.ScaleUp.Policies = []autoscalingv2.HPAScalingPolicy{
				{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
				{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
			}
		}
		// The scale-down stabilization window stays unset: its default is a controller flag.
		defPtr(&b.ScaleDown, autoscalingv2.HPAScalingRules{})
		defPtr(&b.ScaleDown.SelectPolicy, autoscalingv2.MaxChangePolicySelect)
		if b.ScaleDown.Policies == nil { // up to 100% fewer per 15s
			b.ScaleDown.Policies = []autoscalingv2.HPAScalingPolicy{
				{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
			}
		}
	}
}
