package printers

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func init() {
	register(deploymentCells, nameColumn,
		text("Ready", "Ready pods out of desired pods."),
		integer("Up-to-date", "Pods that run the current template."),
		integer("Available", "Pods available to serve."),
		ageColumn, containersColumn, imagesColumn, selectorColumn)
	register(replicaSetCells, nameColumn,
		integer("Desired", "Desired number of pods."),
		integer("Current", "Number of pods."),
		integer("Ready", "Number of ready pods."),
		ageColumn, containersColumn, imagesColumn, selectorColumn)
	register(statefulSetCells, nameColumn,
		text("Ready", "Ready pods out of desired pods."),
		ageColumn, containersColumn, imagesColumn)
	register(daemonSetCells, nameColumn,
		integer("Desired", "Nodes that should run the pod."),
		integer("Current", "Nodes that run the pod."),
		integer("Ready", "Nodes whose pod is ready."),
		integer("Up-to-date", "Nodes that run the current template."),
		integer("Available", "Nodes whose pod is available."),
		text("Node Selector", "Node selector of the pod template."),
		ageColumn, containersColumn, imagesColumn, selectorColumn)
	register(func(o *appsv1.ControllerRevision, now time.Time) []any {
		return []any{o.Name, controllerName(o), o.Revision, age(o.CreationTimestamp, now)}
	}, nameColumn,
		text("Controller", "The controller that owns the revision."),
		integer("Revision", "Revision number."),
		ageColumn)
	register(jobCells, nameColumn,
		text("Status", "Status of the job."),
		text("Completions", "Succeeded pods out of required completions."),
		text("Duration", "How long the job ran (runs) for."),
		ageColumn, containersColumn, imagesColumn, selectorColumn)
	register(cronJobCells, nameColumn,
		text("Schedule", "Cron schedule of the job."),
		text("Timezone", "Time zone of the schedule."),
		boolean("Suspend", "Whether further runs are suspended."),
		integer("Active", "Number of running jobs."),
		text("Last Schedule", "Time since a job was last scheduled."),
		ageColumn, containersColumn, imagesColumn, selectorColumn)
	register(hpaCells, nameColumn,
		text("Reference", "The scaled object."),
		text("Targets", "Current and target values of the metrics."),
		integer("MinPods", "Lower limit of replicas."),
		integer("MaxPods", "Upper limit of replicas."),
		integer("Replicas", "Current number of replicas."),
		ageColumn)
	register(func(o *policyv1.PodDisruptionBudget, now time.Time) []any {
		return []any{o.Name, intOrStringOrNA(o.Spec.MinAvailable), intOrStringOrNA(o.Spec.MaxUnavailable),
			int64(o.Status.DisruptionsAllowed), age(o.CreationTimestamp, now)}
	}, nameColumn,
		text("Min Available", "Pods that must remain available."),
		text("Max Unavailable", "Pods that may be unavailable."),
		integer("Allowed Disruptions", "Pods that may be disrupted now."),
		ageColumn)
}

// intOrStringOrNA renders an optional count or percentage, "N/A" when unset.
func intOrStringOrNA(v *intstr.IntOrString) string {
	if v == nil {
		return "N/A"
	}
	return v.String()
}

func deploymentCells(o *appsv1.Deployment, now time.Time) []any {
	names, images := containerCells(o.Spec.Template.Spec.Containers)
	return []any{o.Name, fmt.Sprintf("%d/%d", o.Status.ReadyReplicas, deref(o.Spec.Replicas, 1)),
		int64(o.Status.UpdatedReplicas), int64(o.Status.AvailableReplicas), age(o.CreationTimestamp, now),
		names, images, metav1.FormatLabelSelector(o.Spec.Selector)}
}

func replicaSetCells(o *appsv1.ReplicaSet, now time.Time) []any {
	names, images := containerCells(o.Spec.Template.Spec.Containers)
	return []any{o.Name, int64(deref(o.Spec.Replicas, 1)), int64(o.Status.Replicas), int64(o.Status.ReadyReplicas),
		age(o.CreationTimestamp, now), names, images, metav1.FormatLabelSelector(o.Spec.Selector)}
}

func statefulSetCells(o *appsv1.StatefulSet, now time.Time) []any {
	names, images := containerCells(o.Spec.Template.Spec.Containers)
	return []any{o.Name, fmt.Sprintf("%d/%d", o.Status.ReadyReplicas, deref(o.Spec.Replicas, 1)),
		age(o.CreationTimestamp, now), names, images}
}

func daemonSetCells(o *appsv1.DaemonSet, now time.Time) []any {
	s := o.Status
	names, images := containerCells(o.Spec.Template.Spec.Containers)
	return []any{o.Name, int64(s.DesiredNumberScheduled), int64(s.CurrentNumberScheduled), int64(s.NumberReady),
		int64(s.UpdatedNumberScheduled), int64(s.NumberAvailable), labels.FormatLabels(o.Spec.Template.Spec.NodeSelector),
		age(o.CreationTimestamp, now), names, images, metav1.FormatLabelSelector(o.Spec.Selector)}
}

func jobCells(o *batchv1.Job, now time.Time) []any {
	var completions string
	switch parallelism := deref(o.Spec.Parallelism, 1); {
	case o.Spec.Completions != nil:
		completions = fmt.Sprintf("%d/%d", o.Status.Succeeded, *o.Spec.Completions)
	case parallelism > 1:
		completions = fmt.Sprintf("%d/1 of %d", o.Status.Succeeded, parallelism)
	default:
		completions = fmt.Sprintf("%d/1", o.Status.Succeeded)
	}
	var ran string
	if start := o.Status.StartTime; start != nil {
		end := now
		if o.Status.CompletionTime != nil {
			end = o.Status.CompletionTime.Time
		}
		ran = since(start.Time, end)
	}
	names, images := containerCells(o.Spec.Template.Spec.Containers)
	return []any{o.Name, jobStatus(o), completions, ran, age(o.CreationTimestamp, now),
		names, images, metav1.FormatLabelSelector(o.Spec.Selector)}
}

// jobStatus is the job's most telling true condition, "Terminating" while it is being deleted,
// and "Running" otherwise.
func jobStatus(o *batchv1.Job) string {
	if jobCondition(o, batchv1.JobComplete) {
		return "Complete"
	}
	if jobCondition(o, batchv1.JobFailed) {
		return "Failed"
	}
	if o.DeletionTimestamp != nil {
		return "Terminating"
	}
	for _, t := range []batchv1.JobConditionType{batchv1.JobSuccessCriteriaMet, batchv1.JobFailureTarget, batchv1.JobSuspended} {
		if jobCondition(o, t) {
			return string(t)
		}
	}
	return "Running"
}

func jobCondition(o *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range o.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func cronJobCells(o *batchv1.CronJob, now time.Time) []any {
	last := "<none>"
	if o.Status.LastScheduleTime != nil {
		last = age(*o.Status.LastScheduleTime, now)
	}
	names, images := containerCells(o.Spec.JobTemplate.Spec.Template.Spec.Containers)
	return []any{o.Name, o.Spec.Schedule, deref(o.Spec.TimeZone, "<none>"), deref(o.Spec.Suspend, false),
		int64(len(o.Status.Active)), last, age(o.CreationTimestamp, now),
		names, images, metav1.FormatLabelSelector(o.Spec.JobTemplate.Spec.Selector)}
}

func hpaCells(o *autoscalingv2.HorizontalPodAutoscaler, now time.Time) []any {
	targets := make([]string, len(o.Spec.Metrics))
	for i, m := range o.Spec.Metrics {
		var current *autoscalingv2.MetricStatus
		if i < len(o.Status.CurrentMetrics) {
			current = &o.Status.CurrentMetrics[i]
		}
		targets[i] = hpaTarget(m, current)
	}
	ref := o.Spec.ScaleTargetRef
	return []any{o.Name, ref.Kind + "/" + ref.Name, orNone(joinMax(targets, 2, ", ")),
		int64(deref(o.Spec.MinReplicas, 1)), int64(o.Spec.MaxReplicas), int64(o.Status.CurrentReplicas),
		age(o.CreationTimestamp, now)}
}

// hpaTarget renders one metric as kubectl does: "cpu: 40%/80%", "300m/500m",
// "2/10 (avg)" (an average over an object's or an external metric's value), with "<unknown>"
// for a current value not yet reported.
func hpaTarget(spec autoscalingv2.MetricSpec, status *autoscalingv2.MetricStatus) string {
	var (
		prefix, suffix string
		target         autoscalingv2.MetricTarget
		current        *autoscalingv2.MetricValueStatus
	)
	switch {
	case spec.Type == autoscalingv2.ResourceMetricSourceType && spec.Resource != nil:
		prefix, target = string(spec.Resource.Name)+": ", spec.Resource.Target
		if status != nil && status.Resource != nil {
			current = &status.Resource.Current
		}
	case spec.Type == autoscalingv2.ContainerResourceMetricSourceType && spec.ContainerResource != nil:
		prefix, target = string(spec.ContainerResource.Name)+": ", spec.ContainerResource.Target
		if status != nil && status.ContainerResource != nil {
			current = &status.ContainerResource.Current
		}
	case spec.Type == autoscalingv2.PodsMetricSourceType && spec.Pods != nil:
		target = spec.Pods.Target
		if status != nil && status.Pods != nil {
			current = &status.Pods.Current
		}
	case spec.Type == autoscalingv2.ObjectMetricSourceType && spec.Object != nil:
		suffix, target = " (avg)", spec.Object.Target
		if status != nil && status.Object != nil {
			current = &status.Object.Current
		}
	case spec.Type == autoscalingv2.ExternalMetricSourceType && spec.External != nil:
		suffix, target = " (avg)", spec.External.Target
		if status != nil && status.External != nil {
			current = &status.External.Current
		}
	default:
		return "<unknown type>"
	}
	if current == nil {
		current = &autoscalingv2.MetricValueStatus{}
	}
	cur, want := "<unknown>", "<auto>"
	switch {
	case target.AverageValue != nil:
		if current.AverageValue != nil {
			cur = current.AverageValue.String()
		}
		return fmt.Sprintf("%s%s/%s%s", prefix, cur, target.AverageValue.String(), suffix)
	case target.Value != nil:
		if current.Value != nil {
			cur = current.Value.String()
		}
		return fmt.Sprintf("%s%s/%s", prefix, cur, target.Value.String())
	default:
		if current.AverageUtilization != nil {
			cur = fmt.Sprintf("%d%%", *current.AverageUtilization)
		}
		if target.AverageUtilization != nil {
			want = fmt.Sprintf("%d%%", *target.AverageUtilization)
		}
		return fmt.Sprintf("%s%s/%s", prefix, cur, want)
	}
}
