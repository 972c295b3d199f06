package bootstrappolicy

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"platform.io/libs/naming"
)

// ExtensionAPIServerAuthentication is the ConfigMap in the system namespace that holds the
// client CA and request-header settings extension servers read to authenticate delegated
// requests.
const ExtensionAPIServerAuthentication = "extension-apiserver-authentication"

func role(namespace, name string, rules ...rbacv1.PolicyRule) rbacv1.Role {
	return rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacGroup + "/v1", Kind: "Role"},
		ObjectMeta: defaultMeta(name, namespace, nil),
		Rules:      rules,
	}
}

func roleBinding(namespace, name, roleName string, subjects []rbacv1.Subject) rbacv1.RoleBinding {
	return rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacGroup + "/v1", Kind: "RoleBinding"},
		ObjectMeta: defaultMeta(name, namespace, nil),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacGroup, Kind: "Role", Name: roleName},
		Subjects:   subjects,
	}
}

// NamespaceRoles are the default Roles, by namespace: upstream's in the system and public
// namespaces (extension servers' authentication reader, the bootstrap signer and token cleaner
// controllers) and the cluster-info reader kubeadm adds for TLS bootstrapping.
func NamespaceRoles() map[string][]rbacv1.Role {
	return map[string][]rbacv1.Role{
		naming.SystemNamespace: {
			role(naming.SystemNamespace, "extension-apiserver-authentication-reader",
				newRule(read...).groups(legacyGroup).resources("configmaps").names(ExtensionAPIServerAuthentication).rule(),
			),
			role(naming.SystemNamespace, BootstrapSignerRole,
				newRule(read...).groups(legacyGroup).resources("secrets").rule(),
			),
			role(naming.SystemNamespace, TokenCleanerRole,
				newRule("delete", "get", "list", "watch").groups(legacyGroup).resources("secrets").rule(),
				eventsRule(),
			),
		},
		naming.PublicNamespace: {
			role(naming.PublicNamespace, BootstrapSignerRole,
				newRule(read...).groups(legacyGroup).resources("configmaps").rule(),
				newRule("update").groups(legacyGroup).resources("configmaps").names(ClusterInfoConfigMap).rule(),
				eventsRule(),
			),
			role(naming.PublicNamespace, ClusterInfoReader,
				newRule("get").groups(legacyGroup).resources("configmaps").names(ClusterInfoConfigMap).rule(),
			),
		},
	}
}

// NamespaceRoleBindings are the default RoleBindings, by namespace, binding NamespaceRoles.
func NamespaceRoleBindings() map[string][]rbacv1.RoleBinding {
	bootstrapSigner := []rbacv1.Subject{subjectServiceAccount(naming.SystemNamespace, "bootstrap-signer")}
	return map[string][]rbacv1.RoleBinding{
		naming.SystemNamespace: {
			// Upstream binds the controller manager and the scheduler; Platform has no scheduler.
			roleBinding(naming.SystemNamespace, "system::extension-apiserver-authentication-reader",
				"extension-apiserver-authentication-reader", subjectUsers(naming.ControllerManagerUser)),
			roleBinding(naming.SystemNamespace, BootstrapSignerRole, BootstrapSignerRole, bootstrapSigner),
			roleBinding(naming.SystemNamespace, TokenCleanerRole, TokenCleanerRole,
				[]rbacv1.Subject{subjectServiceAccount(naming.SystemNamespace, "token-cleaner")}),
		},
		naming.PublicNamespace: {
			roleBinding(naming.PublicNamespace, BootstrapSignerRole, BootstrapSignerRole, bootstrapSigner),
			// Everyone, with or without credentials: a joining node reads cluster-info before it
			// has any.
			roleBinding(naming.PublicNamespace, ClusterInfoReader, ClusterInfoReader,
				subjectGroups(GroupUnauthenticated, GroupAuthenticated)),
		},
	}
}
