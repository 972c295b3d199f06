package admission_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// write creates files (name: content) in a fresh directory and returns its path.
func write(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var (
	configV1      = naming.Group("apiserver.config.k8s.io") + "/v1"
	configV1alpha = naming.Group("apiserver.k8s.io") + "/v1alpha1"
)

func TestReadConfigFile(t *testing.T) {
	cases := []struct {
		rule     string
		files    map[string]string
		want     map[string]string // plugin: JSON configuration
		warnings []string          // substrings, one per warning
	}{
		{
			rule: "spec: apiserver.config.platform.io/v1, inline configuration and a path relative to the file",
			files: map[string]string{
				"admission.yaml": `apiVersion: ` + configV1 + `
kind: AdmissionConfiguration
plugins:
- name: EventRateLimit
  configuration:
    kind: Configuration
    limits:
    - type: Server
      qps: 5
- name: PodNodeSelector
  path: plugins/podnodeselector.yaml
`,
				"plugins/podnodeselector.yaml": "podNodeSelectorPluginConfig:\n  clusterDefaultNodeSelector: env=prod\n",
			},
			want: map[string]string{
				"EventRateLimit":  `{"kind":"Configuration","limits":[{"qps":5,"type":"Server"}]}`,
				"PodNodeSelector": `{"podNodeSelectorPluginConfig":{"clusterDefaultNodeSelector":"env=prod"}}`,
			},
		},
		{
			rule: "upstream's group name apiserver.config.k8s.io/v1 is read as the same",
			files: map[string]string{"admission.yaml": `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ImagePolicyWebhook
  configuration: {imagePolicy: {allowTTL: 50}}
`},
			want: map[string]string{"ImagePolicyWebhook": `{"imagePolicy":{"allowTTL":50}}`},
		},
		{
			rule: "spec: the older apiserver.platform.io/v1alpha1 is accepted with a deprecation warning",
			files: map[string]string{"admission.yaml": `apiVersion: ` + configV1alpha + `
kind: AdmissionConfiguration
plugins:
- name: EventRateLimit
  configuration: {limits: []}
`},
			want:     map[string]string{"EventRateLimit": `{"limits":[]}`},
			warnings: []string{configV1alpha + " is deprecated since 1.17, use " + configV1},
		},
		{
			rule: "upstream's apiserver.k8s.io/v1alpha1 is the same deprecated version",
			files: map[string]string{"admission.yaml": `apiVersion: apiserver.k8s.io/v1alpha1
kind: AdmissionConfiguration
plugins: []
`},
			want:     map[string]string{},
			warnings: []string{"apiserver.k8s.io/v1alpha1 is deprecated"},
		},
		{
			rule: "JSON is YAML: a JSON file reads the same",
			files: map[string]string{"admission.json": `{"apiVersion":"` + configV1 + `","kind":"AdmissionConfiguration",
"plugins":[{"name":"PodTolerationRestriction","configuration":{"default":[{"key":"k","operator":"Exists"}]}},
{"name":"ImagePolicyWebhook","path":"ipw.json"}]}`,
				"ipw.json": `{"imagePolicy":{"kubeConfigFile":"/k","defaultAllow":true}}`,
			},
			want: map[string]string{
				"PodTolerationRestriction": `{"default":[{"key":"k","operator":"Exists"}]}`,
				"ImagePolicyWebhook":       `{"imagePolicy":{"defaultAllow":true,"kubeConfigFile":"/k"}}`,
			},
		},
		{
			rule: "a plugin entry without configuration (or null) has none",
			files: map[string]string{"admission.yaml": `apiVersion: ` + configV1 + `
kind: AdmissionConfiguration
plugins:
- name: EventRateLimit
- name: PodNodeSelector
  configuration: null
`},
			want: map[string]string{},
		},
		{
			rule: "an entry for a plugin removed upstream is tolerated (enabling it is the error)",
			files: map[string]string{"admission.yaml": `apiVersion: ` + configV1 + `
kind: AdmissionConfiguration
plugins:
- name: PodSecurityPolicy
  configuration: {}
`},
			want: map[string]string{"PodSecurityPolicy": `{}`},
		},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			dir := write(t, c.files)
			name := "admission.yaml"
			if _, ok := c.files[name]; !ok {
				name = "admission.json"
			}
			got, warnings, err := admission.ReadConfigFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("configurations %v, want %v", strs(got), c.want)
			}
			for plugin, wantJSON := range c.want {
				if !jsonSame(t, got[plugin], []byte(wantJSON)) {
					t.Errorf("%s: %s, want %s", plugin, got[plugin], wantJSON)
				}
			}
			if len(warnings) != len(c.warnings) {
				t.Fatalf("warnings %q, want %q", warnings, c.warnings)
			}
			for i, w := range c.warnings {
				if !strings.Contains(warnings[i], w) || !strings.Contains(warnings[i], "--admission-control-config-file") {
					t.Errorf("warning %q, want it to name the flag and contain %q", warnings[i], w)
				}
			}
		})
	}
}

// An absolute path is used as it is.
func TestReadConfigFileAbsolutePath(t *testing.T) {
	other := write(t, map[string]string{"erl.yaml": "limits: [{type: Namespace, qps: 1, burst: 2, cacheSize: 3}]\n"})
	dir := write(t, map[string]string{"admission.yaml": "apiVersion: " + configV1 + "\nkind: AdmissionConfiguration\nplugins:\n- name: EventRateLimit\n  path: " + filepath.Join(other, "erl.yaml") + "\n"})
	got, _, err := admission.ReadConfigFile(filepath.Join(dir, "admission.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !jsonSame(t, got["EventRateLimit"], []byte(`{"limits":[{"type":"Namespace","qps":1,"burst":2,"cacheSize":3}]}`)) {
		t.Fatalf("EventRateLimit: %s", got["EventRateLimit"])
	}
}

func TestReadConfigFileErrors(t *testing.T) {
	header := "apiVersion: " + configV1 + "\nkind: AdmissionConfiguration\n"
	cases := []struct {
		rule  string
		files map[string]string
		file  string // default admission.yaml
		want  []string
	}{
		{rule: "a missing file", file: "nope.yaml", want: []string{"--admission-control-config-file", "nope.yaml", "no such file"}},
		{rule: "not YAML", files: map[string]string{"admission.yaml": "apiVersion: [\n"}, want: []string{"--admission-control-config-file"}},
		{rule: "not an object", files: map[string]string{"admission.yaml": "- a\n- b\n"}, want: []string{"--admission-control-config-file", "cannot unmarshal"}},
		{rule: "an empty file has no kind", files: map[string]string{"admission.yaml": ""}, want: []string{"kind must be AdmissionConfiguration"}},
		{
			rule:  "another kind",
			files: map[string]string{"admission.yaml": "apiVersion: " + configV1 + "\nkind: EncryptionConfiguration\n"},
			want:  []string{`kind must be AdmissionConfiguration, not "EncryptionConfiguration"`},
		},
		{
			rule:  "upstream: apiserver.config.k8s.io/v1alpha1 has no AdmissionConfiguration",
			files: map[string]string{"admission.yaml": "apiVersion: apiserver.config.k8s.io/v1alpha1\nkind: AdmissionConfiguration\n"},
			want:  []string{"apiVersion must be " + configV1 + " (or the deprecated " + configV1alpha + `), not "apiserver.config.k8s.io/v1alpha1"`},
		},
		{
			rule:  "an apiVersion without a group",
			files: map[string]string{"admission.yaml": "apiVersion: v1\nkind: AdmissionConfiguration\n"},
			want:  []string{`not "v1"`},
		},
		{
			rule:  "an unknown plugin name",
			files: map[string]string{"admission.yaml": header + "plugins:\n- name: EventRateLimiter\n"},
			want:  []string{`unknown admission plugin "EventRateLimiter"`},
		},
		{
			rule:  "an entry without a name",
			files: map[string]string{"admission.yaml": header + "plugins:\n- configuration: {}\n"},
			want:  []string{"a plugin entry has no name"},
		},
		{
			rule:  "a plugin configured twice",
			files: map[string]string{"admission.yaml": header + "plugins:\n- name: EventRateLimit\n  configuration: {a: 1}\n- name: EventRateLimit\n  configuration: {a: 2}\n"},
			want:  []string{"plugin EventRateLimit is configured more than once"},
		},
		{
			rule:  "both path and configuration",
			files: map[string]string{"admission.yaml": header + "plugins:\n- name: EventRateLimit\n  path: x.yaml\n  configuration: {a: 1}\n"},
			want:  []string{"plugin EventRateLimit has both path and configuration"},
		},
		{
			rule:  "a path that does not exist, relative to the configuration's directory",
			files: map[string]string{"admission.yaml": header + "plugins:\n- name: EventRateLimit\n  path: missing/erl.yaml\n"},
			want:  []string{"plugin EventRateLimit", filepath.Join("missing", "erl.yaml"), "no such file"},
		},
		{
			rule:  "a plugin file that is not YAML",
			files: map[string]string{"admission.yaml": header + "plugins:\n- name: EventRateLimit\n  path: erl.yaml\n", "erl.yaml": "limits: [\n"},
			want:  []string{"plugin EventRateLimit", "erl.yaml"},
		},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			dir := write(t, c.files)
			file := c.file
			if file == "" {
				file = "admission.yaml"
			}
			got, _, err := admission.ReadConfigFile(filepath.Join(dir, file))
			if err == nil {
				t.Fatalf("ReadConfigFile = %v, want an error", strs(got))
			}
			for _, w := range append([]string{"--admission-control-config-file"}, c.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// A file that exists but cannot be read.
func TestReadConfigFileUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		// root reads files whatever their mode; a directory is unreadable as a file for everyone.
		dir := t.TempDir()
		_, _, err := admission.ReadConfigFile(dir)
		if err == nil || !strings.Contains(err.Error(), "--admission-control-config-file") {
			t.Fatalf("reading a directory: %v", err)
		}
		return
	}
	dir := write(t, map[string]string{"admission.yaml": "kind: AdmissionConfiguration\n"})
	p := filepath.Join(dir, "admission.yaml")
	if err := os.Chmod(p, 0); err != nil {
		t.Fatal(err)
	}
	_, _, err := admission.ReadConfigFile(p)
	if err == nil || !strings.Contains(err.Error(), "--admission-control-config-file") || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("ReadConfigFile = %v", err)
	}
}

func strs(m map[string][]byte) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

func jsonSame(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}
