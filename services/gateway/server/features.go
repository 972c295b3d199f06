package server

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Feature gates of the gateway, named and defaulted as upstream's kube-apiserver gates of the
// same behaviour (--feature-gates=Name=true|false,...).
const (
	// APIResponseCompression gzips answers over 128 KiB for clients that accept gzip (upstream:
	// beta, on by default since 1.16).
	APIResponseCompression = "APIResponseCompression"
	// AggregatedDiscoveryRemoveBetaType stops serving aggregated discovery in apidiscovery
	// v2beta1 (upstream: on by default since 1.33, deprecated): off serves v2beta1 beside v2.
	AggregatedDiscoveryRemoveBetaType = "AggregatedDiscoveryRemoveBetaType"
)

// FeatureGates are the gates' values.
type FeatureGates struct {
	APIResponseCompression            bool
	AggregatedDiscoveryRemoveBetaType bool
}

// DefaultFeatureGates are upstream 1.33's defaults.
func DefaultFeatureGates() FeatureGates {
	return FeatureGates{APIResponseCompression: true, AggregatedDiscoveryRemoveBetaType: true}
}

func (g *FeatureGates) known() map[string]*bool {
	return map[string]*bool{
		APIResponseCompression:            &g.APIResponseCompression,
		AggregatedDiscoveryRemoveBetaType: &g.AggregatedDiscoveryRemoveBetaType,
	}
}

// featureGatesFlag is --feature-gates: comma-separated Name=bool pairs; unknown names are an
// error, as upstream's.
type featureGatesFlag struct{ g *FeatureGates }

func (f featureGatesFlag) String() string {
	var parts []string
	for name, v := range f.g.known() {
		parts = append(parts, name+"="+strconv.FormatBool(*v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func (f featureGatesFlag) Set(value string) error {
	known := f.g.known()
	for _, pair := range strings.Split(value, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		name, v, ok := strings.Cut(pair, "=")
		if !ok {
			return fmt.Errorf("missing bool value for %s", pair)
		}
		name = strings.TrimSpace(name)
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("invalid value of %s=%s, err: %v", name, v, err)
		}
		p, ok := known[name]
		if !ok {
			names := make([]string, 0, len(known))
			for n := range known {
				names = append(names, n)
			}
			sort.Strings(names)
			return fmt.Errorf("unrecognized feature gate: %s (known: %s)", name, strings.Join(names, ", "))
		}
		*p = b
	}
	return nil
}

func (featureGatesFlag) Type() string { return "mapStringBool" }
