// Package events serves events.<domain>/v1 Events from the core Events' storage, as upstream: one
// store, two APIs, with the spec's rules for the new API's Events.
package events

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
)

// Strategy serves events.k8s.io/v1 Events from the core Events' storage, as upstream: one
// store, two APIs. Everything but the stored form is the built-in strategy of eventsv1.Event (its
// create rules, field manager, printer); EncodeStored and DecodeStored convert with the spec's
// field mapping, and the fields storage indexes are the core Event's, whichever API wrote the
// object. It is also the model of a second served version of a kind: a strategy that converts
// to the stored form and delegates the rest.
type Strategy struct {
	*builtin.Strategy
	core *registry.Resource
}

// New returns the strategy of the events API's Event resource b serves, stored as core Events
// (the resource core), or nil when b's resource is not stored so.
func New(reg *registry.Registry, b *builtin.Strategy) registry.Strategy {
	res := b.Res
	if res.StoredAs == nil || res.StoredAs.Group != "" {
		return nil
	}
	core, ok := reg.Resource(schema.GroupVersionResource{Version: "v1", Resource: res.StoredAs.Resource})
	if !ok {
		return nil
	}
	return &Strategy{Strategy: b, core: core}
}

func (s *Strategy) EncodeStored(obj runtime.Object) ([]byte, error) {
	ev, ok := obj.(*eventsv1.Event)
	if !ok {
		return nil, fmt.Errorf("encoding an events.k8s.io Event: got %T", obj)
	}
	core := eventToCore(ev)
	return s.Shared.EncodeProtobuf(core, s.core.GroupVersionKind())
}

func (s *Strategy) DecodeStored(value []byte) (runtime.Object, error) {
	core := &corev1.Event{}
	if err := builtin.DecodeProtobuf(value, core); err != nil {
		return nil, fmt.Errorf("decoding a stored Event: %w", err)
	}
	ev := eventFromCore(core)
	ev.GetObjectKind().SetGroupVersionKind(s.Res.GroupVersionKind())
	return ev, nil
}

// Fields are the core Event's selectable fields, so storage indexes every event alike.
func (s *Strategy) Fields(obj runtime.Object) map[string]string {
	ev, ok := obj.(*eventsv1.Event)
	if !ok {
		return s.Strategy.Fields(obj)
	}
	return s.core.Fields(eventToCore(ev))
}

// eventToCore is the spec's "Event resource" mapping from events.k8s.io/v1 to core v1:
// regarding is involvedObject, note is message, the deprecated* fields are the core fields they
// renamed (firstTimestamp, lastTimestamp, count, source), series and the reporting fields carry
// over.
func eventToCore(in *eventsv1.Event) *corev1.Event {
	out := &corev1.Event{
		ObjectMeta:          in.ObjectMeta,
		InvolvedObject:      in.Regarding,
		Related:             in.Related,
		Reason:              in.Reason,
		Message:             in.Note,
		Source:              in.DeprecatedSource,
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               in.DeprecatedCount,
		Type:                in.Type,
		EventTime:           in.EventTime,
		Action:              in.Action,
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
	}
	if in.Series != nil {
		out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	out.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Event"))
	return out
}

// eventFromCore is the reverse mapping, from core v1 to events.k8s.io/v1.
func eventFromCore(in *corev1.Event) *eventsv1.Event {
	out := &eventsv1.Event{
		ObjectMeta:               in.ObjectMeta,
		EventTime:                in.EventTime,
		ReportingController:      in.ReportingController,
		ReportingInstance:        in.ReportingInstance,
		Action:                   in.Action,
		Reason:                   in.Reason,
		Regarding:                in.InvolvedObject,
		Related:                  in.Related,
		Note:                     in.Message,
		Type:                     in.Type,
		DeprecatedSource:         in.Source,
		DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp:  in.LastTimestamp,
		DeprecatedCount:          in.Count,
	}
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return out
}

// Validate applies the spec's rules for the events API's Events (validateEvent).
func (s *Strategy) Validate(obj, old runtime.Object) field.ErrorList {
	if e, ok := obj.(*eventsv1.Event); ok {
		return validateEvent(e, old == nil)
	}
	return nil
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
