// Package printers renders API objects as the rows of a metav1.Table, the server-side printing
// kubectl asks for with "Accept: application/json;as=Table". Each kind with its own printer has
// the columns kubectl users know from upstream; every other kind gets Default's Name and Created At.
//
// Printers are looked up by Go type, never by group or kind, because the gateway serves the
// k8s.io/api types under Platform's group names.
package printers

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Printer renders objects of one Go type as Table rows.
type Printer struct {
	// Columns are the column definitions; the first is always Name (type "string", format "name").
	// Columns that kubectl shows only with -o wide have Priority 1.
	Columns []metav1.TableColumnDefinition
	// Cells returns one cell per column for obj, in column order. now is the time "Age" is measured against.
	Cells func(obj runtime.Object, now time.Time) ([]any, error)
}

// registry maps the pointer type of every kind with its own columns to its printer. It is filled
// by the init functions of this package and read-only afterwards.
var registry = map[reflect.Type]*Printer{}

// For returns the printer for obj's Go type (e.g. *corev1.Pod); for types it does not know it
// returns Default(). The printer is shared: callers must not modify it.
func For(obj runtime.Object) *Printer {
	if p, ok := registry[reflect.TypeOf(obj)]; ok {
		return p
	}
	return defaultPrinter
}

// Default is the printer for kinds without their own: two columns, "Name" (type string, format name)
// and "Created At" (type "date", the creationTimestamp formatted RFC3339, e.g. "2026-11-21T04:43:44Z").
// It works for any object implementing metav1.Object, including *unstructured.Unstructured.
// The printer is shared: callers must not modify it.
func Default() *Printer {
	return defaultPrinter
}

var defaultPrinter = &Printer{
	Columns: []metav1.TableColumnDefinition{nameColumn, createdAtColumn},
	Cells: func(obj runtime.Object, _ time.Time) ([]any, error) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, fmt.Errorf("printers: cannot print %T: %w", obj, err)
		}
		return []any{m.GetName(), createdAt(m.GetCreationTimestamp())}, nil
	},
}

// register adds the printer of the kind whose objects have Go type T (a pointer type such as
// *corev1.Pod). cells returns the whole row, name first, and must not fail on a zero object.
func register[T runtime.Object](cells func(obj T, now time.Time) []any, columns ...metav1.TableColumnDefinition) {
	t := reflect.TypeFor[T]()
	if _, dup := registry[t]; dup || t.Kind() != reflect.Pointer {
		panic("printers: cannot register a printer for " + t.String())
	}
	registry[t] = &Printer{
		Columns: columns,
		Cells: func(obj runtime.Object, now time.Time) ([]any, error) {
			o, ok := obj.(T)
			if !ok || reflect.ValueOf(o).IsNil() {
				return nil, fmt.Errorf("printers: the printer for %s cannot print %T", t, obj)
			}
			return cells(o, now), nil
		},
	}
}

// Column constructors. Cells of integer columns are int64 and of boolean columns bool, the only
// kinds of numbers and truth values a Table's cells may hold (its deep copy accepts no others).

// text is a column of strings.
func text(name, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "string", Description: description}
}

// integer is a column of int64 cells.
func integer(name, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "integer", Description: description}
}

// boolean is a column of bool cells.
func boolean(name, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "boolean", Description: description}
}

// wide marks a column kubectl shows only with -o wide.
func wide(c metav1.TableColumnDefinition) metav1.TableColumnDefinition {
	c.Priority = 1
	return c
}

// Columns most kinds share.
var (
	nameColumn = metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name",
		Description: "Name of the object, unique within its namespace."}
	ageColumn        = text("Age", "Time since the object was created.")
	createdAtColumn  = metav1.TableColumnDefinition{Name: "Created At", Type: "date", Description: "When the object was created."}
	containersColumn = wide(text("Containers", "Names of the containers in the pod template."))
	imagesColumn     = wide(text("Images", "Images of the containers in the pod template."))
	selectorColumn   = wide(text("Selector", "Label selector of the pods."))
)

// Cell helpers.

// age is the human-readable time from t to now ("5m", "3h2m", "12d"), "<unknown>" when t is unset.
func age(t metav1.Time, now time.Time) string {
	return since(t.Time, now)
}

// since is age for a plain time.
func since(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// createdAt formats a creation timestamp for a "date" column, as upstream's default table does.
func createdAt(t metav1.Time) string {
	return t.UTC().Format(time.RFC3339)
}

// orNone returns s, or "<none>" when s is empty.
func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// deref returns *p, or def (the API's documented default) when p is nil. The gateway stores
// objects without applying upstream's defaults, so optional fields are often unset.
func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// joinMax joins at most limit items with sep and counts the rest as " + N more...", as kubectl
// does for long lists of addresses and hosts.
func joinMax(items []string, limit int, sep string) string {
	if len(items) <= limit {
		return strings.Join(items, sep)
	}
	return fmt.Sprintf("%s + %d more...", strings.Join(items[:limit], sep), len(items)-limit)
}

// controllerName names an object's managing controller as "kind.group/name" ("<none>" when none).
func controllerName(m metav1.Object) string {
	ref := metav1.GetControllerOfNoCopy(m)
	if ref == nil {
		return "<none>"
	}
	kind := ref.Kind
	if group, _, found := strings.Cut(ref.APIVersion, "/"); found && group != "" {
		kind += "." + group
	}
	return strings.ToLower(kind) + "/" + ref.Name
}
