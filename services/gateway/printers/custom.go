package printers

// Printing of custom resources, the objects of CustomResourceDefinitions, whose columns are the
// additionalPrinterColumns of their version. The cells follow upstream's apiextensions-apiserver
// (pkg/registry/customresource/tableconvertor), except that dates are measured against the now
// passed to Cells rather than the clock.

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/jsonpath"
)

// ForCustom returns the printer of a custom resource version with these additionalPrinterColumns.
// Without columns it is Default(). Otherwise the columns are Name followed by one column per
// definition, in order, with its name, type, format, priority and description (upstream's
// "Custom resource definition column (in JSONPath format): <jsonPath>" when it has none).
//
// Each cell is the first value the column's jsonPath finds in the object, nil when it finds none:
// an int64 for "integer" columns (numbers are truncated), a float64 for "number", a bool for
// "boolean", the value as text for "string" (lists and objects as JSON), and for "date" the age of
// an RFC 3339 timestamp, e.g. "5m" ("<invalid>" when it does not parse or lies in the future,
// "<unknown>" when empty). A value of the wrong kind, or a column of another type, gives nil.
//
// It returns an error when a jsonPath does not parse or is not a simple path (it uses range or end).
// The printer prints *unstructured.Unstructured objects and may be shared by concurrent callers.
func ForCustom(columns []apiextensionsv1.CustomResourceColumnDefinition) (*Printer, error) {
	if len(columns) == 0 {
		return Default(), nil
	}
	defs := make([]metav1.TableColumnDefinition, 1, 1+len(columns))
	defs[0] = nameColumn
	parsed := make([]customColumn, 0, len(columns))
	for _, c := range columns {
		path, err := parseColumnPath(c.Name, c.JSONPath)
		if err != nil {
			return nil, err
		}
		description := c.Description
		if description == "" {
			description = "Custom resource definition column (in JSONPath format): " + c.JSONPath
		}
		defs = append(defs, metav1.TableColumnDefinition{
			Name: c.Name, Type: c.Type, Format: c.Format, Description: description, Priority: c.Priority,
		})
		parsed = append(parsed, customColumn{typ: c.Type, path: path})
	}
	return &Printer{
		Columns: defs,
		Cells: func(obj runtime.Object, now time.Time) ([]any, error) {
			return customCells(parsed, obj, now)
		},
	}, nil
}

// customColumn is one additionalPrinterColumn: its type and its parsed jsonPath.
type customColumn struct {
	typ  string
	path *jsonpath.JSONPath
}

// parseColumnPath parses the jsonPath of the column named name as upstream does: as the template
// "{" + path + "}", missing keys giving no result rather than an error. Templates with range or
// end are refused: evaluating them changes the parsed template, which printers share.
func parseColumnPath(name, path string) (*jsonpath.JSONPath, error) {
	template := "{" + path + "}"
	p, err := jsonpath.Parse(name, template)
	if err != nil {
		return nil, fmt.Errorf("printers: column %q: unrecognized JSONPath %q: %w", name, path, err)
	}
	if usesRange(p.Root) {
		return nil, fmt.Errorf("printers: column %q: JSONPath %q is not a simple path", name, path)
	}
	j := jsonpath.New(name).AllowMissingKeys(true)
	if err := j.Parse(template); err != nil {
		return nil, fmt.Errorf("printers: column %q: unrecognized JSONPath %q: %w", name, path, err)
	}
	return j, nil
}

// usesRange reports whether the parsed template n contains the range or end keyword.
func usesRange(n jsonpath.Node) bool {
	switch n := n.(type) {
	case *jsonpath.ListNode:
		for _, c := range n.Nodes {
			if usesRange(c) {
				return true
			}
		}
	case *jsonpath.IdentifierNode:
		return n.Name == "range" || n.Name == "end"
	case *jsonpath.FilterNode:
		return usesRange(n.Left) || usesRange(n.Right)
	case *jsonpath.UnionNode:
		for _, c := range n.Nodes {
			if usesRange(c) {
				return true
			}
		}
	}
	return false
}

// customCells is the row of obj, which must be an unstructured object with metadata: its name,
// then one cell per column.
func customCells(columns []customColumn, obj runtime.Object, now time.Time) ([]any, error) {
	u, ok := obj.(runtime.Unstructured)
	if v := reflect.ValueOf(u); !ok || v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, fmt.Errorf("printers: the custom resource printer cannot print %T", obj)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("printers: cannot print %T: %w", obj, err)
	}
	content := u.UnstructuredContent()
	cells := make([]any, 1, 1+len(columns))
	cells[0] = m.GetName()
	for _, c := range columns {
		cells = append(cells, c.cell(content, now))
	}
	return cells, nil
}

// cell evaluates the column against an object's content. Like upstream it uses only the first
// value found: a path matching several values (e.g. .spec.items[*].name) shows the first.
func (c customColumn) cell(content map[string]any, now time.Time) any {
	results, err := c.path.FindResults(content)
	if err != nil || len(results) == 0 || len(results[0]) == 0 {
		return nil
	}
	value := results[0][0].Interface()
	if c.typ == "string" {
		return c.text(value)
	}
	return jsonCell(c.typ, value, now)
}

// text prints value as kubectl's -o jsonpath does: scalars as themselves, lists and objects as
// compact JSON. It returns nil when value cannot be printed.
func (c customColumn) text(value any) any {
	var b strings.Builder
	if err := c.path.PrintResults(&b, []reflect.Value{reflect.ValueOf(value)}); err != nil {
		return nil
	}
	return b.String()
}

// jsonCell converts a JSON value to the cell of a column of type typ (other than "string"),
// nil when the value is missing or not of the column's kind.
func jsonCell(typ string, value any, now time.Time) any {
	switch typ {
	case "integer":
		switch v := value.(type) {
		case int64:
			return v
		case float64:
			return int64(v)
		case json.Number:
			if i, err := v.Int64(); err == nil {
				return i
			}
		}
	case "number":
		switch v := value.(type) {
		case int64:
			return float64(v)
		case float64:
			return v
		case json.Number:
			if f, err := v.Float64(); err == nil {
				return f
			}
		}
	case "boolean":
		if v, ok := value.(bool); ok {
			return v
		}
	case "date":
		if v, ok := value.(string); ok {
			return dateAge(v, now)
		}
	}
	return nil
}

// dateAge is the age at now of an RFC 3339 timestamp: "<unknown>" when s is empty or "null",
// "<invalid>" when s does not parse or lies in the future.
func dateAge(s string, now time.Time) string {
	var t metav1.Time
	if err := t.UnmarshalQueryParameter(s); err != nil {
		return "<invalid>"
	}
	return age(t, now)
}
