// Package apiextensions holds the rules of CustomResourceDefinitions: their validation (the crd
// package), what the server owns in them (status, stored versions), and a deletion held by the
// cleanup finalizer until the definition's objects are gone. The gateway's definitions controller
// (apiserver's crds.go) uses the condition helpers.
package apiextensions

import (
	"context"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"platform.io/libs/naming"
	"platform.io/services/gateway/crd"
	"platform.io/services/gateway/registry"
	"platform.io/services/gateway/registry/builtin"
)

// CleanupFinalizer holds a deleted definition until its objects are gone (upstream's
// customresourcecleanup.apiextensions.k8s.io, in Platform's group).
var CleanupFinalizer = "customresourcecleanup." + naming.Group("apiextensions.k8s.io")

// Strategy is the strategy of CustomResourceDefinitions.
type Strategy struct{ *builtin.Strategy }

// New returns the strategy of definitions over their default one.
func New(b *builtin.Strategy) registry.Strategy { return &Strategy{Strategy: b} }

// CheckRequired: a definition's missing fields are reported with every other cause in one 422
// (Validate), as its v1 rules require.
func (s *Strategy) CheckRequired(runtime.Object) error { return nil }

// Validate applies the crd package's rules (old is nil on create).
func (s *Strategy) Validate(obj, old runtime.Object) field.ErrorList {
	c, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return nil
	}
	prev, _ := old.(*apiextensionsv1.CustomResourceDefinition)
	return crd.Validate(c, prev)
}

// PrepareForCreate starts the status empty, recording the storage version.
func (s *Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	s.Strategy.PrepareForCreate(ctx, obj)
	if c, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
		prepare(c, true)
	}
}

// PrepareForUpdate: a new storage version joins storedVersions; a status write carries the
// finalizers too (upstream's status strategy keeps them from the new object): the cleanup
// controller drops its finalizer there.
func (s *Strategy) PrepareForUpdate(subresource string, obj, cur runtime.Object) (runtime.Object, error) {
	next, err := s.Strategy.PrepareForUpdate(subresource, obj, cur)
	if err != nil {
		return nil, err
	}
	c, ok := next.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return next, nil
	}
	switch subresource {
	case "":
		prepare(c, false)
	case "status":
		c.Finalizers = registry.Meta(obj).GetFinalizers()
	}
	return next, nil
}

// PrepareForDelete holds a definition by the cleanup finalizer until its objects are gone.
func (s *Strategy) PrepareForDelete(next runtime.Object, now metav1.Time) (bool, error) {
	c, ok := next.(*apiextensionsv1.CustomResourceDefinition)
	if !ok || c.DeletionTimestamp != nil {
		return false, nil
	}
	if !slices.Contains(c.Finalizers, CleanupFinalizer) {
		c.Finalizers = append(c.Finalizers, CleanupFinalizer)
	}
	zero := int64(0)
	c.DeletionTimestamp = &now
	c.DeletionGracePeriodSeconds = &zero
	SetCondition(c, apiextensionsv1.Terminating, apiextensionsv1.ConditionTrue, "InstanceDeletionPending",
		"CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon", now)
	return true, nil
}

// Condition returns a definition's condition of type t, or nil.
func Condition(c *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) *apiextensionsv1.CustomResourceDefinitionCondition {
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == t {
			return &c.Status.Conditions[i]
		}
	}
	return nil
}

// SetCondition sets a condition; its transition time changes only when its status does.
func SetCondition(c *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType, status apiextensionsv1.ConditionStatus, reason, message string, now metav1.Time) {
	if cond := Condition(c, t); cond != nil {
		if cond.Status != status {
			cond.LastTransitionTime = now
		}
		cond.Status, cond.Reason, cond.Message = status, reason, message
		return
	}
	c.Status.Conditions = append(c.Status.Conditions, apiextensionsv1.CustomResourceDefinitionCondition{
		Type: t, Status: status, Reason: reason, Message: message, LastTransitionTime: now,
	})
}

// IsEstablished tells whether a definition's Established condition is True.
func IsEstablished(c *apiextensionsv1.CustomResourceDefinition) bool {
	cond := Condition(c, apiextensionsv1.Established)
	return cond != nil && cond.Status == apiextensionsv1.ConditionTrue
}

// NamesAccepted tells whether a definition's NamesAccepted condition is True.
func NamesAccepted(c *apiextensionsv1.CustomResourceDefinition) bool {
	cond := Condition(c, apiextensionsv1.NamesAccepted)
	return cond != nil && cond.Status == apiextensionsv1.ConditionTrue
}

// storageVersionOf names a definition's storage version ("" when none is marked).
func storageVersionOf(c *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range c.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

// prepare sets what the server owns in a definition being written: on create an empty status
// recording the storage version in storedVersions; on update the storage version is added to
// storedVersions when it is new.
func prepare(c *apiextensionsv1.CustomResourceDefinition, create bool) {
	sv := storageVersionOf(c)
	if create {
		c.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
		if sv != "" {
			c.Status.StoredVersions = []string{sv}
		}
		return
	}
	if sv != "" && !slices.Contains(c.Status.StoredVersions, sv) {
		c.Status.StoredVersions = append(c.Status.StoredVersions, sv)
	}
}
