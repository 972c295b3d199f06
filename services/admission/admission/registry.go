package admission

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Plugin names.
const (
	AlwaysAdmit                          = "AlwaysAdmit"
	AlwaysDeny                           = "AlwaysDeny"
	AlwaysPullImages                     = "AlwaysPullImages"
	CertificateApproval                  = "CertificateApproval"
	CertificateSigning                   = "CertificateSigning"
	CertificateSubjectRestriction        = "CertificateSubjectRestriction"
	DefaultIngressClass                  = "DefaultIngressClass"
	DefaultStorageClass                  = "DefaultStorageClass"
	DefaultTolerationSeconds             = "DefaultTolerationSeconds"
	DenyServiceExternalIPs               = "DenyServiceExternalIPs"
	EventRateLimit                       = "EventRateLimit"
	ExtendedResourceToleration           = "ExtendedResourceToleration"
	ImagePolicyWebhook                   = "ImagePolicyWebhook"
	LimitPodHardAntiAffinityTopology     = "LimitPodHardAntiAffinityTopology"
	LimitRanger                          = "LimitRanger"
	MutatingAdmissionWebhook             = "MutatingAdmissionWebhook"
	NamespaceAutoProvision               = "NamespaceAutoProvision"
	NamespaceExists                      = "NamespaceExists"
	NamespaceLifecycle                   = "NamespaceLifecycle"
	NodeRestriction                      = "NodeRestriction"
	OwnerReferencesPermissionEnforcement = "OwnerReferencesPermissionEnforcement"
	PersistentVolumeClaimResize          = "PersistentVolumeClaimResize"
	PersistentVolumeLabel                = "PersistentVolumeLabel"
	PodNodeSelector                      = "PodNodeSelector"
	PodSecurity                          = "PodSecurity"
	PodSecurityPolicy                    = "PodSecurityPolicy"
	PodTolerationRestriction             = "PodTolerationRestriction"
	Priority                             = "Priority"
	ResourceQuota                        = "ResourceQuota"
	RuntimeClass                         = "RuntimeClass"
	SecurityContextDeny                  = "SecurityContextDeny"
	ServiceAccount                       = "ServiceAccount"
	StorageObjectInUseProtection         = "StorageObjectInUseProtection"
	TaintNodesByCondition                = "TaintNodesByCondition"
	ValidatingAdmissionPolicy            = "ValidatingAdmissionPolicy"
	ValidatingAdmissionWebhook           = "ValidatingAdmissionWebhook"
)

// Order is the order plugins run in, upstream's (whatever order the flags name them in, as the
// spec says the order of --enable-admission-plugins is not important).
var Order = []string{
	AlwaysAdmit, NamespaceAutoProvision, NamespaceLifecycle, NamespaceExists, SecurityContextDeny,
	LimitPodHardAntiAffinityTopology, LimitRanger, ServiceAccount, NodeRestriction, TaintNodesByCondition,
	AlwaysPullImages, ImagePolicyWebhook, PodSecurity, PodNodeSelector, Priority, DefaultTolerationSeconds,
	PodTolerationRestriction, EventRateLimit, ExtendedResourceToleration, DefaultStorageClass,
	StorageObjectInUseProtection, OwnerReferencesPermissionEnforcement, PersistentVolumeClaimResize,
	RuntimeClass, CertificateApproval, CertificateSigning, CertificateSubjectRestriction,
	DefaultIngressClass, DenyServiceExternalIPs, MutatingAdmissionWebhook, ValidatingAdmissionPolicy,
	ValidatingAdmissionWebhook, ResourceQuota, AlwaysDeny,
}

// DefaultEnabled is the spec's default set (release 1.26) plus ValidatingAdmissionPolicy, which
// upstream enables by default since 1.30 (the policies are GA there).
var DefaultEnabled = []string{
	CertificateApproval, CertificateSigning, CertificateSubjectRestriction, DefaultIngressClass,
	DefaultStorageClass, DefaultTolerationSeconds, LimitRanger, MutatingAdmissionWebhook,
	NamespaceLifecycle, PersistentVolumeClaimResize, PodSecurity, Priority, ResourceQuota,
	RuntimeClass, ServiceAccount, StorageObjectInUseProtection, TaintNodesByCondition,
	ValidatingAdmissionPolicy, ValidatingAdmissionWebhook,
}

// Removed names plugins upstream removed; enabling one refuses to start with this reason.
var Removed = map[string]string{
	PodSecurityPolicy:     "PodSecurityPolicy was removed upstream in 1.25: use PodSecurity (Pod Security Standards from namespace labels)",
	PersistentVolumeLabel: "PersistentVolumeLabel was removed upstream in 1.31: cloud providers label volumes themselves",
}

// Registry holds the factories of the plugins this binary has.
type Registry struct {
	factories map[string]Factory
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{factories: map[string]Factory{}} }

// Register adds a plugin's factory; name must be in Order.
func (r *Registry) Register(name string, f Factory) {
	if !known(name) {
		panic("admission: plugin " + name + " is not in Order")
	}
	r.factories[name] = f
}

// Factory returns a plugin's factory.
func (r *Registry) Factory(name string) (Factory, bool) {
	f, ok := r.factories[name]
	return f, ok
}

func known(name string) bool {
	for _, n := range Order {
		if n == name {
			return true
		}
	}
	return false
}

// Enabled resolves --enable-admission-plugins and --disable-admission-plugins into the plugins to
// run, in Order: the default set plus enable, minus disable (which turns off default plugins too).
// Unknown and removed names are errors naming the flag, and so is a plugin named in both flags,
// as upstream refuses that overlap rather than guess which the operator meant.
func Enabled(enable, disable []string) ([]string, error) {
	var errs []error
	check := func(flag string, names []string) {
		for _, n := range names {
			if reason, ok := Removed[n]; ok {
				errs = append(errs, fmt.Errorf("--%s: %s", flag, reason))
			} else if !known(n) {
				errs = append(errs, fmt.Errorf("--%s: unknown admission plugin %q (known: %s)", flag, n, strings.Join(sortedOrder(), ", ")))
			}
		}
	}
	check("enable-admission-plugins", enable)
	check("disable-admission-plugins", disable)
	var both []string
	for _, n := range enable {
		if slices.Contains(disable, n) && !slices.Contains(both, n) {
			both = append(both, n)
		}
	}
	if len(both) > 0 {
		errs = append(errs, fmt.Errorf("--enable-admission-plugins and --disable-admission-plugins both name %s", strings.Join(both, ", ")))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	on := map[string]bool{}
	for _, n := range DefaultEnabled {
		on[n] = true
	}
	for _, n := range enable {
		on[n] = true
	}
	for _, n := range disable {
		delete(on, n)
	}
	var out []string
	for _, n := range Order {
		if on[n] {
			out = append(out, n)
		}
	}
	return out, nil
}

func sortedOrder() []string {
	out := append([]string(nil), Order...)
	sort.Strings(out)
	return out
}
