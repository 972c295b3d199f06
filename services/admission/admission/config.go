package admission

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"platform.io/libs/naming"
)

// Admission configuration file (--admission-control-config-file): kind AdmissionConfiguration in
// apiserver.config.platform.io/v1, or the deprecated apiserver.platform.io/v1alpha1 (upstream's
// names, apiserver.config.k8s.io and apiserver.k8s.io, are read as the same), with plugins[] of
// name and either path (a file, relative to the configuration's directory) or configuration (the
// plugin's configuration inline).
var (
	configGroupVersion           = naming.Group("apiserver.config.k8s.io") + "/v1"
	deprecatedConfigGroupVersion = naming.Group("apiserver.k8s.io") + "/v1alpha1"
)

type admissionConfiguration struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Plugins    []struct {
		Name          string          `json:"name"`
		Path          string          `json:"path"`
		Configuration json.RawMessage `json:"configuration"`
	} `json:"plugins"`
}

// ReadConfigFile reads an admission configuration file and returns each plugin's configuration as
// JSON, and warnings (the deprecated version).
func ReadConfigFile(path string) (map[string][]byte, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--admission-control-config-file: %w", err)
	}
	jsonData, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, nil, fmt.Errorf("--admission-control-config-file %s: %w", path, err)
	}
	var c admissionConfiguration
	if err := json.Unmarshal(jsonData, &c); err != nil {
		return nil, nil, fmt.Errorf("--admission-control-config-file %s: %w", path, err)
	}
	var warnings []string
	gv := c.APIVersion
	if g, v, ok := cutLast(gv, "/"); ok {
		gv = naming.Group(g) + "/" + v
	}
	switch {
	case c.Kind != "AdmissionConfiguration":
		return nil, nil, fmt.Errorf("--admission-control-config-file %s: kind must be AdmissionConfiguration, not %q", path, c.Kind)
	case gv == configGroupVersion:
	case gv == deprecatedConfigGroupVersion:
		warnings = append(warnings, fmt.Sprintf("--admission-control-config-file %s: %s is deprecated since 1.17, use %s", path, c.APIVersion, configGroupVersion))
	default:
		return nil, nil, fmt.Errorf("--admission-control-config-file %s: apiVersion must be %s (or the deprecated %s), not %q", path, configGroupVersion, deprecatedConfigGroupVersion, c.APIVersion)
	}
	out := map[string][]byte{}
	seen := map[string]bool{}
	for _, p := range c.Plugins {
		switch {
		case seen[p.Name]:
			// Upstream silently takes the first entry; two entries for one plugin are an
			// operator's mistake, so refuse rather than apply a configuration they did not mean.
			return nil, nil, fmt.Errorf("--admission-control-config-file %s: plugin %s is configured more than once", path, p.Name)
		case p.Name == "":
			return nil, nil, fmt.Errorf("--admission-control-config-file %s: a plugin entry has no name", path)
		case !known(p.Name):
			if _, removed := Removed[p.Name]; !removed {
				return nil, nil, fmt.Errorf("--admission-control-config-file %s: unknown admission plugin %q", path, p.Name)
			}
		case p.Path != "" && len(p.Configuration) > 0:
			return nil, nil, fmt.Errorf("--admission-control-config-file %s: plugin %s has both path and configuration", path, p.Name)
		}
		seen[p.Name] = true
		switch {
		case p.Path != "":
			file := p.Path
			if !filepath.IsAbs(file) {
				file = filepath.Join(filepath.Dir(path), file)
			}
			raw, err := os.ReadFile(file)
			if err != nil {
				return nil, nil, fmt.Errorf("--admission-control-config-file %s: plugin %s: %w", path, p.Name, err)
			}
			if out[p.Name], err = yaml.YAMLToJSON(raw); err != nil {
				return nil, nil, fmt.Errorf("--admission-control-config-file %s: plugin %s: %s: %w", path, p.Name, file, err)
			}
		case len(p.Configuration) > 0 && string(p.Configuration) != "null":
			out[p.Name] = append([]byte(nil), p.Configuration...)
		}
	}
	return out, warnings, nil
}

func cutLast(s, sep string) (string, string, bool) {
	for i := len(s) - len(sep); i >= 0; i-- {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return "", s, false
}
