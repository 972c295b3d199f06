// Package kinds chooses each served kind's strategy: the default one of registry/builtin,
// wrapped by the package of a kind with rules of its own, and registry/custom's for custom
// resources. It is the one place that names the kinds with rules of their own; the API server
// installs its Factory in the registry.
package kinds

import (
	"fmt"
	"log/slog"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/admissionregistration"
	"platform.io/services/gateway/registry/apiextensions"
	"platform.io/services/gateway/registry/apiregistration"
	"platform.io/services/gateway/registry/apps"
	"platform.io/services/gateway/registry/authentication"
	"platform.io/services/gateway/registry/authorization"
	"platform.io/services/gateway/registry/autoscaling"
	"platform.io/services/gateway/registry/builtin"
	"platform.io/services/gateway/registry/certificates"
	"platform.io/services/gateway/registry/core"
	"platform.io/services/gateway/registry/custom"
	"platform.io/services/gateway/registry/events"
	"platform.io/services/gateway/registry/flowcontrol"
	"platform.io/services/gateway/registry/rbac"
)

// Deps are what the kinds' rules need from the API server.
type Deps struct {
	Registry *registry.Registry
	Shared   *builtin.Shared
	// Log receives the rules' log lines (a dependency that cannot decide).
	Log *slog.Logger
	// RBAC is what escalation prevention asks and reads.
	RBAC rbac.Deps
	// Components are the services componentstatuses report.
	Components []core.Component
	// Tokens and Authz answer the review kinds (token and access reviews).
	Tokens authentication.TokenReviewer
	Authz  authorization.Authorizer
	// ProtectNamespaces refuses deletes of the initial namespaces in the gateway: when no
	// admission service runs NamespaceLifecycle, which refuses them otherwise.
	ProtectNamespaces bool
}

// wrapper makes a kind's strategy over its default one.
type wrapper func(*builtin.Strategy, Deps) registry.Strategy

// byKind names the built-in kinds with rules of their own, by served group and kind.
func byKind() map[schema.GroupKind]wrapper {
	same := func(f func(*builtin.Strategy) registry.Strategy) wrapper {
		return func(b *builtin.Strategy, _ Deps) registry.Strategy { return f(b) }
	}
	gk := func(upstreamGroup, kind string) schema.GroupKind {
		return schema.GroupKind{Group: naming.Group(upstreamGroup), Kind: kind}
	}
	rbacKind := func(b *builtin.Strategy, d Deps) registry.Strategy { return rbac.New(b, d.RBAC) }
	authz := func(b *builtin.Strategy, d Deps) registry.Strategy { return authorization.New(b, d.Authz, d.Log) }
	return map[schema.GroupKind]wrapper{
		gk("", "Namespace"): func(b *builtin.Strategy, d Deps) registry.Strategy {
			return core.NewNamespace(b, d.ProtectNamespaces)
		},
		gk("", "ComponentStatus"): func(b *builtin.Strategy, d Deps) registry.Strategy {
			return core.NewComponentStatus(b, d.Components)
		},
		gk("", "Pod"):                                                          same(core.NewPod),
		gk("", "Service"):                                                      same(core.NewService),
		gk("", "Node"):                                                         same(core.NewStatusOnCreate),
		gk("", "PersistentVolume"):                                             same(core.NewStatusOnCreate),
		gk("", "ReplicationController"):                                        same(core.NewReplicationController),
		gk("apps", "Deployment"):                                               same(apps.NewScalable),
		gk("apps", "ReplicaSet"):                                               same(apps.NewScalable),
		gk("apps", "StatefulSet"):                                              same(apps.NewScalable),
		gk("rbac.authorization.k8s.io", "Role"):                                rbacKind,
		gk("rbac.authorization.k8s.io", "ClusterRole"):                         rbacKind,
		gk("rbac.authorization.k8s.io", "RoleBinding"):                         rbacKind,
		gk("rbac.authorization.k8s.io", "ClusterRoleBinding"):                  rbacKind,
		gk("flowcontrol.apiserver.k8s.io", "FlowSchema"):                       same(flowcontrol.New),
		gk("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"):       same(flowcontrol.New),
		gk("certificates.k8s.io", "CertificateSigningRequest"):                 same(certificates.New),
		gk("apiextensions.k8s.io", "CustomResourceDefinition"):                 same(apiextensions.New),
		gk("admissionregistration.k8s.io", "MutatingWebhookConfiguration"):     same(admissionregistration.New),
		gk("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"):   same(admissionregistration.New),
		gk("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"): same(admissionregistration.New),
		gk("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): func(b *builtin.Strategy, d Deps) registry.Strategy {
			log := d.Log
			if log == nil {
				log = slog.Default()
			}
			return admissionregistration.NewPolicy(b, d.Registry, log.Warn)
		},
		{Group: apiregistration.GroupVersion.Group, Kind: "APIService"}: same(apiregistration.New),
		gk("authentication.k8s.io", "SelfSubjectReview"):                same(authentication.NewSelfSubjectReview),
		gk("authentication.k8s.io", "TokenReview"): func(b *builtin.Strategy, d Deps) registry.Strategy {
			return authentication.NewTokenReview(b, d.Tokens, d.Log)
		},
		gk("authorization.k8s.io", "SubjectAccessReview"):      authz,
		gk("authorization.k8s.io", "SelfSubjectAccessReview"):  authz,
		gk("authorization.k8s.io", "LocalSubjectAccessReview"): authz,
		gk("authorization.k8s.io", "SelfSubjectRulesReview"):   authz,
	}
}

// conversions are the conversions of every kind served in a second version, by the served
// version's Go type.
var conversions = autoscaling.Conversions

// Factory is the registry's StrategyFactory: every built-in kind gets the default strategy,
// which a kind with rules of its own wraps (a kind seen through another's storage, as
// events.<domain> Events, or through a second version, converts first); custom resources get
// the custom one. It registers the version conversions in the scheme (the field manager
// converts between the versions its entries were written in).
func Factory(d Deps) registry.StrategyFactory {
	autoscaling.AddToScheme(d.Shared.Scheme)
	wrappers := byKind()
	return registry.StrategyFactory{
		Builtin: func(res *registry.Resource) registry.Strategy {
			b := builtin.New(res, d.Shared)
			if res.StoredAs != nil {
				if s := events.New(d.Registry, b); s != nil {
					return s
				}
			}
			if res.StorageVersion != "" {
				stored, ok := d.Registry.StorageResource(schema.GroupVersionResource{Group: res.Group, Version: res.StorageVersion, Resource: res.Resource})
				conv, known := conversions[reflect.TypeOf(res.New())]
				if !ok || !known {
					// The registry refuses a second version without its storage version; a kind
					// without a conversion is a catalog mistake that would store two forms.
					panic(fmt.Sprintf("kinds: %s is stored as %s but cannot be converted", res.GroupVersionResource, res.StorageVersion))
				}
				return builtin.NewVersioned(b, stored, conv)
			}
			if wrap, ok := wrappers[res.GroupVersionKind().GroupKind()]; ok {
				return wrap(b, d)
			}
			return b
		},
		Custom: func(res *registry.Resource) registry.Strategy { return custom.New(res) },
	}
}
