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
