package printers

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// databaseColumns are the additionalPrinterColumns of an imaginary Database custom resource.
var databaseColumns = []apiextensionsv1.CustomResourceColumnDefinition{
	{Name: "Replicas", Type: "integer", JSONPath: ".spec.replicas", Description: "Desired replicas."},
	{Name: "Version", Type: "string", JSONPath: ".spec.version"},
	{Name: "Size", Type: "string", Format: "quantity", JSONPath: ".spec.storage.size", Priority: 1},
	{Name: "Paused", Type: "boolean", JSONPath: ".spec.paused"},
	{Name: "Load", Type: "number", Format: "double", JSONPath: ".status.load"},
	{Name: "Ready", Type: "string", JSONPath: `.status.conditions[?(@.type=="Ready")].status`},
	{Name: "First Port", Type: "integer", JSONPath: ".spec.ports[*].port", Priority: 2},
	{Name: "Endpoints", Type: "string", JSONPath: ".status.endpoints", Priority: 1},
	{Name: "Owner", Type: "string", JSONPath: ".spec.owner"},
	{Name: "Last Backup", Type: "date", JSONPath: ".status.lastBackup"},
	{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
}

// database is a Database object as the gateway decodes it: integers are int64, other numbers float64.
func database(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	err := u.UnmarshalJSON([]byte(`{
		"apiVersion": "db.example.com/v1", "kind": "Database",
		"metadata": {"name": "orders", "namespace": "shop", "creationTimestamp": "2026-11-21T09:00:00Z"},
		"spec": {"replicas": 3, "version": "16.2", "storage": {"size": "10Gi"}, "paused": false,
			"ports": [{"name": "sql", "port": 5432}, {"name": "metrics", "port": 9187}]},
		"status": {"load": 0.75, "lastBackup": "2026-11-21T11:55:00Z",
			"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}],
			"endpoints": ["10.0.0.1:5432", "10.0.0.2:5432"]}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// customPrinter is ForCustom of columns, failing the test on an error.
func customPrinter(t *testing.T, columns ...apiextensionsv1.CustomResourceColumnDefinition) *Printer {
	t.Helper()
	p, err := ForCustom(columns)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// customCell is the cell of a printer with the single column (type typ, path .spec.value) for
// an object whose spec.value is value.
func customCell(t *testing.T, typ string, value any) any {
	t.Helper()
	p := customPrinter(t, apiextensionsv1.CustomResourceColumnDefinition{Name: "Value", Type: typ, JSONPath: ".spec.value"})
	obj := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "x"},
		"spec":     map[string]any{"value": value},
	}}
	cells, err := p.Cells(obj, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != 2 || cells[0] != "x" {
		t.Fatalf("cells = %#v", cells)
	}
	return cells[1]
}

func TestForCustomColumns(t *testing.T) {
	p := customPrinter(t, databaseColumns...)
	want := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Replicas", Type: "integer", Description: "Desired replicas."},
		{Name: "Version", Type: "string", Description: "Custom resource definition column (in JSONPath format): .spec.version"},
		{Name: "Size", Type: "string", Format: "quantity", Priority: 1,
			Description: "Custom resource definition column (in JSONPath format): .spec.storage.size"},
		{Name: "Paused", Type: "boolean", Description: "Custom resource definition column (in JSONPath format): .spec.paused"},
		{Name: "Load", Type: "number", Format: "double", Description: "Custom resource definition column (in JSONPath format): .status.load"},
		{Name: "Ready", Type: "string",
			Description: `Custom resource definition column (in JSONPath format): .status.conditions[?(@.type=="Ready")].status`},
		{Name: "First Port", Type: "integer", Priority: 2,
			Description: "Custom resource definition column (in JSONPath format): .spec.ports[*].port"},
		{Name: "Endpoints", Type: "string", Priority: 1,
			Description: "Custom resource definition column (in JSONPath format): .status.endpoints"},
		{Name: "Owner", Type: "string", Description: "Custom resource definition column (in JSONPath format): .spec.owner"},
		{Name: "Last Backup", Type: "date", Description: "Custom resource definition column (in JSONPath format): .status.lastBackup"},
		{Name: "Age", Type: "date", Description: "Custom resource definition column (in JSONPath format): .metadata.creationTimestamp"},
	}
	if !reflect.DeepEqual(p.Columns, want) {
		t.Errorf("columns =\n%+v\nwant\n%+v", p.Columns, want)
	}
}

func TestForCustomCells(t *testing.T) {
	p := customPrinter(t, databaseColumns...)
	cells, err := p.Cells(database(t), now)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{
		"orders",
		int64(3),                            // Replicas
		"16.2",                              // Version
		"10Gi",                              // Size, nested
		false,                               // Paused
		0.75,                                // Load
		"True",                              // Ready, found by a filter
		int64(5432),                         // First Port: the first of several results
		`["10.0.0.1:5432","10.0.0.2:5432"]`, // Endpoints: a list as JSON
		nil,                                 // Owner: missing
		"5m",                                // Last Backup
		"3h",                                // Age
	}
	if !reflect.DeepEqual(cells, want) {
		t.Errorf("cells =\n%#v\nwant\n%#v", cells, want)
	}
}

func TestForCustomMissingFields(t *testing.T) {
	p := customPrinter(t, databaseColumns...)
	for _, obj := range []*unstructured.Unstructured{
		{},
		{Object: map[string]any{"metadata": map[string]any{"name": "empty"}, "spec": "not an object", "status": map[string]any{
			"conditions": "not a list", "load": "high", "lastBackup": int64(7)}}},
	} {
		cells, err := p.Cells(obj, now)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]any, len(p.Columns))
		want[0] = obj.GetName()
		if !reflect.DeepEqual(cells, want) {
			t.Errorf("cells of %v = %#v, want all nil", obj.Object, cells)
		}
	}
}

func TestForCustomNumbers(t *testing.T) {
	for _, tt := range []struct {
		typ   string
		value any
		want  any
	}{
		{"integer", int64(42), int64(42)},
		{"integer", float64(42), int64(42)}, // as decoded by encoding/json
		{"integer", 3.9, int64(3)},
		{"integer", json.Number("7"), int64(7)},
		{"integer", json.Number("7.5"), nil},
		{"integer", "42", nil},
		{"integer", true, nil},
		{"number", int64(2), float64(2)},
		{"number", 0.25, 0.25},
		{"number", json.Number("1.5"), 1.5},
		{"number", "1.5", nil},
		{"boolean", true, true},
		{"boolean", "true", nil},
		{"boolean", int64(1), nil},
		{"string", "text", "text"},
		{"string", int64(42), "42"},
		{"string", 2.5, "2.5"},
		{"string", true, "true"},
		{"string", map[string]any{"b": int64(1), "a": "x"}, `{"a":"x","b":1}`},
		{"integer", nil, nil},
		{"unknown", "text", nil},
	} {
		if got := customCell(t, tt.typ, tt.value); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s cell of %#v = %#v, want %#v", tt.typ, tt.value, got, tt.want)
		}
	}
}

func TestForCustomDates(t *testing.T) {
	for value, want := range map[any]string{
		now.Add(-5 * time.Minute).Format(time.RFC3339):                                 "5m",
		now.Add(-3*time.Hour - 2*time.Minute).Format(time.RFC3339):                     "3h2m",
		now.Add(-12 * 24 * time.Hour).Format(time.RFC3339):                             "12d",
		now.Add(-90 * time.Minute).In(time.FixedZone("", 2*3600)).Format(time.RFC3339): "90m",
		now.Add(time.Hour).Format(time.RFC3339):                                        "<invalid>", // in the future
		"":                                                                             "<unknown>",
		"null":                                                                         "<unknown>",
		"2026-11-21":                                                                   "<invalid>",
		"yesterday":                                                                    "<invalid>",
	} {
		if got := customCell(t, "date", value); got != want {
			t.Errorf("date cell of %q = %#v, want %q", value, got, want)
		}
	}
	if got := customCell(t, "date", int64(1700000000)); got != nil {
		t.Errorf("date cell of a number = %#v, want nil", got)
	}
}

func TestForCustomBadPaths(t *testing.T) {
	for _, path := range []string{
		".spec.replicas[",
		`.status.conditions[?(@.type=="Ready"].status`,
		".spec}{range .items[*]}{.name}{end", // not a simple path
	} {
		p, err := ForCustom([]apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Replicas", Type: "integer", JSONPath: ".spec.replicas"},
			{Name: "Bad", Type: "string", JSONPath: path},
		})
		if err == nil || p != nil {
			t.Errorf("ForCustom accepted the JSONPath %q", path)
		}
	}
}

func TestForCustomNoColumns(t *testing.T) {
	for _, columns := range [][]apiextensionsv1.CustomResourceColumnDefinition{nil, {}} {
		if p := customPrinter(t, columns...); p != Default() {
			t.Errorf("ForCustom(%#v) is not the default printer", columns)
		}
	}
}

func TestForCustomDeepCopy(t *testing.T) {
	p := customPrinter(t, append(databaseColumns,
		apiextensionsv1.CustomResourceColumnDefinition{Name: "Spec", Type: "string", JSONPath: ".spec"},
		apiextensionsv1.CustomResourceColumnDefinition{Name: "Ports", Type: "integer", JSONPath: ".spec.ports"},
	)...)
	cells, err := p.Cells(database(t), now)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cells {
		switch c.(type) {
		case nil, string, bool, int64, float64:
		default:
			t.Errorf("column %q: cell %#v is a %T", p.Columns[i].Name, c, c)
		}
	}
	row := metav1.TableRow{Cells: cells}
	copied := row.DeepCopy()
	if !reflect.DeepEqual(copied.Cells, cells) {
		t.Errorf("deep copy = %#v, want %#v", copied.Cells, cells)
	}
	table := &metav1.Table{ColumnDefinitions: p.Columns, Rows: []metav1.TableRow{row}}
	if _, err := json.Marshal(table.DeepCopy()); err != nil {
		t.Error(err)
	}
}

func TestForCustomWrongObjects(t *testing.T) {
	p := customPrinter(t, databaseColumns...)
	for _, obj := range []runtime.Object{
		&corev1.Pod{}, (*unstructured.Unstructured)(nil), &unstructured.UnstructuredList{}, &metav1.Status{}, nil,
	} {
		if _, err := p.Cells(obj, now); err == nil {
			t.Errorf("custom resource printer printed %#v", obj)
		}
	}
}
