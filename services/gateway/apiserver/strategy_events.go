package apiserver

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/services/gateway/registry"
)

// eventsStrategy serves events.k8s.io/v1 Events from the core Events' storage, as upstream: one
// store, two APIs. Everything but the stored form is the built-in strategy of eventsv1.Event (its
// create rules, field manager, printer); EncodeStored and DecodeStored convert with the spec's
// field mapping, and the fields storage indexes are the core Event's, whichever API wrote the
// object. It is also the model of a second served version of a kind: a strategy that converts
// to the stored form and delegates the rest.
type eventsStrategy struct {
	*builtinStrategy
	core *registry.Resource
}

// newEventsStrategy returns the strategy of res when it is the events.k8s.io Event resource
// stored as core Events, nil otherwise.
func newEventsStrategy(reg *registry.Registry, b *builtinStrategy) registry.Strategy {
	res := b.res
	if res.StoredAs == nil || res.Kind != "Event" {
		return nil
	}
	core, ok := reg.Resource(schema.GroupVersionResource{Version: "v1", Resource: res.StoredAs.Resource})
	if !ok || res.StoredAs.Group != "" {
		return nil
	}
	return &eventsStrategy{builtinStrategy: b, core: core}
}

func (s *eventsStrategy) EncodeStored(obj runtime.Object) ([]byte, error) {
	ev, ok := obj.(*eventsv1.Event)
	if !ok {
		return nil, fmt.Errorf("encoding an events.k8s.io Event: got %T", obj)
	}
	core := eventToCore(ev)
	return s.shared.codec.encodeStored(core, s.core.GroupVersionKind())
}

func (s *eventsStrategy) DecodeStored(value []byte) (runtime.Object, error) {
	core := &corev1.Event{}
	if err := s.shared.codec.decodeProtobuf(value, core); err != nil {
		return nil, fmt.Errorf("decoding a stored Event: %w", err)
	}
	ev := eventFromCore(core)
	ev.GetObjectKind().SetGroupVersionKind(s.res.GroupVersionKind())
	return ev, nil
}

// Fields are the core Event's selectable fields, so storage indexes every event alike.
func (s *eventsStrategy) Fields(obj runtime.Object) map[string]string {
	ev, ok := obj.(*eventsv1.Event)
	if !ok {
		return s.builtinStrategy.Fields(obj)
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
