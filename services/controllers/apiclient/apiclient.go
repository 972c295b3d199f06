// Package apiclient builds the clients the controllers use to talk to the gateway like any other
// client: client-go's typed clients, a dynamic client and a discovery client over one
// rest.Config, with the groups Platform renames that the controllers use
// (rbac.authorization.platform.io, coordination.platform.io, certificates.platform.io,
// authorization.platform.io) reached under their Platform names.
//
// client-go's typed clients decode responses and encode list options through the process-wide
// scheme k8s.io/client-go/kubernetes/scheme.Scheme (the generated clients name it directly). The
// package therefore registers the kinds of the renamed groups it serves under their Platform
// group versions in that scheme, once, at init: the Go types are the same, only the apiVersion
// differs (in the JSON document, or in the Protobuf envelope's TypeMeta, from which the Protobuf
// decoder picks the Go type). Registration only adds names, so other users of the scheme are
// unaffected.
//
// Encoding: the typed clients (the clientset, its informers, and the renamed groups' clients)
// speak Protobuf, as upstream's kube-controller-manager does (ContentType, AcceptContentTypes):
// request bodies are Protobuf (patches keep their patch content types), and lists, gets and watch
// streams are answered in Protobuf, which costs a fraction of JSON's decoding. Every built-in kind
// the controllers reach through typed clients is served in Protobuf by the gateway. The dynamic
// client (unstructured objects, custom resources, which have no Protobuf encoding) and discovery
// speak JSON (JSONContentType), from a JSON copy of the configuration.
package apiclient

import (
	"fmt"
	"reflect"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	certificatesv1client "k8s.io/client-go/kubernetes/typed/certificates/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	rbacv1client "k8s.io/client-go/kubernetes/typed/rbac/v1"
	"k8s.io/client-go/rest"

	"platform.io/libs/naming"
)

// The encodings of the clients.
const (
	// ContentType is the encoding of the typed clients' request bodies: Protobuf, under upstream's
	// media type (the one client-go's serializers know; the gateway accepts it in both naming
	// profiles and answers in it).
	ContentType = naming.UpstreamProtobufMediaType
	// AcceptContentTypes is what the typed clients accept: Protobuf, and JSON should a response
	// have no Protobuf form (upstream kube-controller-manager's setting).
	AcceptContentTypes = ContentType + "," + JSONContentType
	// JSONContentType is what the dynamic and discovery clients send and accept.
	JSONContentType = runtime.ContentTypeJSON
)

// RBACGroupVersion and CoordinationGroupVersion are the Platform names of the upstream group
// versions the controllers use through typed clients.
var (
	RBACGroupVersion          = schema.GroupVersion{Group: naming.Group(rbacv1.GroupName), Version: "v1"}
	CoordinationGroupVersion  = schema.GroupVersion{Group: naming.Group(coordinationv1.GroupName), Version: "v1"}
	CertificatesGroupVersion  = schema.GroupVersion{Group: naming.Group(certificatesv1.GroupName), Version: "v1"}
	AuthorizationGroupVersion = schema.GroupVersion{Group: naming.Group(authorizationv1.GroupName), Version: "v1"}
)

func init() {
	if err := registerRenamed(scheme.Scheme, rbacv1.SchemeGroupVersion, RBACGroupVersion, rbacv1.AddToScheme); err != nil {
		panic(err)
	}
	if err := registerRenamed(scheme.Scheme, coordinationv1.SchemeGroupVersion, CoordinationGroupVersion, coordinationv1.AddToScheme); err != nil {
		panic(err)
	}
	if err := registerRenamed(scheme.Scheme, certificatesv1.SchemeGroupVersion, CertificatesGroupVersion, certificatesv1.AddToScheme); err != nil {
		panic(err)
	}
	if err := registerRenamed(scheme.Scheme, authorizationv1.SchemeGroupVersion, AuthorizationGroupVersion, authorizationv1.AddToScheme); err != nil {
		panic(err)
	}
}

// registerRenamed registers every kind of the upstream group version (including the list and
// option kinds the typed clients encode) under the Platform group version as well.
func registerRenamed(s *runtime.Scheme, upstream, platform schema.GroupVersion, install func(*runtime.Scheme) error) error {
	if upstream == platform {
		return nil
	}
	tmp := runtime.NewScheme()
	if err := install(tmp); err != nil {
		return fmt.Errorf("installing %s: %w", upstream, err)
	}
	for kind, t := range tmp.KnownTypes(upstream) {
		obj, ok := reflect.New(t).Interface().(runtime.Object)
		if !ok {
			continue
		}
		s.AddKnownTypeWithName(platform.WithKind(kind), obj)
	}
	return nil
}

// Clients are the clients of one identity against the gateway.
type Clients struct {
	// Kubernetes is client-go's clientset whose RbacV1, CoordinationV1, CertificatesV1 and
	// AuthorizationV1 reach Platform's group names; shared informer factories accept it. The other renamed groups are not redirected
	// (the controllers do not use them).
	Kubernetes kubernetes.Interface
	// RBAC, Coordination, Certificates and Authorization are the typed clients of Platform's
	// renamed groups.
	RBAC          rbacv1client.RbacV1Interface
	Coordination  coordinationv1client.CoordinationV1Interface
	Certificates  certificatesv1client.CertificatesV1Interface
	Authorization authorizationv1client.AuthorizationV1Interface
	// Dynamic reaches any resource by its Platform group/version/resource (custom resources too).
	Dynamic dynamic.Interface
	// Discovery lists the served resources.
	Discovery discovery.DiscoveryInterface
	// Config is the rest.Config the typed clients were built from (Protobuf content type and
	// Accept set: ContentType, AcceptContentTypes). The dynamic and discovery clients use a copy
	// with JSON instead.
	Config *rest.Config
}

// New builds the clients from cfg (its content types are replaced: Protobuf for the typed
// clients, JSON for the dynamic and discovery clients; everything else, such as credentials, QPS
// and timeouts, is kept).
func New(cfg *rest.Config) (*Clients, error) {
	base := rest.CopyConfig(cfg)
	base.ContentType = ContentType
	base.AcceptContentTypes = AcceptContentTypes
	jsonConfig := rest.CopyConfig(cfg)
	jsonConfig.ContentType = JSONContentType
	jsonConfig.AcceptContentTypes = JSONContentType
	core, err := kubernetes.NewForConfig(base)
	if err != nil {
		return nil, err
	}
	rbacREST, err := groupClient(base, RBACGroupVersion)
	if err != nil {
		return nil, err
	}
	coordREST, err := groupClient(base, CoordinationGroupVersion)
	if err != nil {
		return nil, err
	}
	certREST, err := groupClient(base, CertificatesGroupVersion)
	if err != nil {
		return nil, err
	}
	authzREST, err := groupClient(base, AuthorizationGroupVersion)
	if err != nil {
		return nil, err
	}
	// dynamic.NewForConfig sets JSON itself today; the JSON copy keeps it so should that change.
	dyn, err := dynamic.NewForConfig(jsonConfig)
	if err != nil {
		return nil, err
	}
	// Discovery documents have no Protobuf form at the gateway.
	disc, err := discovery.NewDiscoveryClientForConfig(jsonConfig)
	if err != nil {
		return nil, err
	}
	c := &Clients{
		RBAC:          rbacv1client.New(rbacREST),
		Coordination:  coordinationv1client.New(coordREST),
		Certificates:  certificatesv1client.New(certREST),
		Authorization: authorizationv1client.New(authzREST),
		Dynamic:       dyn,
		Discovery:     disc,
		Config:        base,
	}
	c.Kubernetes = &clientset{Clientset: core, rbac: c.RBAC, coordination: c.Coordination, certificates: c.Certificates, authorization: c.Authorization}
	return c, nil
}

// groupClient is a REST client for one group version under /apis.
func groupClient(base *rest.Config, gv schema.GroupVersion) (*rest.RESTClient, error) {
	c := rest.CopyConfig(base)
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientFor(c)
}

// clientset is client-go's clientset with the renamed groups redirected.
type clientset struct {
	*kubernetes.Clientset
	rbac          rbacv1client.RbacV1Interface
	coordination  coordinationv1client.CoordinationV1Interface
	certificates  certificatesv1client.CertificatesV1Interface
	authorization authorizationv1client.AuthorizationV1Interface
}

// CertificatesV1 reaches certificates.platform.io/v1.
func (c *clientset) CertificatesV1() certificatesv1client.CertificatesV1Interface {
	return c.certificates
}

// AuthorizationV1 reaches authorization.platform.io/v1.
func (c *clientset) AuthorizationV1() authorizationv1client.AuthorizationV1Interface {
	return c.authorization
}

// RbacV1 reaches rbac.authorization.platform.io/v1.
func (c *clientset) RbacV1() rbacv1client.RbacV1Interface { return c.rbac }

// CoordinationV1 reaches coordination.platform.io/v1.
func (c *clientset) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return c.coordination
}
