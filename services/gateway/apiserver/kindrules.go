package apiserver

import (
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/services/gateway/registry"
)

// validateKind checks the rules the spec states for particular kinds (422 Invalid, listing every
// violation): the kind's strategy knows them. old is nil on create.
func validateKind(res *registry.Resource, obj, old runtime.Object) error {
	errs := res.Strategy().Validate(obj, old)
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(res.GroupVersionKind().GroupKind(), mustMeta(obj).GetName(), errs)
}

// validateEvent applies the spec's rules for events.platform.io/v1 Events: type Normal or
// Warning; action, reason, reportingController and reportingInstance required on create; the
// renamed deprecated fields not allowed in new objects.
func validateEvent(e *eventsv1.Event, create bool) field.ErrorList {
	var errs field.ErrorList
	if e.Type != "Normal" && e.Type != "Warning" {
		errs = append(errs, field.NotSupported(field.NewPath("type"), e.Type, []string{"Normal", "Warning"}))
	}
	if !create {
		return errs
	}
	for name, v := range map[string]string{"action": e.Action, "reason": e.Reason, "reportingController": e.ReportingController, "reportingInstance": e.ReportingInstance} {
		if v == "" {
			errs = append(errs, field.Required(field.NewPath(name), ""))
		}
	}
	if e.EventTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
	}
	deprecated := map[string]bool{
		"deprecatedFirstTimestamp":   !e.DeprecatedFirstTimestamp.IsZero(),
		"deprecatedLastTimestamp":    !e.DeprecatedLastTimestamp.IsZero(),
		"deprecatedCount":            e.DeprecatedCount != 0,
		"deprecatedSource.component": e.DeprecatedSource.Component != "",
		"deprecatedSource.host":      e.DeprecatedSource.Host != "",
	}
	for name, set := range deprecated {
		if set {
			errs = append(errs, field.Forbidden(field.NewPath(name), "deprecated field is not allowed in new objects; use its replacement"))
		}
	}
	if s := e.Series; s != nil {
		if s.Count < 2 {
			errs = append(errs, field.Invalid(field.NewPath("series", "count"), s.Count, "should be at least 2"))
		}
		if s.LastObservedTime.IsZero() {
			errs = append(errs, field.Required(field.NewPath("series", "lastObservedTime"), ""))
		}
	}
	return errs
}
