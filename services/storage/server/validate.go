package server

import (
	"strings"

	pathvalidation "k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/util/validation"

	"platform.io/libs/storage"
	storagev1 "platform.io/proto/storage/v1"
)

// MaxObjectBytes bounds one stored object (upstream's etcd default request limit is 1.5 MiB;
// this leaves room for large objects without letting one write monopolise the backend).
const MaxObjectBytes = 3 << 20

func validateType(rt *storagev1.ResourceType) error {
	if rt == nil || rt.GetResource() == "" {
		return storage.NewInvalid("type.resource", "required")
	}
	if r := rt.GetResource(); !isLabel(r) {
		if errs := validation.IsDNS1123Label(r); len(errs) > 0 {
			return storage.NewInvalid("type.resource", "%q: %s", r, strings.Join(errs, "; "))
		}
	}
	if g := rt.GetGroup(); g != "" && !isSubdomain(g) {
		if errs := validation.IsDNS1123Subdomain(g); len(errs) > 0 {
			return storage.NewInvalid("type.group", "%q: %s", g, strings.Join(errs, "; "))
		}
	}
	return nil
}

func validateNamespace(field, ns string) error {
	if ns == "" || isLabel(ns) {
		return nil
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return storage.NewInvalid(field, "%q: %s", ns, strings.Join(errs, "; "))
	}
	return nil
}

func validateName(field, name string) error {
	if name == "" {
		return storage.NewInvalid(field, "required")
	}
	if len(name) > validation.DNS1123SubdomainMaxLength {
		return storage.NewInvalid(field, "must be no more than %d characters", validation.DNS1123SubdomainMaxLength)
	}
	if errs := pathvalidation.IsValidPathSegmentName(name); len(errs) > 0 {
		return storage.NewInvalid(field, "%q: %s", name, strings.Join(errs, "; "))
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return storage.NewInvalid(field, "must not contain control characters")
		}
	}
	return nil
}

// isLabel and isSubdomain accept what validation.IsDNS1123Label and IsDNS1123Subdomain accept,
// byte by byte: every request validates its type and namespace, and the library's regular
// expressions cost 4% of the all-in-one's CPU per get. Whatever they refuse is checked again by
// the library, which words the error.
func isLabel(s string) bool {
	return len(s) <= validation.DNS1123LabelMaxLength && labelPart(s)
}

func isSubdomain(s string) bool {
	if len(s) > validation.DNS1123SubdomainMaxLength {
		return false
	}
	for {
		part, rest, more := strings.Cut(s, ".")
		if !labelPart(part) {
			return false
		}
		if !more {
			return true
		}
		s = rest
	}
}

// labelPart: [a-z0-9]([-a-z0-9]*[a-z0-9])?
func labelPart(s string) bool {
	if s == "" || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func validateKey(rt *storagev1.ResourceType, namespace, name string) error {
	if err := validateType(rt); err != nil {
		return err
	}
	if err := validateNamespace("namespace", namespace); err != nil {
		return err
	}
	return validateName("name", name)
}

// validUID allows what the API server generates (UUIDs) and other plain identifiers.
func validUID(uid string) bool {
	if len(uid) > 128 {
		return false
	}
	for _, r := range uid {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

func validateObject(rt *storagev1.ResourceType, obj *storagev1.Object) error {
	if obj == nil {
		return storage.NewInvalid("object", "required")
	}
	if err := validateKey(rt, obj.GetNamespace(), obj.GetName()); err != nil {
		return err
	}
	if len(obj.GetValue()) > MaxObjectBytes {
		return storage.NewInvalid("object.value", "object is %d bytes, more than the limit of %d", len(obj.GetValue()), MaxObjectBytes)
	}
	if !validUID(obj.GetUid()) {
		return storage.NewInvalid("object.uid", "must be at most 128 letters, digits, '-', '_' or '.'")
	}
	for k, v := range obj.GetLabels() {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return storage.NewInvalid("object.labels", "key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return storage.NewInvalid("object.labels", "value of %q: %s", k, strings.Join(errs, "; "))
		}
	}
	return nil
}

func validatePreconditions(p *storagev1.Preconditions) error {
	if p.GetResourceVersion() < 0 {
		return storage.NewInvalid("preconditions.resourceVersion", "must not be negative")
	}
	if !validUID(p.GetUid()) {
		return storage.NewInvalid("preconditions.uid", "must be at most 128 letters, digits, '-', '_' or '.'")
	}
	return nil
}
