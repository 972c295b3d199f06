package pods

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	machineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// podSecurity is PodSecurity: the Pod Security Standards (privileged, baseline, restricted, at
// a version) applied per namespace from its labels (enforce, audit, warn, each with a version;
// unset modes take the configuration's defaults). Pods (and ephemeral containers) that violate
// the enforce level are rejected; violations of the audit level become audit annotations, of
// the warn level warnings. Workload objects with pod templates are checked for audit and warn
// only, so authors learn early without the controller's pods being the first to fail. Label
// changes are validated, and a stricter enforce level is dry-run against the namespace's
// existing pods with warnings. The checks themselves are upstream's
// (k8s.io/pod-security-admission/policy); the wiring is upstream's plugin's, re-done here.
type podSecurity struct {
	deps      admission.Deps
	evaluator policy.Evaluator
	defaults  psaapi.Policy
	// exempt* are the configuration's exemptions: requests from these users, in these
	// namespaces, or pods of these runtime classes are not evaluated.
	exemptUsers, exemptNamespaces, exemptRuntimeClasses []string
	// maxPods and timeout bound the dry-run of a new enforce level over existing pods.
	maxPods int
	timeout time.Duration
}

// PodSecurityConfiguration is the plugin's configuration: kind PodSecurityConfiguration in
// pod-security.admission.config.<suffix> v1 (v1beta1 and v1alpha1 are read the same; upstream's
// pod-security.admission.config.k8s.io is read as the same group).
type PodSecurityConfiguration struct {
	// APIVersion and Kind, when given, must name the configuration kind.
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	// Defaults are the levels and versions of namespaces that do not label a mode; each left
	// out is privileged or latest.
	Defaults struct {
		// Enforce, Audit and Warn are levels: privileged, baseline or restricted; the
		// *Version fields are "latest" or "v1.x".
		Enforce        string `json:"enforce,omitempty"`
		EnforceVersion string `json:"enforce-version,omitempty"`
		Audit          string `json:"audit,omitempty"`
		AuditVersion   string `json:"audit-version,omitempty"`
		Warn           string `json:"warn,omitempty"`
		WarnVersion    string `json:"warn-version,omitempty"`
	} `json:"defaults"`
	// Exemptions are never evaluated.
	Exemptions struct {
		// Usernames, Namespaces and RuntimeClasses are exempt requesters, namespaces and
		// pods' runtime classes.
		Usernames      []string `json:"usernames,omitempty"`
		Namespaces     []string `json:"namespaces,omitempty"`
		RuntimeClasses []string `json:"runtimeClasses,omitempty"`
	} `json:"exemptions"`
}

var podSecurityConfigGroup = naming.Group("pod-security.admission.config.k8s.io")

// The namespace labels choosing each mode's level and version.
var (
	enforceLevelLabel   = naming.PodSecurityLabelPrefix + "enforce"
	enforceVersionLabel = naming.PodSecurityLabelPrefix + "enforce-version"
	auditLevelLabel     = naming.PodSecurityLabelPrefix + "audit"
	auditVersionLabel   = naming.PodSecurityLabelPrefix + "audit-version"
	warnLevelLabel      = naming.PodSecurityLabelPrefix + "warn"
	warnVersionLabel    = naming.PodSecurityLabelPrefix + "warn-version"
)

// Limits of the dry-run of a new enforce level over a namespace's pods, upstream's.
const (
	namespaceMaxPodsToCheck  = 3000
	namespacePodCheckTimeout = time.Second
)

// PodLister is what PodSecurity needs to dry-run a new enforce level over a namespace's
// existing pods: an admission.Objects that also lists pods implements it. Without it that
// check is skipped (label changes are still validated and applied to new pods).
type PodLister interface {
	Pods() admission.Lister[*corev1.Pod]
}

func newPodSecurity(deps admission.Deps, config []byte) (admission.Plugin, error) {
	var c PodSecurityConfiguration
	if len(config) > 0 {
		if err := decodeConfig(admission.PodSecurity, config, &c); err != nil {
			return nil, err
		}
		if c.APIVersion != "" || c.Kind != "" {
			gv := c.APIVersion
			if i := strings.LastIndex(gv, "/"); i >= 0 {
				gv = naming.Group(gv[:i]) + gv[i:]
			}
			switch {
			case c.Kind != "PodSecurityConfiguration",
				gv != podSecurityConfigGroup+"/v1" && gv != podSecurityConfigGroup+"/v1beta1" && gv != podSecurityConfigGroup+"/v1alpha1":
				return nil, fmt.Errorf("%s: the configuration must be kind PodSecurityConfiguration in %s/v1 (or v1beta1, v1alpha1), not %q in %q", admission.PodSecurity, podSecurityConfigGroup, c.Kind, c.APIVersion)
			}
		}
	}
	d := &c.Defaults
	for _, f := range []*string{&d.Enforce, &d.Audit, &d.Warn} {
		if *f == "" {
			*f = string(psaapi.LevelPrivileged)
		}
	}
	for _, f := range []*string{&d.EnforceVersion, &d.AuditVersion, &d.WarnVersion} {
		if *f == "" {
			*f = psaapi.VersionLatest
		}
	}
	defaults, errs := validatePodSecurityConfiguration(&c)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", admission.PodSecurity, errs.ToAggregate())
	}
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", admission.PodSecurity, err)
	}
	return &podSecurity{
		deps:                 deps,
		evaluator:            evaluator,
		defaults:             defaults,
		exemptUsers:          c.Exemptions.Usernames,
		exemptNamespaces:     c.Exemptions.Namespaces,
		exemptRuntimeClasses: c.Exemptions.RuntimeClasses,
		maxPods:              namespaceMaxPodsToCheck,
		timeout:              namespacePodCheckTimeout,
	}, nil
}

// validatePodSecurityConfiguration checks the configuration as upstream does and returns its
// default policy.
func validatePodSecurityConfiguration(c *PodSecurityConfiguration) (psaapi.Policy, field.ErrorList) {
	var errs field.ErrorList
	var p psaapi.Policy
	defaults := field.NewPath("defaults")
	level := func(name, v string, into *psaapi.Level) {
		l, err := psaapi.ParseLevel(v)
		if err != nil {
			errs = append(errs, field.Invalid(defaults.Child(name), v, err.Error()))
		}
		*into = l
	}
	version := func(name, v string, into *psaapi.Version) {
		ver, err := psaapi.ParseVersion(v)
		if err != nil {
			errs = append(errs, field.Invalid(defaults.Child(name), v, err.Error()))
		}
		*into = ver
	}
	level("enforce", c.Defaults.Enforce, &p.Enforce.Level)
	version("enforce-version", c.Defaults.EnforceVersion, &p.Enforce.Version)
	level("warn", c.Defaults.Warn, &p.Warn.Level)
	version("warn-version", c.Defaults.WarnVersion, &p.Warn.Version)
	level("audit", c.Defaults.Audit, &p.Audit.Level)
	version("audit-version", c.Defaults.AuditVersion, &p.Audit.Version)

	exemptions := field.NewPath("exemptions")
	unique := func(name string, values []string, check func(string) []string) {
		seen := map[string]bool{}
		for i, v := range values {
			path := exemptions.Child(name).Index(i)
			if msgs := check(v); len(msgs) > 0 {
				errs = append(errs, field.Invalid(path, v, strings.Join(msgs, ", ")))
				continue
			}
			if seen[v] {
				errs = append(errs, field.Duplicate(path, v))
				continue
			}
			seen[v] = true
		}
	}
	unique("namespaces", c.Exemptions.Namespaces, func(v string) []string { return machineryvalidation.ValidateNamespaceName(v, false) })
	unique("runtimeClasses", c.Exemptions.RuntimeClasses, func(v string) []string { return machineryvalidation.NameIsDNSSubdomain(v, false) })
	unique("usernames", c.Exemptions.Usernames, func(v string) []string {
		if v == "" {
			return []string{"username must not be empty"}
		}
		return nil
	})
	return p, errs
}

func (*podSecurity) Name() string { return admission.PodSecurity }

// podControllerResources are the kinds whose objects carry a pod template (group, resource).
var podControllerResources = []struct{ group, resource string }{
	{coreGroup, "podtemplates"}, {coreGroup, "replicationcontrollers"},
	{"apps", "replicasets"}, {"apps", "deployments"}, {"apps", "statefulsets"}, {"apps", "daemonsets"},
	{"batch", "jobs"}, {"batch", "cronjobs"},
}

// Interests: creates and updates of pods and their ephemeral containers (other pod
// subresources cannot change what the checks look at), of namespaces (labels), and of the
// workload kinds with pod templates.
func (*podSecurity) Interests() []admission.Interest {
	ops := []admission.Operation{admission.Create, admission.Update}
	out := []admission.Interest{
		{Operations: ops, APIGroups: []string{coreGroup}, Resources: []string{podsRes, podsRes + "/" + ephemeralContainers}, Scope: "Namespaced"},
		{Operations: ops, APIGroups: []string{coreGroup}, Resources: []string{"namespaces"}, Scope: "Cluster"},
	}
	byGroup := map[string][]string{}
	var groups []string
	for _, r := range podControllerResources {
		if _, ok := byGroup[r.group]; !ok {
			groups = append(groups, r.group)
		}
		byGroup[r.group] = append(byGroup[r.group], r.resource)
	}
	for _, g := range groups {
		out = append(out, admission.Interest{Operations: ops, APIGroups: []string{g}, Resources: byGroup[g], Scope: "Namespaced"})
	}
	return out
}

func (p *podSecurity) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Operation != admission.Create && a.Operation != admission.Update {
		return nil
	}
	switch {
	case a.Resource.Group == coreGroup && a.Resource.Resource == "namespaces":
		return p.validateNamespace(ctx, a)
	case a.Resource.Group == coreGroup && a.Resource.Resource == podsRes:
		return p.validatePod(ctx, a)
	}
	for _, r := range podControllerResources {
		if a.Resource.Group == r.group && a.Resource.Resource == r.resource {
			return p.validatePodController(ctx, a)
		}
	}
	return nil
}

// ignoredPodSubresources are the pod subresources whose writes cannot change what the checks
// look at; any other pod subresource is evaluated (failing safe for new ones).
var ignoredPodSubresources = map[string]bool{
	"exec": true, "attach": true, "binding": true, "eviction": true, "log": true,
	"portforward": true, "proxy": true, "status": true,
}

func (p *podSecurity) annotate(a *admission.Attributes, key, value string) {
	a.AddAnnotation(naming.PodSecurityLabelPrefix+key, value)
}

func (p *podSecurity) validatePod(ctx context.Context, a *admission.Attributes) error {
	if ignoredPodSubresources[a.Subresource] {
		return nil
	}
	if p.exemptNamespace(a.Namespace) {
		p.annotate(a, psaapi.ExemptionReasonAnnotationKey, "namespace")
		return nil
	}
	if p.exemptUser(a) {
		p.annotate(a, psaapi.ExemptionReasonAnnotationKey, "user")
		return nil
	}
	ns, err := getNamespace(ctx, p.deps, a.Namespace)
	if err != nil {
		status := apierrors.NewInternalError(fmt.Errorf("failed to lookup namespace %q", a.Namespace))
		p.annotate(a, "error", fmt.Sprintf("%s: %v", status.ErrStatus.Message, err))
		return status
	}
	nsPolicy, nsErrs := p.policyToEvaluate(ns.Labels)
	if len(nsErrs) == 0 && nsPolicy.FullyPrivileged() {
		p.annotate(a, psaapi.EnforcedPolicyAnnotationKey, psaapi.LevelVersion{Level: psaapi.LevelPrivileged, Version: psaapi.LatestVersion()}.String())
		return nil
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok || pod == nil {
		status := apierrors.NewBadRequest("failed to decode pod")
		p.annotate(a, "error", status.ErrStatus.Message)
		return status
	}
	if a.Operation == admission.Update {
		old, ok := a.OldObject.(*corev1.Pod)
		if !ok || old == nil {
			status := apierrors.NewBadRequest("failed to decode old pod")
			p.annotate(a, "error", status.ErrStatus.Message)
			return status
		}
		if !isSignificantPodUpdate(pod, old) {
			return nil
		}
	}
	return p.evaluate(a, nsPolicy, nsErrs.ToAggregate(), &pod.ObjectMeta, &pod.Spec, true)
}

func (p *podSecurity) validatePodController(ctx context.Context, a *admission.Attributes) error {
	if a.Subresource != "" {
		return nil
	}
	if p.exemptNamespace(a.Namespace) {
		p.annotate(a, psaapi.ExemptionReasonAnnotationKey, "namespace")
		return nil
	}
	if p.exemptUser(a) {
		p.annotate(a, psaapi.ExemptionReasonAnnotationKey, "user")
		return nil
	}
	ns, err := getNamespace(ctx, p.deps, a.Namespace)
	if err != nil {
		// Workloads are never rejected by PodSecurity: record and let it through.
		p.annotate(a, "error", fmt.Sprintf("failed to lookup namespace %q: %v", a.Namespace, err))
		return nil
	}
	nsPolicy, nsErrs := p.policyToEvaluate(ns.Labels)
	if len(nsErrs) == 0 && nsPolicy.Warn.Level == psaapi.LevelPrivileged && nsPolicy.Audit.Level == psaapi.LevelPrivileged {
		return nil
	}
	meta, spec, err := podTemplateOf(a.Object)
	if err != nil {
		p.annotate(a, "error", fmt.Sprintf("failed to extract pod template: %v", err))
		return nil
	}
	if meta == nil && spec == nil {
		return nil
	}
	return p.evaluate(a, nsPolicy, nsErrs.ToAggregate(), meta, spec, false)
}

// podTemplateOf returns the pod template of a workload object (nil for a replication
// controller without one).
func podTemplateOf(obj any) (*metav1.ObjectMeta, *corev1.PodSpec, error) {
	if obj == nil || (reflect.ValueOf(obj).Kind() == reflect.Pointer && reflect.ValueOf(obj).IsNil()) {
		return nil, nil, errors.New("no object")
	}
	var t *corev1.PodTemplateSpec
	switch o := obj.(type) {
	case *corev1.PodTemplate:
		t = &o.Template
	case *corev1.ReplicationController:
		t = o.Spec.Template
	case *appsv1.ReplicaSet:
		t = &o.Spec.Template
	case *appsv1.Deployment:
		t = &o.Spec.Template
	case *appsv1.DaemonSet:
		t = &o.Spec.Template
	case *appsv1.StatefulSet:
		t = &o.Spec.Template
	case *batchv1.Job:
		t = &o.Spec.Template
	case *batchv1.CronJob:
		t = &o.Spec.JobTemplate.Spec.Template
	default:
		return nil, nil, fmt.Errorf("unexpected object type: %T", obj)
	}
	if t == nil {
		return nil, nil, nil
	}
	return &t.ObjectMeta, &t.Spec, nil
}

// evaluate applies nsPolicy to a pod (or pod template): enforce (for pods) rejects, audit
// annotates, warn warns; a result shared between modes of the same level and version is
// computed once.
func (p *podSecurity) evaluate(a *admission.Attributes, nsPolicy psaapi.Policy, nsPolicyErr error, meta *metav1.ObjectMeta, spec *corev1.PodSpec, enforce bool) error {
	if p.exemptRuntimeClass(spec.RuntimeClassName) {
		p.annotate(a, psaapi.ExemptionReasonAnnotationKey, "runtimeClass")
		return nil
	}
	if nsPolicyErr != nil {
		p.annotate(a, "error", fmt.Sprintf("Failed to parse policy: %v", nsPolicyErr))
	}
	results := map[psaapi.LevelVersion]policy.AggregateCheckResult{}
	result := func(lv psaapi.LevelVersion) policy.AggregateCheckResult {
		r, ok := results[lv]
		if !ok {
			r = policy.AggregateCheckResults(p.evaluator.EvaluatePod(lv, meta, spec))
			results[lv] = r
		}
		return r
	}
	var rejection error
	if enforce {
		p.annotate(a, psaapi.EnforcedPolicyAnnotationKey, nsPolicy.Enforce.String())
		if r := result(nsPolicy.Enforce); !r.Allowed {
			rejection = forbidden(a, fmt.Errorf("violates PodSecurity %q: %s", nsPolicy.Enforce.String(), r.ForbiddenDetail()))
		}
	}
	if r := result(nsPolicy.Audit); !r.Allowed {
		p.annotate(a, psaapi.AuditViolationsAnnotationKey, fmt.Sprintf("would violate PodSecurity %q: %s", nsPolicy.Audit.String(), r.ForbiddenDetail()))
	}
	// A request about to be rejected gets no warnings on top.
	if rejection == nil {
		if r := result(nsPolicy.Warn); !r.Allowed {
			a.AddWarning(fmt.Sprintf("would violate PodSecurity %q: %s", nsPolicy.Warn.String(), r.ForbiddenDetail()))
		}
	}
	return rejection
}

func (p *podSecurity) validateNamespace(ctx context.Context, a *admission.Attributes) error {
	if a.Subresource != "" {
		return nil
	}
	ns, ok := a.Object.(*corev1.Namespace)
	if !ok || ns == nil {
		return apierrors.NewBadRequest("failed to decode namespace")
	}
	name := ns.Name
	if name == "" {
		name = a.Name
	}
	newPolicy, newErrs := p.policyToEvaluate(ns.Labels)
	switch a.Operation {
	case admission.Create:
		if len(newErrs) > 0 {
			return apierrors.NewInvalid(a.Kind.GroupKind(), name, newErrs)
		}
		if p.exemptNamespace(name) {
			if w := p.exemptNamespaceWarning(name, newPolicy, ns.Labels); w != "" {
				a.AddWarning(w)
			}
		}
		return nil
	case admission.Update:
		old, ok := a.OldObject.(*corev1.Namespace)
		if !ok || old == nil {
			return apierrors.NewBadRequest("failed to decode old namespace")
		}
		oldPolicy, oldErrs := p.policyToEvaluate(old.Labels)
		// Invalid labels are refused when they change (a namespace stored with bad labels can
		// still be updated otherwise).
		if len(newErrs) > 0 && (len(oldErrs) == 0 || !reflect.DeepEqual(newErrs, oldErrs)) {
			return apierrors.NewInvalid(a.Kind.GroupKind(), name, newErrs)
		}
		// Existing pods are dry-run only when the enforce level became stricter or changed
		// version, and the namespace is not exempt.
		switch {
		case newPolicy.Enforce == oldPolicy.Enforce,
			newPolicy.Enforce.Level == psaapi.LevelPrivileged,
			newPolicy.Enforce.Version == oldPolicy.Enforce.Version && psaapi.CompareLevels(newPolicy.Enforce.Level, oldPolicy.Enforce.Level) < 1:
			return nil
		}
		if p.exemptNamespace(name) {
			if w := p.exemptNamespaceWarning(name, newPolicy, ns.Labels); w != "" {
				a.AddWarning(w)
			}
			return nil
		}
		for _, w := range p.evaluatePodsInNamespace(ctx, name, newPolicy.Enforce) {
			a.AddWarning(w)
		}
	}
	return nil
}

// evaluatePodsInNamespace dry-runs an enforce level over the namespace's pods (one per
// controller first, within the pod and time limits) and returns upstream's warnings: which
// pods would violate it, grouped by violation.
func (p *podSecurity) evaluatePodsInNamespace(ctx context.Context, namespace string, enforce psaapi.LevelVersion) []string {
	lister, ok := p.deps.Objects.(PodLister)
	if !ok {
		return nil
	}
	timeout := p.timeout
	if deadline, ok := ctx.Deadline(); ok {
		if half := time.Until(deadline) / 2; half < timeout {
			timeout = half
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	pods := p.prioritizePods(lister.Pods().List(namespace))
	total := len(pods)
	if len(pods) > p.maxPods {
		pods = pods[:p.maxPods]
	}
	type count struct {
		name string
		n    int
	}
	counts := map[string]count{}
	var order []string
	checked := len(pods)
	for i, pod := range pods {
		r := policy.AggregateCheckResults(p.evaluator.EvaluatePod(enforce, &pod.ObjectMeta, &pod.Spec))
		if !r.Allowed {
			w := r.ForbiddenReason()
			c, seen := counts[w]
			if !seen {
				c.name = pod.Name
				order = append(order, w)
			} else if pod.Name < c.name {
				c.name = pod.Name
			}
			c.n++
			counts[w] = c
		}
		if ctx.Err() != nil {
			checked = i + 1
			break
		}
	}
	var warnings []string
	if checked < total {
		warnings = append(warnings, fmt.Sprintf("new PodSecurity enforce level only checked against the first %d of %d existing pods", checked, total))
	}
	if len(order) > 0 {
		warnings = append(warnings, fmt.Sprintf("existing pods in namespace %q violate the new PodSecurity enforce level %q", namespace, enforce.String()))
	}
	podWarnings := make([]string, 0, len(order))
	for _, w := range order {
		c := counts[w]
		switch c.n {
		case 1:
			podWarnings = append(podWarnings, fmt.Sprintf("%s: %s", c.name, w))
		case 2:
			podWarnings = append(podWarnings, fmt.Sprintf("%s (and 1 other pod): %s", c.name, w))
		default:
			podWarnings = append(podWarnings, fmt.Sprintf("%s (and %d other pods): %s", c.name, c.n-1, w))
		}
	}
	sort.Strings(podWarnings)
	return append(warnings, podWarnings...)
}

// prioritizePods orders pods for the dry-run: pods of exempt runtime classes dropped, then pods
// without a controller and the first pod of each controller, then the other pods of
// controllers already represented.
func (p *podSecurity) prioritizePods(pods []*corev1.Pod) []*corev1.Pod {
	// Sorted by name first: the lister's order is not stable.
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	out := make([]*corev1.Pod, 0, len(pods))
	var replicas []*corev1.Pod
	seen := map[types.UID]bool{}
	for _, pod := range pods {
		if p.exemptRuntimeClass(pod.Spec.RuntimeClassName) {
			continue
		}
		ref := metav1.GetControllerOfNoCopy(pod)
		if ref == nil {
			out = append(out, pod)
			continue
		}
		if seen[ref.UID] {
			replicas = append(replicas, pod)
			continue
		}
		seen[ref.UID] = true
		out = append(out, pod)
	}
	return append(out, replicas...)
}

// policyToEvaluate reads a namespace's policy from its labels over the configured defaults.
// A label that does not parse is an error, and its mode falls back to restricted (enforce,
// failing closed) or privileged (audit and warn, failing open). Warn follows an explicitly set,
// stricter enforce level when it is not labelled itself.
func (p *podSecurity) policyToEvaluate(labels map[string]string) (psaapi.Policy, field.ErrorList) {
	pol := p.defaults
	if len(labels) == 0 {
		return pol, nil
	}
	var errs field.ErrorList
	labelsPath := field.NewPath("metadata", "labels")
	bad := func(label, value string, err error) {
		if err != nil {
			errs = append(errs, field.Invalid(labelsPath.Key(label), value, err.Error()))
		}
	}
	var hasEnforceLevel, hasWarnLevel, hasWarnVersion bool
	var err error
	if v, ok := labels[enforceLevelLabel]; ok {
		pol.Enforce.Level, err = psaapi.ParseLevel(v)
		hasEnforceLevel = err == nil
		bad(enforceLevelLabel, v, err)
	}
	if v, ok := labels[enforceVersionLabel]; ok {
		pol.Enforce.Version, err = psaapi.ParseVersion(v)
		bad(enforceVersionLabel, v, err)
	}
	if v, ok := labels[auditLevelLabel]; ok {
		pol.Audit.Level, err = psaapi.ParseLevel(v)
		bad(auditLevelLabel, v, err)
		if err != nil {
			pol.Audit.Level = psaapi.LevelPrivileged
		}
	}
	if v, ok := labels[auditVersionLabel]; ok {
		pol.Audit.Version, err = psaapi.ParseVersion(v)
		bad(auditVersionLabel, v, err)
	}
	if v, ok := labels[warnLevelLabel]; ok {
		hasWarnLevel = true
		pol.Warn.Level, err = psaapi.ParseLevel(v)
		bad(warnLevelLabel, v, err)
		if err != nil {
			pol.Warn.Level = psaapi.LevelPrivileged
		}
	}
	if v, ok := labels[warnVersionLabel]; ok {
		hasWarnVersion = true
		pol.Warn.Version, err = psaapi.ParseVersion(v)
		bad(warnVersionLabel, v, err)
	}
	if !hasWarnLevel && hasEnforceLevel && psaapi.CompareLevels(pol.Enforce.Level, pol.Warn.Level) > 0 {
		pol.Warn.Level = pol.Enforce.Level
		if !hasWarnVersion {
			pol.Warn.Version = pol.Enforce.Version
		}
	}
	return pol, errs
}

// exemptNamespaceWarning is upstream's warning for labels set on an exempt namespace that would
// otherwise apply a policy.
func (p *podSecurity) exemptNamespaceWarning(namespace string, pol psaapi.Policy, labels map[string]string) string {
	if pol.FullyPrivileged() || pol.Equivalent(&p.defaults) {
		return ""
	}
	var parts []string
	for _, m := range []struct {
		mode                string
		lv                  psaapi.LevelVersion
		levelKey, versionKy string
	}{
		{"enforce", pol.Enforce, enforceLevelLabel, enforceVersionLabel},
		{"audit", pol.Audit, auditLevelLabel, auditVersionLabel},
		{"warn", pol.Warn, warnLevelLabel, warnVersionLabel},
	} {
		_, hasLevel := labels[m.levelKey]
		_, hasVersion := labels[m.versionKy]
		if m.lv.Level != psaapi.LevelPrivileged && (hasLevel || hasVersion) {
			parts = append(parts, m.mode+"="+m.lv.String())
		}
	}
	return fmt.Sprintf("namespace %q is exempt from Pod Security, and the policy (%s) will be ignored", namespace, strings.Join(parts, ", "))
}

func (p *podSecurity) exemptNamespace(ns string) bool {
	return ns != "" && contains(p.exemptNamespaces, ns)
}

func (p *podSecurity) exemptUser(a *admission.Attributes) bool {
	return a.User != nil && a.User.Name != "" && contains(p.exemptUsers, a.User.Name)
}

func (p *podSecurity) exemptRuntimeClass(rc *string) bool {
	return rc != nil && *rc != "" && contains(p.exemptRuntimeClasses, *rc)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// isSignificantPodUpdate tells whether an update can change the checks' outcome: the only pod
// fields an update may change that the checks read are images (and ephemeral containers added
// through their subresource).
func isSignificantPodUpdate(pod, old *corev1.Pod) bool {
	if len(pod.Spec.Containers) != len(old.Spec.Containers) || len(pod.Spec.InitContainers) != len(old.Spec.InitContainers) {
		return true
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Image != old.Spec.Containers[i].Image {
			return true
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Image != old.Spec.InitContainers[i].Image {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		var oldC *corev1.EphemeralContainer
		for i := range old.Spec.EphemeralContainers {
			if old.Spec.EphemeralContainers[i].Name == c.Name {
				oldC = &old.Spec.EphemeralContainers[i]
				break
			}
		}
		if oldC == nil || oldC.Image != c.Image {
			return true
		}
	}
	return false
}
