package apiserver

import (
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
	"platform.io/services/gateway/registry/kinds"
	"platform.io/services/gateway/registry/rbac"
)

// strategies is the factory the API installs in its registry (registry/kinds): what the kinds'
// rules need from the API server is the authorizer and stored roles (RBAC's escalation
// prevention), and whether admission guards the initial namespaces.
func (a *API) strategies(shared *builtin.Shared) registry.StrategyFactory {
	return kinds.Factory(kinds.Deps{
		Registry:          a.reg,
		Shared:            shared,
		Log:               a.log,
		RBAC:              rbac.Deps{Authorizer: a.authz, Log: a.log, Get: a.getObject},
		ProtectNamespaces: a.admission == nil,
		Tokens:            a.authn,
		Components:        a.cfg.Components,
		Authz:             a.authz,
	})
}
