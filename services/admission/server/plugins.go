package server

import (
	"platform.io/services/admission/admission"
	"platform.io/services/admission/plugins/basic"
	"platform.io/services/admission/plugins/certificates"
	"platform.io/services/admission/plugins/cluster"
	"platform.io/services/admission/plugins/namespaces"
	"platform.io/services/admission/plugins/pods"
	"platform.io/services/admission/plugins/quota"
	"platform.io/services/admission/policy"
	"platform.io/services/admission/webhook"
)

// Plugins is the registry of every plugin this module has.
func Plugins() *admission.Registry {
	r := admission.NewRegistry()
	basic.Register(r)
	certificates.Register(r)
	cluster.Register(r)
	namespaces.Register(r)
	pods.Register(r)
	quota.Register(r)
	policy.Register(r)
	webhook.Register(r)
	return r
}
