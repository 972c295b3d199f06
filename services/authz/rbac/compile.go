package rbac

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"platform.io/libs/naming"

	"github.com/open-policy-agent/opa/v1/ast"
	rbacv1 "k8s.io/api/rbac/v1"
)

// Snapshot is the RBAC objects the policy is compiled from. The objects are read, never kept or
// changed: a Snapshot may hold an informer's shared objects.
type Snapshot struct {
	Roles               []*rbacv1.Role
	ClusterRoles        []*rbacv1.ClusterRole
	RoleBindings        []*rbacv1.RoleBinding
	ClusterRoleBindings []*rbacv1.ClusterRoleBinding
}

// clusterScope is the scope key of the grants of ClusterRoleBindings: they apply in every
// namespace and to cluster-scoped requests. No namespace can be called "*".
const clusterScope = "*"

// serviceAccountUserPrefix starts the user name of every service account (upstream
// system:serviceaccount:<namespace>:<name>): a ServiceAccount subject is a user subject.
const serviceAccountUserPrefix = "system:serviceaccount:"

// userKey and groupKey are the subject keys of the data document's index.
func userKey(name string) string  { return "user:" + name }
func groupKey(name string) string { return "group:" + name }

// grant is one binding's resolved role, as RulesFor and Covers read it. order is the binding's
// place in the canonical order (ClusterRoleBindings by name, then RoleBindings by namespace and
// name), so rules are listed the same way on every replica and a binding reached through two
// subjects is listed once.
type grant struct {
	order int
	rules []rbacv1.PolicyRule
}

// compiled is one generation of the compiled snapshot: the data document the policy reads and
// the same grants in Go for listing rules.
type compiled struct {
	// data is the document the policy reads ({"subjects": ...}); the store holds it once the
	// generation is in effect.
	data     ast.Object
	subjects map[string]map[string][]*grant
	// counts for logs
	bindings, grants, entries int
}

// Terms of the data document's constant keys.
var (
	keyBinding         = ast.StringTerm("binding")
	keyRole            = ast.StringTerm("role")
	keySubject         = ast.StringTerm("subject")
	keyKind            = ast.StringTerm("kind")
	keyName            = ast.StringTerm("name")
	keyNamespace       = ast.StringTerm("namespace")
	keyResources       = ast.StringTerm("resources")
	keyNonResourceURLs = ast.StringTerm("nonResourceURLs")
	keyAny             = ast.StringTerm("any")
	keyNames           = ast.StringTerm("names")
	keyPaths           = ast.StringTerm("paths")
	keyPrefixes        = ast.StringTerm("prefixes")
	keySubjects        = ast.StringTerm("subjects")
	keyReason          = ast.StringTerm("reason")
	keyGrants          = ast.StringTerm("grants")
)

// scopeIndex is what one subject may do in one scope, before it becomes AST: every permission
// keyed the way the policy looks it up, holding (the number of) the first grant, in binding
// order, that gives it.
type scopeIndex struct {
	resources map[string]map[string]map[string]*resourceEntry // verb, group, resource
	urls      map[string]*urlEntry                            // verb
}

type resourceEntry struct {
	any   *ast.Term
	names map[string]*ast.Term
}

type urlEntry struct {
	paths, prefixes map[string]*ast.Term
}

// add files one rule's permissions. The first grant to give a permission stays: bindings arrive
// in their canonical order, so the reason of a decision is the same on every replica.
func (x *scopeIndex) add(r *rbacv1.PolicyRule, grant *ast.Term) (added int) {
	for _, verb := range r.Verbs {
		for _, group := range r.APIGroups {
			for _, resource := range r.Resources {
				e := x.resourceEntry(verb, group, resource)
				if len(r.ResourceNames) == 0 {
					if e.any == nil {
						e.any = grant
						added++
					}
					continue
				}
				for _, name := range r.ResourceNames {
					if e.names == nil {
						e.names = map[string]*ast.Term{}
					}
					if e.names[name] == nil {
						e.names[name] = grant
						added++
					}
				}
			}
		}
		for _, u := range r.NonResourceURLs {
			if x.urls == nil {
				x.urls = map[string]*urlEntry{}
			}
			e := x.urls[verb]
			if e == nil {
				e = &urlEntry{paths: map[string]*ast.Term{}, prefixes: map[string]*ast.Term{}}
				x.urls[verb] = e
			}
			// "/logs/*" and "/logs/**" both match every path starting with "/logs/"; "*" every path.
			m, key := e.paths, u
			if strings.HasSuffix(u, "*") {
				m, key = e.prefixes, strings.TrimRight(u, "*")
			}
			if m[key] == nil {
				m[key] = grant
				added++
			}
		}
	}
	return added
}

func (x *scopeIndex) resourceEntry(verb, group, resource string) *resourceEntry {
	if x.resources == nil {
		x.resources = map[string]map[string]map[string]*resourceEntry{}
	}
	byGroup := x.resources[verb]
	if byGroup == nil {
		byGroup = map[string]map[string]*resourceEntry{}
		x.resources[verb] = byGroup
	}
	byResource := byGroup[group]
	if byResource == nil {
		byResource = map[string]*resourceEntry{}
		byGroup[group] = byResource
	}
	e := byResource[resource]
	if e == nil {
		e = &resourceEntry{}
		byResource[resource] = e
	}
	return e
}

// term is the scope's entry of the data document. onlyAny holds the entries {"any": <grant>}
// already built: most entries are just that, and equal values can share one term.
func (x *scopeIndex) term(onlyAny map[*ast.Term]*ast.Term) *ast.Term {
	obj := ast.NewObjectWithCapacity(2)
	if len(x.resources) > 0 {
		byVerb := ast.NewObjectWithCapacity(len(x.resources))
		for verb, groups := range x.resources {
			byGroup := ast.NewObjectWithCapacity(len(groups))
			for group, resources := range groups {
				byResource := ast.NewObjectWithCapacity(len(resources))
				for resource, e := range resources {
					var entry *ast.Term
					switch {
					case len(e.names) == 0:
						if entry = onlyAny[e.any]; entry == nil {
							entry = ast.ObjectTerm(ast.Item(keyAny, e.any))
							onlyAny[e.any] = entry
						}
					case e.any == nil:
						entry = ast.ObjectTerm(ast.Item(keyNames, grantsTerm(e.names)))
					default:
						entry = ast.ObjectTerm(ast.Item(keyAny, e.any), ast.Item(keyNames, grantsTerm(e.names)))
					}
					byResource.Insert(ast.StringTerm(resource), entry)
				}
				byGroup.Insert(ast.StringTerm(group), ast.NewTerm(byResource))
			}
			byVerb.Insert(ast.StringTerm(verb), ast.NewTerm(byGroup))
		}
		obj.Insert(keyResources, ast.NewTerm(byVerb))
	}
	if len(x.urls) > 0 {
		byVerb := ast.NewObjectWithCapacity(len(x.urls))
		for verb, e := range x.urls {
			byVerb.Insert(ast.StringTerm(verb), ast.ObjectTerm(
				ast.Item(keyPaths, grantsTerm(e.paths)),
				ast.Item(keyPrefixes, grantsTerm(e.prefixes)),
			))
		}
		obj.Insert(keyNonResourceURLs, ast.NewTerm(byVerb))
	}
	return ast.NewTerm(obj)
}

func grantsTerm(m map[string]*ast.Term) *ast.Term {
	obj := ast.NewObjectWithCapacity(len(m))
	for k, g := range m {
		obj.Insert(ast.StringTerm(k), g)
	}
	return ast.NewTerm(obj)
}

// compileSnapshot denormalizes the snapshot: every binding's role is resolved and its rules are
// filed under each subject the binding names, so evaluation reads only the requesting user's own
// entries and its cost does not depend on how many bindings exist.
func compileSnapshot(s Snapshot) *compiled {
	clusterRoles := make(map[string][]rbacv1.PolicyRule, len(s.ClusterRoles))
	for _, cr := range s.ClusterRoles {
		if cr != nil {
			clusterRoles[cr.Name] = copyRules(cr.Rules)
		}
	}
	roles := make(map[[2]string][]rbacv1.PolicyRule, len(s.Roles))
	for _, r := range s.Roles {
		if r != nil {
			roles[[2]string{r.Namespace, r.Name}] = copyRules(r.Rules)
		}
	}

	c := &compiled{subjects: map[string]map[string][]*grant{}}
	index := map[string]map[string]*scopeIndex{}
	// Grants are listed once and referred to by their position, so the data document does not
	// repeat a binding's description at every permission it gives.
	var grants []*ast.Term
	add := func(key, scope string, g *grant, term *ast.Term) {
		byScope := c.subjects[key]
		if byScope == nil {
			byScope = map[string][]*grant{}
			c.subjects[key] = byScope
			index[key] = map[string]*scopeIndex{}
		}
		byScope[scope] = append(byScope[scope], g)
		x := index[key][scope]
		if x == nil {
			x = &scopeIndex{}
			index[key][scope] = x
		}
		id := ast.InternedTerm(len(grants))
		grants = append(grants, term)
		for i := range g.rules {
			c.entries += x.add(&g.rules[i], id)
		}
		c.grants++
	}

	crbs := slices.DeleteFunc(slices.Clone(s.ClusterRoleBindings), func(b *rbacv1.ClusterRoleBinding) bool { return b == nil })
	slices.SortFunc(crbs, func(a, b *rbacv1.ClusterRoleBinding) int { return cmp.Compare(a.Name, b.Name) })
	rbs := slices.DeleteFunc(slices.Clone(s.RoleBindings), func(b *rbacv1.RoleBinding) bool { return b == nil })
	slices.SortFunc(rbs, func(a, b *rbacv1.RoleBinding) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})

	order := 0
	for _, b := range crbs {
		order++
		// As upstream, a ClusterRoleBinding can only use a ClusterRole: a Role is looked up in
		// the namespace "" where none exists, so the binding grants nothing.
		if b.RoleRef.Kind != "ClusterRole" {
			continue
		}
		rules, ok := clusterRoles[b.RoleRef.Name]
		if !ok {
			continue
		}
		c.bindings++
		binding := ast.ObjectTerm(
			ast.Item(keyKind, ast.StringTerm("ClusterRoleBinding")),
			ast.Item(keyName, ast.StringTerm(b.Name)),
		)
		described := fmt.Sprintf("ClusterRoleBinding %q", b.Name)
		addSubjects(b.Subjects, "", &grant{order: order, rules: rules}, binding, described, b.RoleRef, add)
	}
	for _, b := range rbs {
		order++
		var rules []rbacv1.PolicyRule
		var ok bool
		switch b.RoleRef.Kind {
		case "Role":
			rules, ok = roles[[2]string{b.Namespace, b.RoleRef.Name}]
		case "ClusterRole":
			rules, ok = clusterRoles[b.RoleRef.Name]
		}
		if !ok || b.Namespace == "" {
			continue
		}
		c.bindings++
		binding := ast.ObjectTerm(
			ast.Item(keyKind, ast.StringTerm("RoleBinding")),
			ast.Item(keyName, ast.StringTerm(b.Name)),
			ast.Item(keyNamespace, ast.StringTerm(b.Namespace)),
		)
		described := fmt.Sprintf("RoleBinding %q", b.Name+"/"+b.Namespace)
		addSubjects(b.Subjects, b.Namespace, &grant{order: order, rules: rules}, binding, described, b.RoleRef, add)
	}

	subjects := ast.NewObjectWithCapacity(len(index))
	onlyAny := map[*ast.Term]*ast.Term{}
	for key, byScope := range index {
		scopes := ast.NewObjectWithCapacity(len(byScope))
		for scope, x := range byScope {
			scopes.Insert(ast.StringTerm(scope), x.term(onlyAny))
		}
		subjects.Insert(ast.StringTerm(key), ast.NewTerm(scopes))
	}
	c.data = ast.NewObject(
		ast.Item(keySubjects, ast.NewTerm(subjects)),
		ast.Item(keyGrants, ast.ArrayTerm(grants...)),
	)
	return c
}

// addSubjects files one binding's grant under each subject it names. namespace is the
// RoleBinding's namespace ("" for a ClusterRoleBinding): it is the scope of the grant and the
// namespace of ServiceAccount subjects that leave theirs empty. described is the binding in
// upstream's words, for the reason of the decisions the grant allows.
func addSubjects(subjects []rbacv1.Subject, namespace string, g *grant, binding *ast.Term, described string, ref rbacv1.RoleRef,
	add func(key, scope string, g *grant, term *ast.Term)) {
	scope := namespace
	if scope == "" {
		scope = clusterScope
	}
	roleTerm := ast.ObjectTerm(
		ast.Item(keyKind, ast.StringTerm(ref.Kind)),
		ast.Item(keyName, ast.StringTerm(ref.Name)),
	)
	seen := map[string]bool{}
	for _, s := range subjects {
		var key, subject string
		switch s.Kind {
		case rbacv1.UserKind:
			key, subject = userKey(s.Name), s.Name
		case rbacv1.GroupKind:
			key, subject = groupKey(s.Name), s.Name
		case rbacv1.ServiceAccountKind:
			ns := s.Namespace
			if ns == "" {
				ns = namespace
			}
			if ns == "" {
				// A ServiceAccount without a namespace in a ClusterRoleBinding names nobody.
				continue
			}
			// Upstream describes the account as <name>/<namespace>.
			key, subject = userKey(serviceAccountUserPrefix+ns+":"+s.Name), s.Name+"/"+ns
		default:
			continue
		}
		// Upstream reports the first subject of a binding that names the user.
		if seen[key] {
			continue
		}
		seen[key] = true
		term := ast.ObjectTerm(
			ast.Item(keyBinding, binding),
			ast.Item(keyRole, roleTerm),
			ast.Item(keySubject, ast.ObjectTerm(
				ast.Item(keyKind, ast.StringTerm(s.Kind)),
				ast.Item(keyName, ast.StringTerm(subject)),
			)),
			// Upstream's words: RBAC: allowed by <binding> of <role kind> "<role>" to <subject>.
			ast.Item(keyReason, ast.StringTerm(fmt.Sprintf("RBAC: allowed by %s of %s %q to %s %q", described, ref.Kind, ref.Name, s.Kind, subject))),
		)
		add(key, scope, g, term)
	}
}

// copyRules copies a role's rules: the snapshot's objects stay the caller's. API groups named by
// upstream's names are filed under the names Platform serves them as, so roles written for
// upstream ("rbac.authorization.k8s.io") grant what they say.
func copyRules(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(rules))
	for i, r := range rules {
		out[i] = rbacv1.PolicyRule{
			Verbs:           slices.Clone(r.Verbs),
			APIGroups:       CanonicalGroups(r.APIGroups),
			Resources:       slices.Clone(r.Resources),
			ResourceNames:   slices.Clone(r.ResourceNames),
			NonResourceURLs: slices.Clone(r.NonResourceURLs),
		}
	}
	return out
}

// CanonicalGroups maps upstream group names to the names Platform serves them under
// ("apps" and the core group stay), without duplicates.
func CanonicalGroups(groups []string) []string {
	if groups == nil {
		return nil
	}
	out := make([]string, 0, len(groups))
	for _, g := range groups {
		if c := naming.Group(g); !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}
