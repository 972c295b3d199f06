package rbac

import (
	"encoding/json"

	"github.com/open-policy-agent/opa/v1/ast"

	"platform.io/services/authz/authorizer"
)

// Terms of the input document's keys and constant values.
var (
	inUser            = ast.StringTerm("user")
	inGroups          = ast.StringTerm("groups")
	inResourceRequest = ast.StringTerm("resourceRequest")
	inVerb            = ast.StringTerm("verb")
	inAPIGroup        = ast.StringTerm("apiGroup")
	inResource        = ast.StringTerm("resource")
	inSubresource     = ast.StringTerm("subresource")
	inNamespace       = ast.StringTerm("namespace")
	inName            = ast.StringTerm("name")
	inPath            = ast.StringTerm("path")
	inKeys            = ast.StringTerm("keys")
	inSubjects        = ast.StringTerm("subjects")
	inScopes          = ast.StringTerm("scopes")
	inVerbs           = ast.StringTerm("verbs")
	inAPIGroups       = ast.StringTerm("apiGroups")
	inResources       = ast.StringTerm("resources")
	wildcard          = ast.StringTerm("*")
)

// inputValue is the policy's input for a request, built as an AST value so evaluation needs no
// JSON conversion. Besides the attributes it carries the lookup keys the policy documents: every
// way a rule can write the request's subject, scope, verb, group and resource.
func inputValue(at *authorizer.Attributes) ast.Value {
	u := at.User
	user := ast.StringTerm(u.Name)
	groups := make([]*ast.Term, len(u.Groups))
	subjects := make([]*ast.Term, 1+len(u.Groups))
	subjects[0] = ast.StringTerm(userKey(u.Name))
	for i, g := range u.Groups {
		groups[i] = ast.StringTerm(g)
		subjects[i+1] = ast.StringTerm(groupKey(g))
	}
	namespace := ast.StringTerm(at.Namespace)
	scopes := ast.ArrayTerm(wildcard)
	if at.Namespace != "" && at.Namespace != clusterScope {
		scopes = ast.ArrayTerm(wildcard, namespace)
	}
	verb, group, resource := ast.StringTerm(at.Verb), ast.StringTerm(at.APIGroup), ast.StringTerm(at.Resource)
	resources := ast.ArrayTerm(wildcard, resource)
	if at.Subresource != "" {
		resources = ast.ArrayTerm(wildcard, ast.StringTerm(at.Resource+"/"+at.Subresource), ast.StringTerm("*/"+at.Subresource))
	}
	keys := ast.NewObject(
		ast.Item(inSubjects, ast.ArrayTerm(subjects...)),
		ast.Item(inScopes, scopes),
		ast.Item(inVerbs, ast.ArrayTerm(wildcard, verb)),
		ast.Item(inAPIGroups, ast.ArrayTerm(wildcard, group)),
		ast.Item(inResources, resources),
	)
	return ast.NewObject(
		ast.Item(inUser, user),
		ast.Item(inGroups, ast.ArrayTerm(groups...)),
		ast.Item(inResourceRequest, ast.BooleanTerm(at.ResourceRequest)),
		ast.Item(inVerb, verb),
		ast.Item(inAPIGroup, group),
		ast.Item(inResource, resource),
		ast.Item(inSubresource, ast.StringTerm(at.Subresource)),
		ast.Item(inNamespace, namespace),
		ast.Item(inName, ast.StringTerm(at.Name)),
		ast.Item(inPath, ast.StringTerm(at.Path)),
		ast.Item(inKeys, ast.NewTerm(keys)),
	)
}

// InputJSON is the input document Authorize evaluates for a request, as JSON: with Policy and
// Data it reproduces a decision in opa (opa eval -i input.json ...).
func InputJSON(at authorizer.Attributes) ([]byte, error) {
	if at.User == nil {
		return nil, errNoUser
	}
	v, err := ast.JSON(inputValue(&at))
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
