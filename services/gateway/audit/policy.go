// Package audit is the gateway's audit log: upstream's audit Policy (in audit.platform.io/v1;
// audit.k8s.io/v1 is read too) decides per request which level and stages are recorded, and
// events in upstream's Event shape are written as JSON lines to a file (rotated) or stdout.
//
// The HTTP middleware (Auditor.Handler) owns one record per request. The API layer fills it once
// it knows who asks for what (Begin, right after authentication), adds the impersonated user and
// annotations (authorization decision, admission, deprecation), and the middleware emits
// RequestReceived, ResponseStarted (long-running requests), ResponseComplete or Panic.
package audit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"platform.io/libs/naming"
	"platform.io/services/gateway/auth"
)

// Level is how much of a request an event records (upstream's levels).
type Level string

// The levels, from nothing to everything.
const (
	// LevelNone records nothing.
	LevelNone Level = "None"
	// LevelMetadata records who, what, when and the answer's status: no bodies.
	LevelMetadata Level = "Metadata"
	// LevelRequest adds the request body.
	LevelRequest Level = "Request"
	// LevelRequestResponse adds the response body.
	LevelRequestResponse Level = "RequestResponse"
)

var levelOrder = map[Level]int{LevelNone: 0, LevelMetadata: 1, LevelRequest: 2, LevelRequestResponse: 3}

// AtLeast tells whether l records at least what other records.
func (l Level) AtLeast(other Level) bool { return levelOrder[l] >= levelOrder[other] }

// Stage is the point of a request's life an event is written at.
type Stage string

// The stages, as upstream.
const (
	StageRequestReceived  Stage = "RequestReceived"
	StageResponseStarted  Stage = "ResponseStarted"
	StageResponseComplete Stage = "ResponseComplete"
	StagePanic            Stage = "Panic"
)

var knownStages = []Stage{StageRequestReceived, StageResponseStarted, StageResponseComplete, StagePanic}

// Policy is the audit policy file's content (upstream's audit.k8s.io/v1 Policy).
type Policy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Rules are tried in order; the first that matches sets the level. No match: None.
	Rules []PolicyRule `json:"rules"`
	// OmitStages are never recorded, for any request.
	OmitStages []Stage `json:"omitStages,omitempty"`
	// OmitManagedFields drops metadata.managedFields from recorded bodies (rules may override).
	OmitManagedFields bool `json:"omitManagedFields,omitempty"`
}

// PolicyRule matches requests; every field set must match (an empty field matches everything).
type PolicyRule struct {
	Level      Level    `json:"level"`
	Users      []string `json:"users,omitempty"`
	UserGroups []string `json:"userGroups,omitempty"`
	Verbs      []string `json:"verbs,omitempty"`
	// Resources and Namespaces make a rule match resource requests only.
	Resources  []GroupResources `json:"resources,omitempty"`
	Namespaces []string         `json:"namespaces,omitempty"`
	// NonResourceURLs make a rule match non-resource requests only: exact paths, or a prefix
	// ending in "*".
	NonResourceURLs   []string `json:"nonResourceURLs,omitempty"`
	OmitStages        []Stage  `json:"omitStages,omitempty"`
	OmitManagedFields *bool    `json:"omitManagedFields,omitempty"`
}

// GroupResources names resources of one group: "pods", "pods/status", "pods/*" (every
// subresource), "*/scale", "*"; ResourceNames restricts to named objects.
type GroupResources struct {
	Group         string   `json:"group,omitempty"`
	Resources     []string `json:"resources,omitempty"`
	ResourceNames []string `json:"resourceNames,omitempty"`
}

// Attributes are what the policy matches on.
type Attributes struct {
	User *auth.User
	Verb string
	// ResourceRequest tells which of the two sets below applies.
	ResourceRequest                                              bool
	APIGroup, APIVersion, Resource, Subresource, Namespace, Name string
	Path                                                         string
}

// RequestConfig is the policy's answer for one request.
type RequestConfig struct {
	Level             Level
	OmitStages        []Stage
	OmitManagedFields bool
}

// groupVersions are the apiVersions a policy file may name.
func groupVersions() []string {
	return []string{naming.Group("audit.k8s.io") + "/v1", "audit.k8s.io/v1"}
}

// LoadPolicy reads and checks a policy file (YAML or JSON, strict: unknown fields are errors).
func LoadPolicy(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePolicy(data)
}

// ParsePolicy decodes and checks a policy.
func ParsePolicy(data []byte) (*Policy, error) {
	var p Policy
	if err := yaml.UnmarshalStrict(bytes.TrimSpace(data), &p); err != nil {
		return nil, fmt.Errorf("decoding the audit policy: %w", err)
	}
	if !slices.Contains(groupVersions(), p.APIVersion) || p.Kind != "Policy" {
		return nil, fmt.Errorf("the audit policy must be kind Policy of apiVersion %s, not %s %q", strings.Join(groupVersions(), " or "), p.Kind, p.APIVersion)
	}
	var errs []error
	errs = append(errs, checkStages("omitStages", p.OmitStages)...)
	for i, r := range p.Rules {
		at := fmt.Sprintf("rules[%d]", i)
		if _, ok := levelOrder[r.Level]; !ok {
			errs = append(errs, fmt.Errorf("%s.level: %q is not one of None, Metadata, Request, RequestResponse", at, r.Level))
		}
		errs = append(errs, checkStages(at+".omitStages", r.OmitStages)...)
		if len(r.NonResourceURLs) > 0 && (len(r.Resources) > 0 || len(r.Namespaces) > 0) {
			errs = append(errs, fmt.Errorf("%s: nonResourceURLs cannot be combined with resources or namespaces", at))
		}
		for j, u := range r.NonResourceURLs {
			if i := strings.Index(u, "*"); i >= 0 && i != len(u)-1 {
				errs = append(errs, fmt.Errorf("%s.nonResourceURLs[%d]: %q may only end in *", at, j, u))
			}
		}
		for j, g := range r.Resources {
			if len(g.ResourceNames) > 0 && slices.ContainsFunc(g.Resources, func(s string) bool { return strings.Contains(s, "*") }) {
				errs = append(errs, fmt.Errorf("%s.resources[%d]: resourceNames cannot be combined with wildcard resources", at, j))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("invalid audit policy: %w", err)
	}
	return &p, nil
}

func checkStages(at string, stages []Stage) []error {
	var errs []error
	for i, s := range stages {
		if !slices.Contains(knownStages, s) {
			errs = append(errs, fmt.Errorf("%s[%d]: %q is not a stage", at, i, s))
		}
	}
	return errs
}

// Evaluate is the level, omitted stages and managed-fields choice for a request: the first rule
// that matches, or None.
func (p *Policy) Evaluate(a Attributes) RequestConfig {
	for _, r := range p.Rules {
		if r.matches(a) {
			omit := r.OmitManagedFields
			c := RequestConfig{Level: r.Level, OmitManagedFields: p.OmitManagedFields}
			if omit != nil {
				c.OmitManagedFields = *omit
			}
			c.OmitStages = append(slices.Clone(p.OmitStages), r.OmitStages...)
			return c
		}
	}
	return RequestConfig{Level: LevelNone}
}

func (r *PolicyRule) matches(a Attributes) bool {
	if len(r.Users) > 0 && (a.User == nil || !slices.Contains(r.Users, a.User.Name)) {
		return false
	}
	if len(r.UserGroups) > 0 && (a.User == nil || !slices.ContainsFunc(a.User.Groups, func(g string) bool { return slices.Contains(r.UserGroups, g) })) {
		return false
	}
	if len(r.Verbs) > 0 && !slices.Contains(r.Verbs, a.Verb) {
		return false
	}
	if len(r.Resources) > 0 || len(r.Namespaces) > 0 {
		if !a.ResourceRequest {
			return false
		}
		if len(r.Namespaces) > 0 && !slices.Contains(r.Namespaces, a.Namespace) {
			return false
		}
		if len(r.Resources) > 0 && !slices.ContainsFunc(r.Resources, func(g GroupResources) bool { return g.matches(a) }) {
			return false
		}
	}
	if len(r.NonResourceURLs) > 0 {
		if a.ResourceRequest {
			return false
		}
		return slices.ContainsFunc(r.NonResourceURLs, func(u string) bool {
			if prefix, ok := strings.CutSuffix(u, "*"); ok {
				return strings.HasPrefix(a.Path, prefix)
			}
			return a.Path == u
		})
	}
	return true
}

func (g *GroupResources) matches(a Attributes) bool {
	if g.Group != a.APIGroup {
		return false
	}
	if len(g.Resources) == 0 {
		return true
	}
	full := a.Resource
	if a.Subresource != "" {
		full += "/" + a.Subresource
	}
	for _, res := range g.Resources {
		switch {
		case res == full, res == "*":
		case a.Subresource != "" && res == a.Resource+"/*":
		case a.Subresource != "" && res == "*/"+a.Subresource:
		default:
			continue
		}
		return len(g.ResourceNames) == 0 || slices.Contains(g.ResourceNames, a.Name)
	}
	return false
}
