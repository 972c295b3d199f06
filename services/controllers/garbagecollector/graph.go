package garbagecollector

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// identity names one object: its kind (as an owner reference names it), namespace ("" for a
// cluster-scoped object) and name, and its uid.
type identity struct {
	APIVersion, Kind string
	Namespace, Name  string
	UID              types.UID
}

func (id identity) groupVersionKind() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(id.APIVersion, id.Kind)
}

// node is one object of the owner graph. A virtual node is known only from its dependents'
// owner references: the collector has not seen it (yet) and checks with the API whether it
// exists.
type node struct {
	id      identity
	virtual bool
	// owners are the object's owner references as last observed, rv its resourceVersion then.
	owners []metav1.OwnerReference
	rv     string
	// dependents are the nodes whose owner references name this node's uid.
	dependents map[*node]struct{}
	// deleting: the object has a deletionTimestamp; deletingDependents: and the
	// foregroundDeletion finalizer (it waits for its blocking dependents); orphaning: and the
	// orphan finalizer (its dependents lose their reference to it first).
	deleting, deletingDependents, orphaning bool
}

func newNode(id identity) *node {
	return &node{id: id, dependents: map[*node]struct{}{}}
}

// ownerRef returns the node's owner reference to uid.
func (n *node) ownerRef(uid types.UID) (metav1.OwnerReference, bool) {
	for _, r := range n.owners {
		if r.UID == uid {
			return r, true
		}
	}
	return metav1.OwnerReference{}, false
}

// blockingDependents are the dependents whose reference to n blocks n's foreground deletion.
func (n *node) blockingDependents() []*node {
	var out []*node
	for d := range n.dependents {
		if r, ok := d.ownerRef(n.id.UID); ok && r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
			out = append(out, d)
		}
	}
	return out
}

// ownerDiff compares two lists of owner references by uid: the references only in next, only in
// prev, and those in both whose blockOwnerDeletion changed.
func ownerDiff(prev, next []metav1.OwnerReference) (added, removed, changed []metav1.OwnerReference) {
	find := func(list []metav1.OwnerReference, uid types.UID) (metav1.OwnerReference, bool) {
		i := slices.IndexFunc(list, func(r metav1.OwnerReference) bool { return r.UID == uid })
		if i < 0 {
			return metav1.OwnerReference{}, false
		}
		return list[i], true
	}
	blocks := func(r metav1.OwnerReference) bool { return r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion }
	for _, r := range next {
		old, ok := find(prev, r.UID)
		switch {
		case !ok:
			added = append(added, r)
		case blocks(old) != blocks(r):
			changed = append(changed, r)
		}
	}
	for _, r := range prev {
		if _, ok := find(next, r.UID); !ok {
			removed = append(removed, r)
		}
	}
	return added, removed, changed
}
