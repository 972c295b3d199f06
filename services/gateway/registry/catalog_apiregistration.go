package registry

import "platform.io/services/gateway/aggregator/apiregistration"

// The aggregation layer's APIServices (apiregistration.platform.io/v1; upstream's
// apiregistration.k8s.io): the Go types are the gateway's own (aggregator/apiregistration),
// served by the built-in strategy with the APIService hooks of the API server. Kept apart from
// catalog.go's list so the kind's entry stays in one place with its types.
func init() {
	catalog = append(catalog, catalogEntry{
		upstream: apiregistration.SchemeGroupVersion, install: apiregistration.AddToScheme, defaultOn: true,
		kinds: map[string]kindInfo{"APIService": {}},
	})
}
