package manager

import corev1 "k8s.io/api/core/v1"

// CachedNamespace reads a namespace from the manager's shared informer cache (tests only).
func (m *Manager) CachedNamespace(name string) (*corev1.Namespace, error) {
	return m.factories[0].Core().V1().Namespaces().Lister().Get(name)
}
