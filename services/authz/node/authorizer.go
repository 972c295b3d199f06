package node

import (
	"context"
	"errors"
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"platform.io/libs/naming"
	"platform.io/services/authz/authorizer"
)

// Node identities, as upstream's default node identifier reads them.
const (
	// UserPrefix starts the user name of a node agent; the rest is the node's name.
	UserPrefix = "system:node:"
	// NodesGroup is the group every node agent is in.
	NodesGroup = "system:nodes"
)

// Groups of the resources the authorizer decides itself, as Platform serves them.
var (
	coordinationGroup = naming.Group("coordination.k8s.io")
	storageGroup      = naming.Group("storage.k8s.io")
)

// ErrNoRuleResolution is returned by RulesFor for nodes: what a node may do depends on its pods,
// so it cannot be listed as rules (upstream answers the same).
var ErrNoRuleResolution = errors.New("node authorizer does not support user rule resolution")

// Authorizer is the Node authorization mode. It has an opinion only on requests of node agents:
// it allows what the graph relates to the node and what the node rules allow, and otherwise has
// no opinion (it never denies: the next mode may still allow).
type Authorizer struct {
	graph *Graph
	rules []rbacv1.PolicyRule
	// rulesNameIndependent: no rule names objects, so a decision from the rules holds for any name.
	rulesNameIndependent bool
}

var (
	_ authorizer.Authorizer = (*Authorizer)(nil)
	_ authorizer.RuleLister = (*Authorizer)(nil)
)

// NewAuthorizer returns the Node mode deciding from g and, for what the graph does not cover,
// nodeRules (bootstrappolicy.NodeRules(): system:node's rules).
func NewAuthorizer(g *Graph, nodeRules []rbacv1.PolicyRule) *Authorizer {
	a := &Authorizer{graph: g, rules: nodeRules, rulesNameIndependent: true}
	for _, r := range nodeRules {
		if len(r.ResourceNames) > 0 {
			a.rulesNameIndependent = false
		}
	}
	return a
}

// nodeIdentity returns the node a user is, if it is one.
func nodeIdentity(u *authorizer.User) (string, bool) {
	if u == nil || !strings.HasPrefix(u.Name, UserPrefix) {
		return "", false
	}
	for _, g := range u.Groups {
		if g == NodesGroup {
			return strings.TrimPrefix(u.Name, UserPrefix), true
		}
	}
	return "", false
}

// Result helpers. A decision that looked at the graph is neither name-independent nor
// reusable: the next pod changes it. A decision from the verb or subresource alone holds for
// every name.
func byGraph(node string, allowed bool) authorizer.Result {
	if allowed {
		return authorizer.Result{Decision: authorizer.Allow, Uncacheable: true}
	}
	return authorizer.Result{Decision: authorizer.NoOpinion, Uncacheable: true,
		Reason: fmt.Sprintf("no relationship found between node '%s' and this object", node)}
}

func refuse(reason string) authorizer.Result {
	return authorizer.Result{Decision: authorizer.NoOpinion, Reason: reason, NameIndependent: true}
}

func allowAnyName() authorizer.Result {
	return authorizer.Result{Decision: authorizer.Allow, NameIndependent: true}
}

// byName is a decision that compared the object's name with the node's (Lease, CSINode, Node):
// reusable, but only for this name.
func byName(allowed bool, reason string) authorizer.Result {
	if allowed {
		return authorizer.Result{Decision: authorizer.Allow}
	}
	return authorizer.Result{Decision: authorizer.NoOpinion, Reason: reason}
}

// Authorize decides a request as upstream's Node authorizer (1.33, AuthorizeNodeWithSelectors on)
// does, with one difference: the attributes carry no field selector, so a node's list or watch
// of all pods is decided by the node rules (as upstream without that gate) instead of requiring
// spec.nodeName=<node>.
func (a *Authorizer) Authorize(_ context.Context, at authorizer.Attributes) (authorizer.Result, error) {
	node, isNode := nodeIdentity(at.User)
	if !isNode {
		return authorizer.Result{Decision: authorizer.NoOpinion, NameIndependent: true}, nil
	}
	if node == "" {
		return refuse(fmt.Sprintf("unknown node for user %q", at.User.Name)), nil
	}
	if at.ResourceRequest {
		switch {
		case at.APIGroup == "" && at.Resource == "secrets":
			return a.readNamespaced(node, at, a.graph.secretOnNode), nil
		case at.APIGroup == "" && at.Resource == "configmaps":
			return a.readNamespaced(node, at, a.graph.configMapOnNode), nil
		case at.APIGroup == "" && at.Resource == "persistentvolumeclaims":
			if at.Subresource == "status" {
				return a.statusUpdate(node, at, a.graph.claimOnNode), nil
			}
			return a.get(node, at, a.graph.claimOnNode), nil
		case at.APIGroup == "" && at.Resource == "persistentvolumes":
			return a.get(node, at, func(n, _, name string) bool { return a.graph.pvOnNode(n, name) }), nil
		case at.APIGroup == storageGroup && at.Resource == "volumeattachments":
			return a.get(node, at, func(n, _, name string) bool { return a.graph.attachmentOnNode(n, name) }), nil
		case at.APIGroup == "" && at.Resource == "serviceaccounts":
			return a.createToken(node, at), nil
		case at.APIGroup == coordinationGroup && at.Resource == "leases":
			return a.lease(node, at), nil
		case at.APIGroup == storageGroup && at.Resource == "csinodes":
			return a.csiNode(node, at), nil
		case at.APIGroup == "" && at.Resource == "nodes":
			return a.nodeObject(node, at), nil
		case at.APIGroup == "" && at.Resource == "pods":
			if r, decided := a.pod(node, at); decided {
				return r, nil
			}
		}
	}
	return a.byRules(at), nil
}

// byRules evaluates the node rules, for everything the graph does not subdivide.
func (a *Authorizer) byRules(at authorizer.Attributes) authorizer.Result {
	r := authorizer.Result{Decision: authorizer.NoOpinion, NameIndependent: a.rulesNameIndependent}
	if rulesAllow(a.rules, &at) {
		r.Decision = authorizer.Allow
	}
	return r
}

type related func(node, namespace, name string) bool

// relation asks the graph whether the named object is related to the node.
func (a *Authorizer) relation(node string, at authorizer.Attributes, rel related) authorizer.Result {
	if at.Name == "" {
		return refuse("No Object name found")
	}
	return byGraph(node, rel(node, at.Namespace, at.Name))
}

// get: only get of individual objects related to the node (claims, volumes, attachments).
func (a *Authorizer) get(node string, at authorizer.Attributes, rel related) authorizer.Result {
	if at.Verb != "get" {
		return refuse("can only get individual resources of this type")
	}
	if at.Subresource != "" {
		return refuse("cannot get subresource")
	}
	return a.relation(node, at, rel)
}

// readNamespaced: get, list or watch of single namespaced objects related to the node (Secrets,
// ConfigMaps; a node watches each one it uses by name).
func (a *Authorizer) readNamespaced(node string, at authorizer.Attributes, rel related) authorizer.Result {
	switch at.Verb {
	case "get", "list", "watch":
	default:
		return refuse("can only read resources of this type")
	}
	if at.Subresource != "" {
		return refuse("cannot read subresource")
	}
	if at.Namespace == "" {
		return refuse("can only read namespaced object of this type")
	}
	return a.relation(node, at, rel)
}

// statusUpdate: update or patch of the status of a claim its pods use (volume expansion).
func (a *Authorizer) statusUpdate(node string, at authorizer.Attributes, rel related) authorizer.Result {
	switch at.Verb {
	case "update", "patch":
	default:
		return refuse("can only get/update/patch this type")
	}
	return a.relation(node, at, rel)
}

// createToken: tokens of the service accounts its pods run as.
func (a *Authorizer) createToken(node string, at authorizer.Attributes) authorizer.Result {
	if at.Verb != "create" || at.Name == "" {
		return refuse("can only create tokens for individual service accounts")
	}
	if at.Subresource != "token" {
		return refuse("can only create token subresource of serviceaccount")
	}
	return byGraph(node, a.graph.serviceAccountOnNode(node, at.Namespace, at.Name))
}

// lease: its own heartbeat Lease in the node lease namespace. Create is allowed for any name
// (the name is not known yet); admission checks it.
func (a *Authorizer) lease(node string, at authorizer.Attributes) authorizer.Result {
	switch at.Verb {
	case "get", "create", "update", "patch", "delete":
	default:
		return refuse("can only get, create, update, patch, or delete a node lease")
	}
	if at.Namespace != naming.NodeLeaseNamespace {
		return refuse(fmt.Sprintf("can only access leases in the %q system namespace", naming.NodeLeaseNamespace))
	}
	if at.Verb == "create" {
		return allowAnyName()
	}
	return byName(at.Name == node, "can only access node lease with the same name as the requesting node")
}

// csiNode: its own CSINode.
func (a *Authorizer) csiNode(node string, at authorizer.Attributes) authorizer.Result {
	switch at.Verb {
	case "get", "create", "update", "patch", "delete":
	default:
		return refuse("can only get, create, update, patch, or delete a CSINode")
	}
	if at.Subresource != "" {
		return refuse("cannot authorize CSINode subresources")
	}
	if at.Verb == "create" {
		return allowAnyName()
	}
	return byName(at.Name == node, "can only access CSINode with the same name as the requesting node")
}

// nodeObject: a node reads only its own Node (by name, so it can look before registering) and
// writes Nodes and their status (admission limits the writes to its own).
func (a *Authorizer) nodeObject(node string, at authorizer.Attributes) authorizer.Result {
	switch at.Subresource {
	case "":
		switch at.Verb {
		case "create", "update", "patch":
			return allowAnyName()
		case "get", "list", "watch":
			switch at.Name {
			case node:
				return byName(true, "")
			case "":
				return refuse(fmt.Sprintf("node '%s' cannot read all nodes, only its own Node object", node))
			default:
				return byName(false, fmt.Sprintf("node '%s' cannot read '%s', only its own Node object", node, at.Name))
			}
		}
	case "status":
		switch at.Verb {
		case "update", "patch":
			return allowAnyName()
		}
	}
	return refuse("")
}

// pod: get of pods bound to the node; mirror pods, status and evictions (admission limits them
// to its own pods). decided is false for a list or watch without a name, which the node rules
// decide (no field selector in the attributes).
func (a *Authorizer) pod(node string, at authorizer.Attributes) (authorizer.Result, bool) {
	switch at.Subresource {
	case "":
		switch at.Verb {
		case "get":
			return a.get(node, at, func(n, ns, name string) bool { return a.graph.podOnNode(n, ns, name) }), true
		case "list", "watch":
			if at.Name == "" {
				return authorizer.Result{}, false
			}
			return a.relation(node, at, func(n, ns, name string) bool { return a.graph.podOnNode(n, ns, name) }), true
		case "create", "delete":
			return allowAnyName(), true
		}
	case "status":
		if at.Verb == "update" || at.Verb == "patch" {
			return allowAnyName(), true
		}
	case "eviction":
		if at.Verb == "create" {
			return allowAnyName(), true
		}
	}
	return refuse(""), true
}

// RulesFor implements authorizer.RuleLister: a node's permissions cannot be listed (they follow
// its pods), so the list is incomplete; other users get nothing from this mode.
func (a *Authorizer) RulesFor(_ context.Context, u *authorizer.User, _ string) ([]authorizer.Rule, []authorizer.Rule, bool, error) {
	if _, isNode := nodeIdentity(u); isNode {
		return nil, nil, true, ErrNoRuleResolution
	}
	return nil, nil, false, nil
}
