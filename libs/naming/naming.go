// Package naming is the one place that spells identifiers derived from the product name. Every
// other package takes them from here, so a rename is a one-file change.
package naming

import "strings"

// The product's name as it appears inside identifiers.
const (
	// Product is the neutral product word used inside identifiers.
	Product = "platform"
	// GroupSuffix ends the name of every built-in API group ("apps" is the exception upstream
	// keeps; named groups such as "rbac.platform.io" use it).
	GroupSuffix = "platform.io"
	// ProtobufMediaType is the binary media type of the resource API.
	ProtobufMediaType = "application/vnd.platform.protobuf"
	// UpstreamProtobufMediaType is upstream's name for the same binary encoding. kubectl's and
	// client-go's typed clients send and request it for built-in kinds, so the gateway reads and
	// answers it as an alias of ProtobufMediaType (answering in whichever the client named).
	UpstreamProtobufMediaType = "application/vnd.kubernetes.protobuf"
	// SystemNamespace holds the control plane's own objects.
	SystemNamespace = "platform-system"
	// PublicNamespace is readable by everyone, authenticated or not.
	PublicNamespace = "platform-public"
	// ExecInfoEnv is the variable that hands exec credential plugins their input.
	ExecInfoEnv = "PLATFORM_EXEC_INFO"
	// RedisKeyPrefix starts every key the storage service writes to Redis.
	RedisKeyPrefix = "platform"
)

// ProtobufMagic starts every binary (Protobuf envelope) body.
var ProtobufMagic = [4]byte{0x6b, 0x38, 0x73, 0x00}

// upstreamGroupSuffix ends the names of upstream's built-in API groups; Platform serves the same
// kinds under GroupSuffix instead.
const upstreamGroupSuffix = ".k8s.io"

// MetaGroup is the group of the API's own meta kinds (Table, PartialObjectMetadata, Status).
const MetaGroup = "meta." + GroupSuffix

// Group maps the name of an upstream built-in API group to the name Platform serves it under:
// "rbac.authorization.k8s.io" becomes "rbac.authorization.platform.io"; the core group ("") and
// the short historical names ("apps", "batch", "autoscaling", "policy") stay as they are.
func Group(upstream string) string {
	if base, ok := strings.CutSuffix(upstream, upstreamGroupSuffix); ok {
		return base + "." + GroupSuffix
	}
	return upstream
}

// Identifiers of the access-control objects (upstream spells them with kubernetes.io, k8s.io or
// kube). Everything that reads or writes them takes them from here.
const (
	// SecretTypeServiceAccountToken is the type of Secrets that hold a service account's
	// non-expiring token (upstream kubernetes.io/service-account-token).
	SecretTypeServiceAccountToken = GroupSuffix + "/service-account-token"
	// ServiceAccountNameAnnotation and ServiceAccountUIDAnnotation name the account a token Secret
	// belongs to.
	ServiceAccountNameAnnotation = GroupSuffix + "/service-account.name"
	ServiceAccountUIDAnnotation  = GroupSuffix + "/service-account.uid"
	// LegacyTokenLastUsedLabel and LegacyTokenInvalidSinceLabel are the labels upstream's legacy
	// token tracking and clean-up put on token Secrets.
	LegacyTokenLastUsedLabel     = GroupSuffix + "/legacy-token-last-used"
	LegacyTokenInvalidSinceLabel = GroupSuffix + "/legacy-token-invalid-since"
	// LegacyServiceAccountIssuer is the issuer of Secret-based service account tokens (upstream
	// kubernetes/serviceaccount).
	LegacyServiceAccountIssuer = Product + "/serviceaccount"
	// ServiceAccountClaimsKey is the private claim of bound service account tokens that carries the
	// namespace, account, bound objects and node (upstream kubernetes.io).
	ServiceAccountClaimsKey = GroupSuffix
	// LegacyServiceAccountClaimPrefix starts the private claims of Secret-based tokens
	// (upstream kubernetes.io/serviceaccount/).
	LegacyServiceAccountClaimPrefix = GroupSuffix + "/serviceaccount/"
	// SecretTypeBootstrapToken is the type of bootstrap token Secrets (upstream
	// bootstrap.kubernetes.io/token).
	SecretTypeBootstrapToken = "bootstrap." + GroupSuffix + "/token"
	// ControllerManagerUser is the identity of the controllers service (upstream
	// system:kube-controller-manager).
	ControllerManagerUser = "system:" + Product + "-controller-manager"
)

// UserExtraKey is the key of an authenticated user's extra attribute name (upstream
// authentication.kubernetes.io/<name>, e.g. pod-name, pod-uid, node-name, node-uid, credential-id).
func UserExtraKey(name string) string {
	return "authentication." + GroupSuffix + "/" + name
}

// Identifiers of the default RBAC policy, the Node authorizer and the built-in certificate
// signers (upstream spells them with kubernetes.io or kube).
const (
	// AutoupdateAnnotation on a default RBAC object says whether start-up reconciliation may add
	// missing permissions, subjects, labels and annotations to it ("false" protects it); upstream
	// rbac.authorization.kubernetes.io/autoupdate.
	AutoupdateAnnotation = "rbac.authorization." + GroupSuffix + "/autoupdate"
	// BootstrappingLabel marks the objects of the default RBAC policy (value "rbac-defaults");
	// upstream kubernetes.io/bootstrapping.
	BootstrappingLabel = GroupSuffix + "/bootstrapping"
	// NodeLeaseNamespace holds the heartbeat Leases of nodes, one per node and named after it;
	// upstream kube-node-lease.
	NodeLeaseNamespace = Product + "-node-lease"
	// MirrorPodAnnotation marks the API mirror of a static pod a node runs; such pods give the
	// node no access to what they reference (upstream kubernetes.io/config.mirror).
	MirrorPodAnnotation = GroupSuffix + "/config.mirror"
	// NodeProxierUser is the identity of node proxies, bound to system:node-proxier (upstream's
	// spelling, system:kube-proxy, kept so existing proxy credentials work).
	NodeProxierUser = "system:kube-proxy"
	// SignerAPIServerClient issues client certificates for the API (the spec's
	// platform.io/platform-apiserver-client; upstream kubernetes.io/kube-apiserver-client).
	SignerAPIServerClient = GroupSuffix + "/" + Product + "-apiserver-client"
	// SignerAPIServerClientKubelet issues the client certificates nodes authenticate with
	// (upstream kubernetes.io/kube-apiserver-client-kubelet).
	SignerAPIServerClientKubelet = GroupSuffix + "/kube-apiserver-client-kubelet"
	// SignerKubeletServing issues the serving certificates of node agents (upstream
	// kubernetes.io/kubelet-serving).
	SignerKubeletServing = GroupSuffix + "/kubelet-serving"
	// SignerLegacyUnknown is the signer of requests made before signer names existed; it cannot
	// be requested through the v1 API (upstream kubernetes.io/legacy-unknown).
	SignerLegacyUnknown = GroupSuffix + "/legacy-unknown"
)

// Identifiers of the storage, network and node admission plugins and the quota system (upstream
// spells them with kubernetes.io).
const (
	// IsDefaultStorageClassAnnotation marks the StorageClass that claims without a class get
	// (value "true"); upstream storageclass.kubernetes.io/is-default-class.
	IsDefaultStorageClassAnnotation = "storageclass." + GroupSuffix + "/is-default-class"
	// BetaIsDefaultStorageClassAnnotation is the beta spelling of the same, still honoured
	// (upstream storageclass.beta.kubernetes.io/is-default-class).
	BetaIsDefaultStorageClassAnnotation = "storageclass.beta." + GroupSuffix + "/is-default-class"
	// BetaStorageClassAnnotation names a claim's class before spec.storageClassName existed; it
	// wins over the field (upstream volume.beta.kubernetes.io/storage-class).
	BetaStorageClassAnnotation = "volume.beta." + GroupSuffix + "/storage-class"
	// IsDefaultIngressClassAnnotation marks the IngressClass that Ingresses without a class get
	// (value "true"); upstream ingressclass.kubernetes.io/is-default-class.
	IsDefaultIngressClassAnnotation = "ingressclass." + GroupSuffix + "/is-default-class"
	// IngressClassAnnotation is the deprecated per-Ingress class annotation; an Ingress that has
	// it is not defaulted (upstream kubernetes.io/ingress.class).
	IngressClassAnnotation = GroupSuffix + "/ingress.class"
	// PVCProtectionFinalizer and PVProtectionFinalizer keep claims and volumes in use from being
	// removed (upstream kubernetes.io/pvc-protection and kubernetes.io/pv-protection).
	PVCProtectionFinalizer = GroupSuffix + "/pvc-protection"
	PVProtectionFinalizer  = GroupSuffix + "/pv-protection"
	// TaintNodeNotReady is the taint of a node that is not ready; new nodes start with it
	// (upstream node.kubernetes.io/not-ready).
	TaintNodeNotReady = "node." + GroupSuffix + "/not-ready"
	// ResourceDefaultNamespacePrefix starts the names of the platform's own (native) resource
	// names; other prefixed names are extended resources (upstream kubernetes.io/).
	ResourceDefaultNamespacePrefix = GroupSuffix + "/"
)

// Node labels that NodeRestriction lets a node set on its own Node, and the label domains it
// reserves (upstream spells them with kubernetes.io).
const (
	// LabelHostname, LabelOS and LabelArch: upstream kubernetes.io/hostname, kubernetes.io/os,
	// kubernetes.io/arch.
	LabelHostname = GroupSuffix + "/hostname"
	LabelOS       = GroupSuffix + "/os"
	LabelArch     = GroupSuffix + "/arch"
	// LabelBetaOS and LabelBetaArch: the deprecated beta.kubernetes.io/os and
	// beta.kubernetes.io/arch.
	LabelBetaOS   = "beta." + GroupSuffix + "/os"
	LabelBetaArch = "beta." + GroupSuffix + "/arch"
	// LabelInstanceType (deprecated beta.kubernetes.io/instance-type) and
	// LabelInstanceTypeStable (node.kubernetes.io/instance-type).
	LabelInstanceType       = "beta." + GroupSuffix + "/instance-type"
	LabelInstanceTypeStable = "node." + GroupSuffix + "/instance-type"
	// LabelFailureDomainBetaZone and LabelFailureDomainBetaRegion: the deprecated
	// failure-domain.beta.kubernetes.io/zone and failure-domain.beta.kubernetes.io/region.
	LabelFailureDomainBetaZone   = "failure-domain.beta." + GroupSuffix + "/zone"
	LabelFailureDomainBetaRegion = "failure-domain.beta." + GroupSuffix + "/region"
	// LabelTopologyZone and LabelTopologyRegion: topology.kubernetes.io/zone and
	// topology.kubernetes.io/region.
	LabelTopologyZone   = "topology." + GroupSuffix + "/zone"
	LabelTopologyRegion = "topology." + GroupSuffix + "/region"
	// LabelNamespaceKubelet and LabelNamespaceNode are label domains a node may use freely on its
	// own Node (upstream kubelet.kubernetes.io and node.kubernetes.io, subdomains included).
	LabelNamespaceKubelet = "kubelet." + GroupSuffix
	LabelNamespaceNode    = "node." + GroupSuffix
	// LabelNamespaceNodeRestriction is the label domain no node may set, so that administrators
	// can steer workloads by labels nodes cannot forge (upstream node-restriction.kubernetes.io).
	LabelNamespaceNodeRestriction = "node-restriction." + GroupSuffix
)

// Identifiers of the pod admission plugins (upstream spells them with kubernetes.io or kube).
const (
	// TaintNodeUnreachable is the taint of a node whose agent stopped reporting (upstream
	// node.kubernetes.io/unreachable).
	TaintNodeUnreachable = "node." + GroupSuffix + "/unreachable"
	// TaintNodeMemoryPressure is the taint of a node short of memory (upstream
	// node.kubernetes.io/memory-pressure).
	TaintNodeMemoryPressure = "node." + GroupSuffix + "/memory-pressure"
	// NamespaceNodeSelectorAnnotation holds a namespace's node selector that PodNodeSelector
	// merges into its pods (upstream scheduler.alpha.kubernetes.io/node-selector).
	NamespaceNodeSelectorAnnotation = "scheduler.alpha." + GroupSuffix + "/node-selector"
	// NamespaceDefaultTolerationsAnnotation and NamespaceTolerationsWhitelistAnnotation hold a
	// namespace's default and allowed tolerations (JSON lists) for PodTolerationRestriction
	// (upstream scheduler.alpha.kubernetes.io/defaultTolerations and
	// scheduler.alpha.kubernetes.io/tolerationsWhitelist).
	NamespaceDefaultTolerationsAnnotation   = "scheduler.alpha." + GroupSuffix + "/defaultTolerations"
	NamespaceTolerationsWhitelistAnnotation = "scheduler.alpha." + GroupSuffix + "/tolerationsWhitelist"
	// ServiceAccountTokenMountPath is where the ServiceAccount plugin mounts the projected token
	// volume in containers (upstream /var/run/secrets/kubernetes.io/serviceaccount).
	ServiceAccountTokenMountPath = "/var/run/secrets/" + GroupSuffix + "/serviceaccount"
	// RootCAConfigMap is the ConfigMap in every namespace that carries the cluster CA bundle
	// (key ca.crt) projected into pods' token volumes (upstream kube-root-ca.crt).
	RootCAConfigMap = Product + "-root-ca.crt"
	// ServiceAccountTokenVolumePrefix starts the names of the projected token volumes the
	// ServiceAccount plugin adds to pods (upstream kube-api-access-).
	ServiceAccountTokenVolumePrefix = Product + "-api-access-"
	// EnforceMountableSecretsAnnotation on a service account ("true") limits its pods to the
	// Secrets it lists (upstream kubernetes.io/enforce-mountable-secrets).
	EnforceMountableSecretsAnnotation = GroupSuffix + "/enforce-mountable-secrets"
	// LimitRangerAnnotation records on a pod which defaults LimitRanger set (upstream
	// kubernetes.io/limit-ranger).
	LimitRangerAnnotation = GroupSuffix + "/limit-ranger"
	// PodSecurityLabelPrefix starts the namespace labels that choose Pod Security levels
	// (enforce, enforce-version, audit, audit-version, warn, warn-version) and the PodSecurity
	// plugin's audit annotations (upstream pod-security.kubernetes.io/).
	PodSecurityLabelPrefix = "pod-security." + GroupSuffix + "/"
	// ImagePolicyAnnotationInfix marks the pod annotations ImagePolicyWebhook forwards to its
	// backend (keys matching *.image-policy.<suffix>/*; upstream .image-policy.k8s.io/).
	ImagePolicyAnnotationInfix = ".image-policy." + GroupSuffix + "/"
)

// DescriptionAnnotation holds a human-readable description of an object, such as the one the
// root CA publisher puts on RootCAConfigMap (upstream kubernetes.io/description).
const DescriptionAnnotation = GroupSuffix + "/description"
