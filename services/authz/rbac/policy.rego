# RBAC authorization as one fixed, data-driven Rego policy.
#
# The RBAC objects (Roles, ClusterRoles, RoleBindings, ClusterRoleBindings) are not in this file:
# they are compiled into the data document, so an RBAC change is new data, never a new policy.
# Query data.rbac.decision (or data.rbac.allow) with the data document printed next to this
# policy and the input of a request, for example:
#
#   {"user": "alice", "groups": ["dev", "system:authenticated"], "resourceRequest": true,
#    "verb": "update", "apiGroup": "apps", "resource": "deployments", "subresource": "scale",
#    "namespace": "team-a", "name": "web", "path": "",
#    "keys": {"subjects": ["user:alice", "group:dev", "group:system:authenticated"],
#             "scopes": ["*", "team-a"], "verbs": ["*", "update"], "apiGroups": ["*", "apps"],
#             "resources": ["*", "deployments/scale", "*/scale"]}}
#
# Non-resource requests set "resourceRequest": false, the lower-case HTTP method as "verb" and
# the request "path". The "keys" are the ways the request's attributes can be written in a rule,
# computed by the caller (in Go, so that a decision does not pay for string building in Rego):
#   subjects:  "user:<user>", then "group:<group>" for each group. There are no wildcard
#              subjects: system:anonymous and system:unauthenticated match only bindings that
#              name them.
#   scopes:    "*" (the grants of ClusterRoleBindings), then the namespace if there is one (the
#              grants of the RoleBindings in it).
#   verbs:     "*" and the verb; apiGroups: "*" and the group ("" is the core group).
#   resources: "*" (every resource and subresource) and "<resource>" without a subresource;
#              "*", "<resource>/<subresource>" and "*/<subresource>" with one.
#
# The data document indexes every binding by the subjects it names and, below each subject, by
# what it allows, so a decision is a handful of lookups among the requesting user's own entries
# and does not depend on how many bindings the cluster has:
#
#   data.subjects[<subject>][<scope>].resources[<verb>][<apiGroup>][<resource>] =
#       {"any": <grant>, "names": {<resourceName>: <grant>}}
#   data.subjects[<subject>][<scope>].nonResourceURLs[<verb>] =
#       {"paths": {<url>: <grant>}, "prefixes": {<url before its trailing *s>: <grant>}}
#   data.grants[<grant>] =
#       {"binding": {"kind": "RoleBinding", "name": "...", "namespace": "..."},
#        "role": {"kind": "ClusterRole", "name": "..."},
#        "subject": {"kind": "ServiceAccount", "name": "<name>/<namespace>"},
#        "reason": "RBAC: allowed by RoleBinding \"<name>/<namespace>\" of ClusterRole ..."}
#
# A ServiceAccount subject is compiled as the user "system:serviceaccount:<namespace>:<name>"
# (the RoleBinding's namespace when the subject has none). Verbs, groups, resources and URLs are
# the rules' own words, wildcards included ("*", "pods/log", "*/scale"). "any" is given by a rule
# without resourceNames, "names" by rules listing names. A <grant> is the number of the binding,
# role and subject that give the permission (of several bindings giving one subject the same
# permission in one scope, the first by name) in data.grants, with the reason of the decisions
# it allows in upstream's words.
#
# Roles are resolved at compile time: a binding whose role does not exist grants nothing and is
# not in the data.
package rbac

# The decision: allowed with the binding that allows it, or not allowed (RBAC never denies: the
# next authorizer decides, and the reason is empty). When several grants allow a request, the
# reason names the first found, in the order of the keys (the user before its groups, cluster
# bindings before the namespace's); upstream, too, names whichever binding it meets first.
# nameIndependent says whether the same decision holds for every object name with otherwise
# equal attributes, since callers cache decisions on it.
decision := resource_decision(entries) if {
	input.resourceRequest
	entries := resource_entries(data.subjects)
} else := url_decision(url_grants(data.subjects))

# The decision as a plain boolean.
allow := decision.allowed

# The index entries that match a resource request, object name aside: one per subject, scope,
# and way of writing the verb, group and resource (exact or wildcard). Only the requesting
# subjects' own entries are read. Resource rules never match non-resource requests. (The index
# is data.subjects, passed in because one read of the document and lookups in the value cost
# less than a storage read per lookup.)
resource_entries(index) := [entry |
	some subject in input.keys.subjects
	by_scope := index[subject]
	some scope in input.keys.scopes
	by_verb := by_scope[scope].resources
	some verb in input.keys.verbs
	by_group := by_verb[verb]
	some group in input.keys.apiGroups
	by_resource := by_group[group]
	some resource in input.keys.resources
	entry := by_resource[resource]
]

# A rule without resourceNames allows every object name; a rule with resourceNames only the
# names it lists, so a request without a name (list, create) matches none of them unless a rule
# lists the empty name (names compare literally). A refusal is name-independent unless some
# rule would allow another name.
resource_decision(entries) := {"allowed": true, "reason": data.grants[grant].reason, "nameIndependent": true} if {
	grant := [g | some entry in entries; g := entry.any][0]
} else := {"allowed": true, "reason": data.grants[grant].reason, "nameIndependent": false} if {
	grant := [g | some entry in entries; g := entry.names[input.name]][0]
} else := {"allowed": false, "reason": "", "nameIndependent": count(entries) == 0}

# The grants of the non-resource rules that match a non-resource request: a URL of "*" matches
# every path, one ending in "*" every path that starts with what precedes its "*"s, any other
# only the same path. Non-resource rules never match resource requests.
url_grants(index) := [grant |
	some subject in input.keys.subjects
	by_scope := index[subject]
	some scope in input.keys.scopes
	by_verb := by_scope[scope].nonResourceURLs
	some verb in input.keys.verbs
	some grant in url_matches(by_verb[verb])
]

url_matches(entry) := [grant] if {
	grant := entry.paths[input.path]
} else := [grant |
	some prefix, grant in entry.prefixes
	startswith(input.path, prefix)
]

# Names play no part in non-resource requests.
url_decision(grants) := {"allowed": true, "reason": data.grants[grants[0]].reason, "nameIndependent": true} if {
	count(grants) > 0
} else := {"allowed": false, "reason": "", "nameIndependent": true}
