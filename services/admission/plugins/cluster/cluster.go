// Package cluster has the admission plugins about cluster resources and node agents, as
// upstream's: DefaultStorageClass, DefaultIngressClass, StorageObjectInUseProtection,
// TaintNodesByCondition, PersistentVolumeClaimResize, NodeRestriction and
// OwnerReferencesPermissionEnforcement. None takes a configuration.
package cluster

import (
	"bytes"
	"log/slog"

	"platform.io/services/admission/admission"
)

// Register registers the package's plugins.
func Register(r *admission.Registry) {
	r.Register(admission.DefaultStorageClass, NewDefaultStorageClass)
	r.Register(admission.DefaultIngressClass, NewDefaultIngressClass)
	r.Register(admission.StorageObjectInUseProtection, NewStorageObjectInUseProtection)
	r.Register(admission.TaintNodesByCondition, NewTaintNodesByCondition)
	r.Register(admission.PersistentVolumeClaimResize, NewPersistentVolumeClaimResize)
	r.Register(admission.NodeRestriction, NewNodeRestriction)
	r.Register(admission.OwnerReferencesPermissionEnforcement, NewOwnerReferencesPermissionEnforcement)
}

// ignoreConfig notes a configuration given to a plugin that has none: upstream ignores it too,
// so it is no error, but the operator should know it has no effect.
func ignoreConfig(deps admission.Deps, name string, config []byte) {
	c := bytes.TrimSpace(config)
	if len(c) == 0 || string(c) == "null" || string(c) == "{}" {
		return
	}
	log := deps.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log.Warn("admission plugin takes no configuration; ignoring it", "plugin", name)
}

// ops is a list of operations.
func ops(o ...admission.Operation) []admission.Operation { return o }
