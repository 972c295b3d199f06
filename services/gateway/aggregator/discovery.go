package aggregator

import (
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"

	"platform.io/services/gateway/aggregator/apiregistration"
)

// discoveryGroups lists the groups of remote APIServices for /apis and /apis/<group>, as
// upstream orders them: groups by their highest groupPriorityMinimum (highest first, then by
// name), versions by versionPriority (highest first, then kube-aware version order), the first
// version preferred. Unavailable APIServices are listed too, as upstream lists them.
func (ag *Aggregator) discoveryGroups() []metav1.APIGroup {
	byGroup := map[string][]*apiregistration.APIService{}
	for _, svc := range ag.current().all {
		if svc.Spec.Service == nil {
			continue
		}
		byGroup[svc.Spec.Group] = append(byGroup[svc.Spec.Group], svc)
	}
	type entry struct {
		name     string
		priority int32
		versions []*apiregistration.APIService
	}
	var entries []entry
	for name, list := range byGroup {
		e := entry{name: name, versions: list}
		for _, s := range list {
			if s.Spec.GroupPriorityMinimum > e.priority {
				e.priority = s.Spec.GroupPriorityMinimum
			}
		}
		sort.Slice(list, func(i, j int) bool {
			a, b := list[i].Spec, list[j].Spec
			if a.VersionPriority != b.VersionPriority {
				return a.VersionPriority > b.VersionPriority
			}
			return version.CompareKubeAwareVersionStrings(a.Version, b.Version) > 0
		})
		entries = append(entries, e)
	}
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].priority != entries[j].priority {
			return entries[i].priority > entries[j].priority
		}
		return entries[i].name < entries[j].name
	})
	out := make([]metav1.APIGroup, 0, len(entries))
	for _, e := range entries {
		g := metav1.APIGroup{Name: e.name}
		for _, s := range e.versions {
			g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: s.GroupVersion().String(), Version: s.Spec.Version})
		}
		g.PreferredVersion = g.Versions[0]
		out = append(out, g)
	}
	return out
}
