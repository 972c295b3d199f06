package registry

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authenticationv1alpha1 "k8s.io/api/authentication/v1alpha1"
	authenticationv1beta1 "k8s.io/api/authentication/v1beta1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"platform.io/libs/naming"
)

// kindInfo is what the catalog says about one kind beyond what the Go types tell.
type kindInfo struct {
	plural                 string
	shortNames, categories []string
	// virtual kinds are operations (create only); skip kinds are not served at all.
	virtual, skip bool
	// scale kinds have the scale subresource (autoscaling/v1 Scale over spec.replicas).
	scale bool
	// token kinds have the token subresource (a TokenRequest: service accounts).
	token bool
	// approval kinds have the approval subresource (the Approved and Denied conditions of
	// certificate signing requests).
	approval bool
	// finalize kinds have the finalize subresource (a namespace's spec.finalizers).
	finalize bool
	// noDeleteCollection kinds are not deleted by collection (namespaces, as upstream's: each is
	// deleted on its own, by name).
	noDeleteCollection bool
	// deprecated kinds are served with upstream's deprecation signals.
	deprecated *Deprecation
	// storedAs names another resource whose storage holds this kind's objects (converted): the
	// same objects seen through two APIs, as events.k8s.io Events are core Events.
	storedAs *schema.GroupResource
	// storageVersion names the version of the same group whose objects storage holds, when this
	// version is a second served version of the kind (its strategy converts to and from it).
	storageVersion string
	// computed kinds are read-only views the gateway computes on every request (get and list),
	// never stored: core componentstatuses report the health of the services behind it.
	computed bool
}

// Deprecation says that a served resource is deprecated, as upstream's API lifecycle does: in which
// release, when (if ever) it goes, and what replaces it.
type Deprecation struct {
	// In is the release that deprecated it ("1.33"); RemovedIn the release that removes it, "" when
	// no removal is planned.
	In, RemovedIn string
	// Replacement is what to use instead (empty when nothing replaces it), as
	// "<group>/<version> <Kind>".
	Replacement string
}

// catalogEntry is one upstream group version that the gateway serves under Platform's group name.
type catalogEntry struct {
	upstream  schema.GroupVersion
	install   func(*runtime.Scheme) error
	defaultOn bool
	kinds     map[string]kindInfo
	// onlyListed serves only the kinds named in kinds (for groups whose other kinds need a
	// service that does not exist yet).
	onlyListed bool
}

// all is the "all" category kubectl expands `kubectl get all` to.
var all = []string{"all"}

// catalog lists the served group versions in discovery order (a group's preferred version
// first): the stable versions of every built-in group. A resource served in two versions is
// stored in one (storageVersion) and converted by the other version's strategy.
var catalog = []catalogEntry{
	{upstream: corev1.SchemeGroupVersion, install: corev1.AddToScheme, defaultOn: true, kinds: map[string]kindInfo{
		"Pod":                   {shortNames: []string{"po"}, categories: all},
		"Service":               {shortNames: []string{"svc"}, categories: all},
		"ConfigMap":             {shortNames: []string{"cm"}},
		"Namespace":             {shortNames: []string{"ns"}, finalize: true, noDeleteCollection: true},
		"Node":                  {shortNames: []string{"no"}},
		"PersistentVolume":      {shortNames: []string{"pv"}},
		"PersistentVolumeClaim": {shortNames: []string{"pvc"}},
		"ServiceAccount":        {shortNames: []string{"sa"}, token: true},
		"Endpoints":             {plural: "endpoints", shortNames: []string{"ep"}, deprecated: &Deprecation{In: "1.33", Replacement: naming.Group("discovery.k8s.io") + "/v1 EndpointSlice"}},
		"Event":                 {shortNames: []string{"ev"}},
		"LimitRange":            {shortNames: []string{"limits"}},
		"ResourceQuota":         {shortNames: []string{"quota"}},
		"ReplicationController": {shortNames: []string{"rc"}, categories: all, scale: true},
		// Deprecated in 1.19 (its deprecation comes from the type's API lifecycle); answered from
		// the health of the services behind the gateway.
		"ComponentStatus": {plural: "componentstatuses", shortNames: []string{"cs"}, computed: true},
		// Not resources: option and helper kinds that happen to have lists.
		"List": {skip: true}, "APIGroup": {skip: true},
	}},
	{upstream: appsv1.SchemeGroupVersion, install: appsv1.AddToScheme, defaultOn: true, kinds: map[string]kindInfo{
		"Deployment":  {shortNames: []string{"deploy"}, categories: all, scale: true},
		"ReplicaSet":  {shortNames: []string{"rs"}, categories: all, scale: true},
		"StatefulSet": {shortNames: []string{"sts"}, categories: all, scale: true},
		"DaemonSet":   {shortNames: []string{"ds"}, categories: all},
	}},
	{upstream: batchv1.SchemeGroupVersion, install: batchv1.AddToScheme, defaultOn: true, kinds: map[string]kindInfo{
		"Job":     {categories: all},
		"CronJob": {shortNames: []string{"cj"}, categories: all},
	}},
	{upstream: autoscalingv2.SchemeGroupVersion, install: autoscalingv2.AddToScheme, defaultOn: true, kinds: map[string]kindInfo{
		"HorizontalPodAutoscaler": {shortNames: []string{"hpa"}, categories: all},
	}},
	// The same HorizontalPodAutoscalers through autoscaling/v1 (preferred is v2, as upstream), stored
	// once as v2 and converted in and out with upstream's conversion and annotations.
	{upstream: autoscalingv1.SchemeGroupVersion, install: autoscalingv1.AddToScheme, defaultOn: true, onlyListed: true, kinds: map[string]kindInfo{
		"HorizontalPodAutoscaler": {shortNames: []string{"hpa"}, categories: all, storageVersion: "v2"},
	}},
	{upstream: policyv1.SchemeGroupVersion, install: policyv1.AddToScheme, defaultOn: true, kinds: map[string]kindInfo{
		"PodDisruptionBudget": {shortNames: []string{"pdb"}},
		// The eviction subresource of pods, not a resource of its own.
		"Eviction": {skip: true},
	}},
	{upstream: rbacv1.SchemeGroupVersion, install: rbacv1.AddToScheme, defaultOn: true},
	{upstream: certificatesv1.SchemeGroupVersion, install: certificatesv1.AddToScheme, defaultOn: true, kinds: map[string]kindInfo{
		"CertificateSigningRequest": {shortNames: []string{"csr"}, approval: true},
	}},
	{upstream: coordinationv1.SchemeGroupVersion, install: coordinationv1.AddToScheme, defaultOn: true},
	{upstream: eventsv1.SchemeGroupVersion, install: eventsv1.AddToScheme, defaultOn: true, kinds: map[string]kindInfo{
		// Upstream gives "ev" to the core group's events only. The objects are core Events, seen
		// through this API with upstream's field mapping (one store, as upstream).
		"Event": {storedAs: &schema.GroupResource{Resource: "events"}},
	}},
	{upstream: networkingv1.SchemeGroupVersion, install: networkingv1.AddToScheme, defaultOn: true, kinds: map[string]kindInfo{
		"Ingress":       {shortNames: []string{"ing"}},
		"NetworkPolicy": {shortNames: []string{"netpol"}},
	}},
	{upstream: storagev1.SchemeGroupVersion, install: storagev1.AddToScheme, defaultOn: true, kinds: map[string]kindInfo{
		"StorageClass": {shortNames: []string{"sc"}},
	}},
	{upstream: schedulingv1.SchemeGroupVersion, install: schedulingv1.AddToScheme, defaultOn: true, kinds: map[string]kindInfo{
		"PriorityClass": {shortNames: []string{"pc"}},
	}},
	{upstream: nodev1.SchemeGroupVersion, install: nodev1.AddToScheme, defaultOn: true},
	{upstream: discoveryv1.SchemeGroupVersion, install: discoveryv1.AddToScheme, defaultOn: true},
	{upstream: admissionregistrationv1.SchemeGroupVersion, install: admissionregistrationv1.AddToScheme, defaultOn: true},
	{upstream: apiextensionsv1.SchemeGroupVersion, install: apiextensionsv1.AddToScheme, defaultOn: true, kinds: map[string]kindInfo{
		"CustomResourceDefinition": {shortNames: []string{"crd", "crds"}, categories: []string{"api-extensions"}},
		"ConversionReview":         {skip: true},
	}},
	{upstream: flowcontrolv1.SchemeGroupVersion, install: flowcontrolv1.AddToScheme, defaultOn: true},
	// Review kinds are operations answered by the request's own identity and authorizer.
	{upstream: authenticationv1.SchemeGroupVersion, install: authenticationv1.AddToScheme, defaultOn: true, onlyListed: true, kinds: map[string]kindInfo{
		"SelfSubjectReview": {virtual: true},
		"TokenReview":       {virtual: true},
	}},
	// v1beta1 serves SelfSubjectReview only, as upstream 1.33 does: it stopped serving v1beta1
	// TokenReview in 1.22. The spec's "TokenReview versions v1 and v1beta1" are the wire formats of
	// the token webhook (services/authn/webhook, a client), not resources served here.
	{upstream: authenticationv1beta1.SchemeGroupVersion, install: authenticationv1beta1.AddToScheme, defaultOn: true, onlyListed: true, kinds: map[string]kindInfo{
		"SelfSubjectReview": {virtual: true},
	}},
	// Alpha: off unless --runtime-config turns it on (the spec's stability rules).
	{upstream: authenticationv1alpha1.SchemeGroupVersion, install: authenticationv1alpha1.AddToScheme, onlyListed: true, kinds: map[string]kindInfo{
		"SelfSubjectReview": {virtual: true},
	}},
	{upstream: authorizationv1.SchemeGroupVersion, install: authorizationv1.AddToScheme, defaultOn: true, onlyListed: true, kinds: map[string]kindInfo{
		"SelfSubjectAccessReview":  {virtual: true},
		"SubjectAccessReview":      {virtual: true},
		"LocalSubjectAccessReview": {virtual: true},
		"SelfSubjectRulesReview":   {virtual: true},
	}},
}

// clusterScoped names the kinds that are not namespaced.
var clusterScoped = map[string]bool{
	"Namespace": true, "Node": true, "PersistentVolume": true, "ComponentStatus": true,
	"ClusterRole": true, "ClusterRoleBinding": true, "CertificateSigningRequest": true,
	"ClusterTrustBundle": true, "StorageClass": true, "CSIDriver": true, "CSINode": true,
	"VolumeAttachment": true, "VolumeAttributesClass": true, "PriorityClass": true,
	"RuntimeClass": true, "MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
	"MutatingAdmissionPolicy": true, "MutatingAdmissionPolicyBinding": true,
	"CustomResourceDefinition": true, "FlowSchema": true, "PriorityLevelConfiguration": true,
	"IngressClass": true, "IPAddress": true, "ServiceCIDR": true, "APIService": true,
	"TokenReview": true, "SelfSubjectReview": true, "SubjectAccessReview": true,
	"SelfSubjectAccessReview": true, "SelfSubjectRulesReview": true,
}
