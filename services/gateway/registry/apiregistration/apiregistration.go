// Package apiregistration holds the rules of APIServices (the aggregation layer), a built-in kind
// whose Go types are ours (aggregator/apiregistration; k8s.io/kube-aggregator is not in the
// module graph): the built-in strategy with upstream's validation, defaults and columns, stored
// as JSON (the types have no Protobuf encoding).
package apiregistration

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/libs/naming"
	"platform.io/services/gateway/aggregator/apiregistration"
	"platform.io/services/gateway/printers"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
)

// GroupVersion is apiregistration's served group version.
var GroupVersion = schema.GroupVersion{Group: naming.Group(apiregistration.SchemeGroupVersion.Group), Version: "v1"}

// Strategy is the strategy of APIServices.
type Strategy struct {
	*builtin.Strategy
}

// New returns the strategy of APIServices over their default one.
func New(b *builtin.Strategy) registry.Strategy { return &Strategy{Strategy: b} }

func (s *Strategy) Protobuf() bool { return false }

func (s *Strategy) EncodeStored(obj runtime.Object) ([]byte, error) {
	obj.GetObjectKind().SetGroupVersionKind(s.Res.GroupVersionKind())
	return json.Marshal(obj)
}

func (s *Strategy) DecodeStored(value []byte) (runtime.Object, error) {
	obj := &apiregistration.APIService{}
	if err := json.Unmarshal(value, obj); err != nil {
		return nil, fmt.Errorf("decoding a stored APIService: %w", err)
	}
	obj.SetGroupVersionKind(s.Res.GroupVersionKind())
	return obj, nil
}

func (s *Strategy) Default(obj runtime.Object) {
	if a, ok := obj.(*apiregistration.APIService); ok {
		apiregistration.Default(a)
	}
}

func (s *Strategy) Validate(obj, _ runtime.Object) field.ErrorList {
	a, ok := obj.(*apiregistration.APIService)
	if !ok {
		return nil
	}
	return append(apiregistration.Validate(a), apiregistration.ValidateStatus(a)...)
}

func (s *Strategy) ValidateName(name string) []string {
	return apiregistration.ValidateName(name)
}

// Printer has upstream's columns: Name, Service ("Local" for local ones), Available (the
// condition's status, with its reason when not True) and Age.
func (s *Strategy) Printer(runtime.Object) (*printers.Printer, error) {
	return apiServicePrinter, nil
}

var apiServicePrinter = &printers.Printer{
	Columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: "Name must be unique within a namespace."},
		{Name: "Service", Type: "string", Description: "The reference to the service that hosts this API endpoint."},
		{Name: "Available", Type: "string", Description: "Whether this service is available."},
		{Name: "Age", Type: "string", Description: "CreationTimestamp is a timestamp representing the server time when this object was created."},
	},
	Cells: func(obj runtime.Object, now time.Time) ([]any, error) {
		a, ok := obj.(*apiregistration.APIService)
		if !ok {
			return nil, fmt.Errorf("printing %T as an APIService", obj)
		}
		service := "Local"
		if s := a.Spec.Service; s != nil {
			service = s.Namespace + "/" + s.Name
		}
		available := "Unknown"
		if c := a.Status.Condition(apiregistration.Available); c != nil {
			available = string(c.Status)
			if c.Status != apiregistration.ConditionTrue && c.Reason != "" {
				available += " (" + c.Reason + ")"
			}
		}
		age := "<unknown>"
		if t := a.CreationTimestamp; !t.IsZero() {
			age = duration.HumanDuration(now.Sub(t.Time))
		}
		return []any{a.Name, service, available, age}, nil
	},
}
