package registry

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
)

// RuntimeConfig is the parsed --runtime-config flag: which group versions and resources are
// served, on top of each group version's default.
type RuntimeConfig struct {
	all           *bool
	groupVersions map[schema.GroupVersion]bool
	resources     map[schema.GroupVersionResource]bool
}

// ParseRuntimeConfig reads --runtime-config's comma-separated `<key>[=<value>]` list, where a
// missing value means true: `api/all=false` turns every group version off, `<group>/<version>`
// turns one on or off, `<group>/<version>/<resource>` one resource. The core group is `v1` or
// `api/v1`.
func ParseRuntimeConfig(s string) (RuntimeConfig, error) {
	rc := RuntimeConfig{groupVersions: map[schema.GroupVersion]bool{}, resources: map[schema.GroupVersionResource]bool{}}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, value, hasValue := strings.Cut(item, "=")
		on := true
		if hasValue {
			b, err := strconv.ParseBool(value)
			if err != nil {
				return rc, fmt.Errorf("--runtime-config: %q: value must be true or false", item)
			}
			on = b
		}
		if key == "api/all" {
			rc.all = &on
			continue
		}
		parts := strings.Split(key, "/")
		if parts[0] == "api" && len(parts) >= 2 {
			parts[0] = ""
		} else if len(parts) == 1 || (len(parts) == 2 && parts[0] == "v1") {
			parts = append([]string{""}, parts...)
		}
		switch len(parts) {
		case 2:
			rc.groupVersions[schema.GroupVersion{Group: parts[0], Version: parts[1]}] = on
		case 3:
			rc.resources[schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]}] = on
		default:
			return rc, fmt.Errorf("--runtime-config: %q is not <group>/<version>[/<resource>]", item)
		}
	}
	return rc, nil
}

// check rejects keys that name nothing the catalog offers, so a typo does not pass silently.
func (rc RuntimeConfig) check() error {
	offered := map[schema.GroupVersion]bool{}
	for _, e := range catalog {
		offered[schema.GroupVersion{Group: naming.Group(e.upstream.Group), Version: e.upstream.Version}] = true
	}
	for gv := range rc.groupVersions {
		if !offered[gv] {
			return fmt.Errorf("--runtime-config: unknown group version %q", gv.String())
		}
	}
	for gvr := range rc.resources {
		if !offered[gvr.GroupVersion()] {
			return fmt.Errorf("--runtime-config: unknown group version %q", gvr.GroupVersion().String())
		}
	}
	return nil
}

func (rc RuntimeConfig) enabled(gv schema.GroupVersion, def bool) bool {
	if on, ok := rc.groupVersions[gv]; ok {
		return on
	}
	if rc.all != nil {
		return *rc.all
	}
	return def
}

func (rc RuntimeConfig) resourceEnabled(gvr schema.GroupVersionResource) bool {
	if on, ok := rc.resources[gvr]; ok {
		return on
	}
	return true
}
