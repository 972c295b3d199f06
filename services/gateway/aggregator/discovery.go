package aggregator

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
)

// compareVersions is upstream's kube-aware version order (v2 > v1 > v1beta1 > v1alpha1 > other).
var compareVersions = version.CompareKubeAwareVersionStrings

// discoveryGroups lists the groups of remote APIServices for /apis and /apis/<group>, as
// upstream orders them: groups by their highest groupPriorityMinimum (highest first, then by
// name), versions by versionPriority (highest first, then kube-aware version order), the first
// version preferred. Unavailable APIServices are listed too, as upstream lists them.
func (ag *Aggregator) discoveryGroups() []metav1.APIGroup {
	groups := sortedRemoteGroups(ag.current().all)
	out := make([]metav1.APIGroup, 0, len(groups))
	for _, e := range groups {
		g := metav1.APIGroup{Name: e.name}
		for _, s := range e.versions {
			g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: s.GroupVersion().String(), Version: s.Spec.Version})
		}
		g.PreferredVersion = g.Versions[0]
		out = append(out, g)
	}
	return out
}
