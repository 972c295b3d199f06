// Package flowcontrol holds the rules of flowcontrol.apiserver.<domain> kinds: their names need
// only be one URL path segment, as upstream's.
package flowcontrol

import (
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
)

// Strategy is the strategy of FlowSchemas and PriorityLevelConfigurations.
type Strategy struct{ *builtin.Strategy }

// New returns the strategy of a flowcontrol kind over its default one.
func New(b *builtin.Strategy) registry.Strategy { return &Strategy{Strategy: b} }

// ValidateName: one URL path segment.
func (s *Strategy) ValidateName(name string) []string { return builtin.PathSegmentName(name) }
