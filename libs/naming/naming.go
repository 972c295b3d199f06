// Package naming is the one place that spells identifiers derived from the product name. Every
// other package takes them from here, so a rename is a one-file change.
//
// Two naming profiles exist. "platform" (the default) serves upstream's kinds under Platform's
// names: groups end in platform.io, labels and annotations use platform.io, the control plane lives
// in platform-system. "kubernetes" speaks upstream's names instead (*.k8s.io groups,
// kubernetes.io labels, kube-system, application/vnd.kubernetes.protobuf), so that tools which
// hard-code them (client-go's typed clientsets, kubectl's certificate, auth and create commands,
// Helm, controller-runtime operators) work unchanged.
//
// The profile is chosen once, when this package is initialised, from the command line
// (--naming-profile=NAME or --naming-profile NAME) or else the PLATFORM_NAMING_PROFILE environment
// variable. Every package that imports this one is initialised after it, so identifiers derived
// from these at package level see the chosen profile. The commands register the flag (see
// libs/service.AddNamingProfileFlag) so that it is parsed and documented like any other.
package naming

import (
	"fmt"
	"os"
	"strings"
)

// Identifiers that are the same in every profile.
const (
	// Product is the neutral product word used inside identifiers that name Platform itself
	// (tracing service names, user agents, the CA's name), whatever the profile.
	Product = "platform"
	// UpstreamProtobufMediaType is upstream's name for the binary encoding. kubectl's and
	// client-go's typed clients send and request it for built-in kinds, so the gateway reads and
	// answers it as an alias of ProtobufMediaType (answering in whichever the client named).
	UpstreamProtobufMediaType = "application/vnd.kubernetes.protobuf"
	// RedisKeyPrefix starts every key the storage service writes to Redis. A Redis (or data
	// directory) holds the objects of one profile: groups differ between profiles, core kinds do not.
	RedisKeyPrefix = "platform"
	// NodeProxierUser is the identity of node proxies, bound to system:node-proxier (upstream's
	// spelling, system:kube-proxy, in every profile so that existing proxy credentials work).
	NodeProxierUser = "system:kube-proxy"
)

// ProfileFlag and ProfileEnv choose the naming profile.
const (
	ProfileFlag = "naming-profile"
	ProfileEnv  = "PLATFORM_NAMING_PROFILE"
)

// Profile names.
const (
	PlatformProfile   = "platform"
	KubernetesProfile = "kubernetes"
)

// Profiles lists the profile names, the default first.
var Profiles = []string{PlatformProfile, KubernetesProfile}

type namingProfile struct {
	// name spells the product in identifiers ("platform", "kubernetes"); short is its short form
	// used in namespaces and identities ("platform", "kube").
	name, short string
	// groupSuffix ends API group names; domain is the label, annotation and type domain.
	groupSuffix, domain string
}

var profiles = map[string]namingProfile{
	PlatformProfile:   {name: "platform", short: "platform", groupSuffix: "platform.io", domain: "platform.io"},
	KubernetesProfile: {name: "kubernetes", short: "kube", groupSuffix: "k8s.io", domain: "kubernetes.io"},
}

var (
	profileName = PlatformProfile
	profile     = profiles[PlatformProfile]
	// profileErr is the error of an unknown profile name; the commands' flag parsing reports it.
	profileErr error
)

func init() {
	name, source := profileFromArgs(os.Args[1:]), "--"+ProfileFlag
	if name == "" {
		name, source = os.Getenv(ProfileEnv), ProfileEnv
	}
	if name != "" {
		if p, ok := profiles[name]; ok {
			profileName, profile = name, p
		} else {
			profileErr = fmt.Errorf("%s: unknown naming profile %q (known: %s)", source, name, strings.Join(Profiles, ", "))
		}
	}
	apply()
}

// profileFromArgs finds --naming-profile in a command line (the last one wins, as flags do); it
// stops at "--", after which arguments are not flags.
func profileFromArgs(args []string) string {
	name := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if v, ok := strings.CutPrefix(a, "--"+ProfileFlag+"="); ok {
			name = v
		} else if a == "--"+ProfileFlag && i+1 < len(args) {
			name = args[i+1]
			i++
		}
	}
	return name
}

// ProfileName is the chosen naming profile.
func ProfileName() string { return profileName }

// CheckProfile reports whether value names the profile chosen at start-up (the flag's value must
// be the one this package read from the same command line), or the error of an unknown name.
func CheckProfile(value string) error {
	if profileErr != nil {
		return profileErr
	}
	if value != profileName {
		return fmt.Errorf("naming profile %q was chosen at start-up; %q cannot be set later", profileName, value)
	}
	return nil
}

// Identifiers spelled differently in each profile; apply sets them.
var (
	// GroupSuffix ends the name of every built-in named API group (platform.io; upstream k8s.io).
	// The short historical groups ("apps", "batch", "autoscaling", "policy") have none.
	GroupSuffix string
	// Domain is the domain of built-in labels, annotations, finalizers, taints, Secret types and
	// signer names (platform.io; upstream kubernetes.io).
	Domain string
	// ProtobufMediaType is the binary media type of the resource API
	// (application/vnd.platform.protobuf; upstream application/vnd.kubernetes.protobuf).
	ProtobufMediaType string
	// SystemNamespace holds the control plane's own objects (upstream kube-system).
	SystemNamespace string
	// PublicNamespace is readable by everyone, authenticated or not (upstream kube-public).
	PublicNamespace string
	// ExecInfoEnv is the variable that hands exec credential plugins their input (upstream
	// KUBERNETES_EXEC_INFO).
	ExecInfoEnv string
)

// ProtobufMagic starts every binary (Protobuf envelope) body.
var ProtobufMagic = [4]byte{0x6b, 0x38, 0x73, 0x00}

// upstreamGroupSuffix ends the names of upstream's built-in API groups; Platform serves the same
// kinds under GroupSuffix instead.
const upstreamGroupSuffix = ".k8s.io"

// MetaGroup is the group of the API's own meta kinds (Table, PartialObjectMetadata, Status).
var MetaGroup string

// Group maps the name of an upstream built-in API group to the name Platform serves it under:
// "rbac.authorization.k8s.io" becomes "rbac.authorization.platform.io"; the core group ("") and
// the short historical names ("apps", "batch", "autoscaling", "policy") stay as they are.
func Group(upstream string) string {
	if GroupSuffix == upstreamGroupSuffix[1:] {
		return upstream
	}
	if base, ok := strings.CutSuffix(upstream, upstreamGroupSuffix); ok {
		return base + "." + GroupSuffix
	}
	return upstream
}

// Identifiers of the access-control objects (upstream spells them with kubernetes.io, k8s.io or
// kube). Everything that reads or writes them takes them from here.
var (
	// SecretTypeServiceAccountToken is the type of Secrets that hold a service account's
	// non-expiring token (upstream kubernetes.io/service-account-token).
	SecretTypeServiceAccountToken string
	// ServiceAccountNameAnnotation and ServiceAccountUIDAnnotation name the account a token Secret
	// belongs to.
	ServiceAccountNameAnnotation string
	ServiceAccountUIDAnnotation  string
	// LegacyTokenLastUsedLabel and LegacyTokenInvalidSinceLabel are the labels upstream's legacy
	// token tracking and clean-up put on token Secrets.
	LegacyTokenLastUsedLabel     string
	LegacyTokenInvalidSinceLabel string
	// LegacyServiceAccountIssuer is the issuer of Secret-based service account tokens (upstream
	// kubernetes/serviceaccount).
	LegacyServiceAccountIssuer string
	// ServiceAccountClaimsKey is the private claim of bound service account tokens that carries the
	// namespace, account, bound objects and node (upstream kubernetes.io).
	ServiceAccountClaimsKey string
	// LegacyServiceAccountClaimPrefix starts the private claims of Secret-based tokens
	// (upstream kubernetes.io/serviceaccount/).
	LegacyServiceAccountClaimPrefix string
	// SecretTypeBootstrapToken is the type of bootstrap token Secrets (upstream
	// bootstrap.kubernetes.io/token).
	SecretTypeBootstrapToken string
	// ControllerManagerUser is the identity of the controllers service (upstream
	// system:kube-controller-manager).
	ControllerManagerUser string
)

// UserExtraKey is the key of an authenticated user's extra attribute name (upstream
// authentication.kubernetes.io/<name>, e.g. pod-name, pod-uid, node-name, node-uid, credential-id).
func UserExtraKey(name string) string {
	return "authentication." + Domain + "/" + name
}

// Identifiers of the default RBAC policy, the Node authorizer and the built-in certificate
// signers (upstream spells them with kubernetes.io or kube).
var (
	// AutoupdateAnnotation on a default RBAC object says whether start-up reconciliation may add
	// missing permissions, subjects, labels and annotations to it ("false" protects it); upstream
	// rbac.authorization.kubernetes.io/autoupdate.
	AutoupdateAnnotation string
	// BootstrappingLabel marks the objects of the default RBAC policy (value "rbac-defaults");
	// upstream kubernetes.io/bootstrapping.
	BootstrappingLabel string
	// NodeLeaseNamespace holds the heartbeat Leases of nodes, one per node and named after it;
	// upstream kube-node-lease.
	NodeLeaseNamespace string
	// MirrorPodAnnotation marks the API mirror of a static pod a node runs; such pods give the
	// node no access to what they reference (upstream kubernetes.io/config.mirror).
	MirrorPodAnnotation string
	// SignerAPIServerClient issues client certificates for the API (the spec's
	// platform.io/platform-apiserver-client; upstream kubernetes.io/kube-apiserver-client).
	SignerAPIServerClient string
	// SignerAPIServerClientKubelet issues the client certificates nodes authenticate with
	// (upstream kubernetes.io/kube-apiserver-client-kubelet).
	SignerAPIServerClientKubelet string
	// SignerKubeletServing issues the serving certificates of node agents (upstream
	// kubernetes.io/kubelet-serving).
	SignerKubeletServing string
	// SignerLegacyUnknown is the signer of requests made before signer names existed; it cannot
	// be requested through the v1 API (upstream kubernetes.io/legacy-unknown).
	SignerLegacyUnknown string
)

// Identifiers of the storage, network and node admission plugins and the quota system (upstream
// spells them with kubernetes.io).
var (
	// IsDefaultStorageClassAnnotation marks the StorageClass that claims without a class get
	// (value "true"); upstream storageclass.kubernetes.io/is-default-class.
	IsDefaultStorageClassAnnotation string
	// BetaIsDefaultStorageClassAnnotation is the beta spelling of the same, still honoured
	// (upstream storageclass.beta.kubernetes.io/is-default-class).
	BetaIsDefaultStorageClassAnnotation string
	// BetaStorageClassAnnotation names a claim's class before spec.storageClassName existed; it
	// wins over the field (upstream volume.beta.kubernetes.io/storage-class).
	BetaStorageClassAnnotation string
	// IsDefaultIngressClassAnnotation marks the IngressClass that Ingresses without a class get
	// (value "true"); upstream ingressclass.kubernetes.io/is-default-class.
	IsDefaultIngressClassAnnotation string
	// IngressClassAnnotation is the deprecated per-Ingress class annotation; an Ingress that has
	// it is not defaulted (upstream kubernetes.io/ingress.class).
	IngressClassAnnotation string
	// PVCProtectionFinalizer and PVProtectionFinalizer keep claims and volumes in use from being
	// removed (upstream kubernetes.io/pvc-protection and kubernetes.io/pv-protection).
	PVCProtectionFinalizer string
	PVProtectionFinalizer  string
	// TaintNodeNotReady is the taint of a node that is not ready; new nodes start with it
	// (upstream node.kubernetes.io/not-ready).
	TaintNodeNotReady string
	// ResourceDefaultNamespacePrefix starts the names of the platform's own (native) resource
	// names; other prefixed names are extended resources (upstream kubernetes.io/).
	ResourceDefaultNamespacePrefix string
)

// Node labels that NodeRestriction lets a node set on its own Node, and the label domains it
// reserves (upstream spells them with kubernetes.io).
var (
	// LabelHostname, LabelOS and LabelArch: upstream kubernetes.io/hostname, kubernetes.io/os,
	// kubernetes.io/arch.
	LabelHostname string
	LabelOS       string
	LabelArch     string
	// LabelBetaOS and LabelBetaArch: the deprecated beta.kubernetes.io/os and
	// beta.kubernetes.io/arch.
	LabelBetaOS   string
	LabelBetaArch string
	// LabelInstanceType (deprecated beta.kubernetes.io/instance-type) and
	// LabelInstanceTypeStable (node.kubernetes.io/instance-type).
	LabelInstanceType       string
	LabelInstanceTypeStable string
	// LabelFailureDomainBetaZone and LabelFailureDomainBetaRegion: the deprecated
	// failure-domain.beta.kubernetes.io/zone and failure-domain.beta.kubernetes.io/region.
	LabelFailureDomainBetaZone   string
	LabelFailureDomainBetaRegion string
	// LabelTopologyZone and LabelTopologyRegion: topology.kubernetes.io/zone and
	// topology.kubernetes.io/region.
	LabelTopologyZone   string
	LabelTopologyRegion string
	// LabelNamespaceKubelet and LabelNamespaceNode are label domains a node may use freely on its
	// own Node (upstream kubelet.kubernetes.io and node.kubernetes.io, subdomains included).
	LabelNamespaceKubelet string
	LabelNamespaceNode    string
	// LabelNamespaceNodeRestriction is the label domain no node may set, so that administrators
	// can steer workloads by labels nodes cannot forge (upstream node-restriction.kubernetes.io).
	LabelNamespaceNodeRestriction string
)

// Identifiers of the pod admission plugins (upstream spells them with kubernetes.io or kube).
var (
	// TaintNodeUnreachable is the taint of a node whose agent stopped reporting (upstream
	// node.kubernetes.io/unreachable).
	TaintNodeUnreachable string
	// TaintNodeMemoryPressure is the taint of a node short of memory (upstream
	// node.kubernetes.io/memory-pressure).
	TaintNodeMemoryPressure string
	// NamespaceNodeSelectorAnnotation holds a namespace's node selector that PodNodeSelector
	// merges into its pods (upstream scheduler.alpha.kubernetes.io/node-selector).
	NamespaceNodeSelectorAnnotation string
	// NamespaceDefaultTolerationsAnnotation and NamespaceTolerationsWhitelistAnnotation hold a
	// namespace's default and allowed tolerations (JSON lists) for PodTolerationRestriction
	// (upstream scheduler.alpha.kubernetes.io/defaultTolerations and
	// scheduler.alpha.kubernetes.io/tolerationsWhitelist).
	NamespaceDefaultTolerationsAnnotation   string
	NamespaceTolerationsWhitelistAnnotation string
	// ServiceAccountTokenMountPath is where the ServiceAccount plugin mounts the projected token
	// volume in containers (upstream /var/run/secrets/kubernetes.io/serviceaccount).
	ServiceAccountTokenMountPath string
	// RootCAConfigMap is the ConfigMap in every namespace that carries the cluster CA bundle
	// (key ca.crt) projected into pods' token volumes (upstream kube-root-ca.crt).
	RootCAConfigMap string
	// ServiceAccountTokenVolumePrefix starts the names of the projected token volumes the
	// ServiceAccount plugin adds to pods (upstream kube-api-access-).
	ServiceAccountTokenVolumePrefix string
	// EnforceMountableSecretsAnnotation on a service account ("true") limits its pods to the
	// Secrets it lists (upstream kubernetes.io/enforce-mountable-secrets).
	EnforceMountableSecretsAnnotation string
	// LimitRangerAnnotation records on a pod which defaults LimitRanger set (upstream
	// kubernetes.io/limit-ranger).
	LimitRangerAnnotation string
	// PodSecurityLabelPrefix starts the namespace labels that choose Pod Security levels
	// (enforce, enforce-version, audit, audit-version, warn, warn-version) and the PodSecurity
	// plugin's audit annotations (upstream pod-security.kubernetes.io/).
	PodSecurityLabelPrefix string
	// ImagePolicyAnnotationInfix marks the pod annotations ImagePolicyWebhook forwards to its
	// backend (keys matching *.image-policy.<suffix>/*; upstream .image-policy.k8s.io/).
	ImagePolicyAnnotationInfix string
)

// DescriptionAnnotation holds a human-readable description of an object, such as the one the
// root CA publisher puts on RootCAConfigMap (upstream kubernetes.io/description).
var DescriptionAnnotation string

// Identifiers of the aggregation layer (upstream spells them with kube and kubernetes.io).
var (
	// AggregatorAutomanagedLabel marks the APIServices the gateway keeps for the group versions it
	// serves itself ("onstart" for built-in ones, "true" for custom resources'); upstream
	// kube-aggregator.kubernetes.io/automanaged.
	AggregatorAutomanagedLabel string
	// AggregatorUser is the identity the availability checks present to extension API servers in
	// the front-proxy headers (with group system:masters); upstream system:kube-aggregator.
	AggregatorUser string
)

// APIServerServiceName is the Service in the default namespace through which in-cluster clients
// reach the API (its cluster IP, port 443): "kubernetes" in every profile, because client-go's
// in-cluster configuration reads KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, which node
// agents derive from this name.
const APIServerServiceName = "kubernetes"

// Identifiers of the API server's own Service, its Endpoints and EndpointSlice (upstream spells
// them with kubernetes.io, kubernetes or kube).
var (
	// APIServerServiceProvider is the value of that Service's "provider" label (upstream
	// kubernetes; its other label is component=apiserver).
	APIServerServiceProvider string
	// APIServerFieldManager is the field manager of the gateway's writes of that Service and its
	// endpoints (upstream kube-apiserver).
	APIServerFieldManager string
	// LabelServiceName names the Service an EndpointSlice belongs to (upstream
	// kubernetes.io/service-name).
	LabelServiceName string
	// LabelSkipMirror on an Endpoints object keeps the EndpointSlice mirroring controller away from
	// it (upstream endpointslice.kubernetes.io/skip-mirror).
	LabelSkipMirror string
)

// apply sets every identifier from the chosen profile.
func apply() {
	GroupSuffix, Domain = profile.groupSuffix, profile.domain
	ProtobufMediaType = "application/vnd." + profile.name + ".protobuf"
	SystemNamespace = profile.short + "-system"
	PublicNamespace = profile.short + "-public"
	ExecInfoEnv = strings.ToUpper(profile.name) + "_EXEC_INFO"
	MetaGroup = "meta." + GroupSuffix
	SecretTypeServiceAccountToken = Domain + "/service-account-token"
	ServiceAccountNameAnnotation = Domain + "/service-account.name"
	ServiceAccountUIDAnnotation = Domain + "/service-account.uid"
	LegacyTokenLastUsedLabel = Domain + "/legacy-token-last-used"
	LegacyTokenInvalidSinceLabel = Domain + "/legacy-token-invalid-since"
	LegacyServiceAccountIssuer = profile.name + "/serviceaccount"
	ServiceAccountClaimsKey = Domain
	LegacyServiceAccountClaimPrefix = Domain + "/serviceaccount/"
	SecretTypeBootstrapToken = "bootstrap." + Domain + "/token"
	ControllerManagerUser = "system:" + profile.short + "-controller-manager"
	AutoupdateAnnotation = "rbac.authorization." + Domain + "/autoupdate"
	BootstrappingLabel = Domain + "/bootstrapping"
	NodeLeaseNamespace = profile.short + "-node-lease"
	MirrorPodAnnotation = Domain + "/config.mirror"
	SignerAPIServerClient = Domain + "/" + profile.short + "-apiserver-client"
	SignerAPIServerClientKubelet = Domain + "/kube-apiserver-client-kubelet"
	SignerKubeletServing = Domain + "/kubelet-serving"
	SignerLegacyUnknown = Domain + "/legacy-unknown"
	IsDefaultStorageClassAnnotation = "storageclass." + Domain + "/is-default-class"
	BetaIsDefaultStorageClassAnnotation = "storageclass.beta." + Domain + "/is-default-class"
	BetaStorageClassAnnotation = "volume.beta." + Domain + "/storage-class"
	IsDefaultIngressClassAnnotation = "ingressclass." + Domain + "/is-default-class"
	IngressClassAnnotation = Domain + "/ingress.class"
	PVCProtectionFinalizer = Domain + "/pvc-protection"
	PVProtectionFinalizer = Domain + "/pv-protection"
	TaintNodeNotReady = "node." + Domain + "/not-ready"
	ResourceDefaultNamespacePrefix = Domain + "/"
	LabelHostname = Domain + "/hostname"
	LabelOS = Domain + "/os"
	LabelArch = Domain + "/arch"
	LabelBetaOS = "beta." + Domain + "/os"
	LabelBetaArch = "beta." + Domain + "/arch"
	LabelInstanceType = "beta." + Domain + "/instance-type"
	LabelInstanceTypeStable = "node." + Domain + "/instance-type"
	LabelFailureDomainBetaZone = "failure-domain.beta." + Domain + "/zone"
	LabelFailureDomainBetaRegion = "failure-domain.beta." + Domain + "/region"
	LabelTopologyZone = "topology." + Domain + "/zone"
	LabelTopologyRegion = "topology." + Domain + "/region"
	LabelNamespaceKubelet = "kubelet." + Domain
	LabelNamespaceNode = "node." + Domain
	LabelNamespaceNodeRestriction = "node-restriction." + Domain
	TaintNodeUnreachable = "node." + Domain + "/unreachable"
	TaintNodeMemoryPressure = "node." + Domain + "/memory-pressure"
	NamespaceNodeSelectorAnnotation = "scheduler.alpha." + Domain + "/node-selector"
	NamespaceDefaultTolerationsAnnotation = "scheduler.alpha." + Domain + "/defaultTolerations"
	NamespaceTolerationsWhitelistAnnotation = "scheduler.alpha." + Domain + "/tolerationsWhitelist"
	ServiceAccountTokenMountPath = "/var/run/secrets/" + Domain + "/serviceaccount"
	RootCAConfigMap = profile.short + "-root-ca.crt"
	ServiceAccountTokenVolumePrefix = profile.short + "-api-access-"
	EnforceMountableSecretsAnnotation = Domain + "/enforce-mountable-secrets"
	LimitRangerAnnotation = Domain + "/limit-ranger"
	PodSecurityLabelPrefix = "pod-security." + Domain + "/"
	ImagePolicyAnnotationInfix = ".image-policy." + GroupSuffix + "/"
	DescriptionAnnotation = Domain + "/description"
	AggregatorAutomanagedLabel = profile.short + "-aggregator." + Domain + "/automanaged"
	AggregatorUser = "system:" + profile.short + "-aggregator"
	APIServerServiceProvider = profile.name
	APIServerFieldManager = profile.short + "-apiserver"
	LabelServiceName = Domain + "/service-name"
	LabelSkipMirror = "endpointslice." + Domain + "/skip-mirror"
}
