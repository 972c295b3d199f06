package pki

import (
	"errors"
	"fmt"

	"sigs.k8s.io/yaml"
)

// Kubeconfig describes a kubeconfig file with one cluster, one user and one context joining
// them, as written by WriteKubeconfig.
type Kubeconfig struct {
	// ClusterName names the cluster entry. Required.
	ClusterName string
	// ContextName names the context entry, which becomes current-context. Defaults to
	// UserName@ClusterName.
	ContextName string
	// UserName names the user entry. Required.
	UserName string
	// Server is the API server's URL, such as https://127.0.0.1:6443. Required.
	Server string
	// CAPEM is the PEM CA bundle that the server certificate is verified against
	// (certificate-authority-data). Empty means the client's system roots.
	CAPEM []byte
	// CertPEM and KeyPEM are the user's PEM client certificate and key (client-certificate-data,
	// client-key-data). Both or neither.
	CertPEM, KeyPEM []byte
	// Namespace, if set, is the context's default namespace.
	Namespace string
}

// The kubeconfig schema (clientcmd v1), as far as WriteKubeconfig uses it. []byte fields marshal
// as base64, which is how kubeconfig carries *-data fields.
type kcFile struct {
	APIVersion     string      `json:"apiVersion"`
	Kind           string      `json:"kind"`
	Clusters       []kcCluster `json:"clusters"`
	Users          []kcUser    `json:"users"`
	Contexts       []kcContext `json:"contexts"`
	CurrentContext string      `json:"current-context"`
	Preferences    struct{}    `json:"preferences"`
}

type kcCluster struct {
	Name    string `json:"name"`
	Cluster struct {
		Server                   string `json:"server"`
		CertificateAuthorityData []byte `json:"certificate-authority-data,omitempty"`
	} `json:"cluster"`
}

type kcUser struct {
	Name string `json:"name"`
	User struct {
		ClientCertificateData []byte `json:"client-certificate-data,omitempty"`
		ClientKeyData         []byte `json:"client-key-data,omitempty"`
	} `json:"user"`
}

type kcContext struct {
	Name    string `json:"name"`
	Context struct {
		Cluster   string `json:"cluster"`
		User      string `json:"user"`
		Namespace string `json:"namespace,omitempty"`
	} `json:"context"`
}

// WriteKubeconfig writes k to path as a kubeconfig file (YAML, apiVersion v1, kind Config) whose
// current-context is k's context. The file gets mode 0600 (it holds a private key) and missing
// parent directories are created with mode 0700.
func WriteKubeconfig(path string, k Kubeconfig) error {
	data, err := marshalKubeconfig(k)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, data, 0o600)
}

func marshalKubeconfig(k Kubeconfig) ([]byte, error) {
	switch {
	case k.ClusterName == "":
		return nil, errors.New("pki: kubeconfig cluster name is empty")
	case k.UserName == "":
		return nil, errors.New("pki: kubeconfig user name is empty")
	case k.Server == "":
		return nil, errors.New("pki: kubeconfig server is empty")
	case (len(k.CertPEM) == 0) != (len(k.KeyPEM) == 0):
		return nil, errors.New("pki: kubeconfig needs both a client certificate and key, or neither")
	}
	contextName := k.ContextName
	if contextName == "" {
		contextName = k.UserName + "@" + k.ClusterName
	}

	var cl kcCluster
	cl.Name = k.ClusterName
	cl.Cluster.Server = k.Server
	cl.Cluster.CertificateAuthorityData = k.CAPEM

	var u kcUser
	u.Name = k.UserName
	u.User.ClientCertificateData = k.CertPEM
	u.User.ClientKeyData = k.KeyPEM

	var ctx kcContext
	ctx.Name = contextName
	ctx.Context.Cluster = k.ClusterName
	ctx.Context.User = k.UserName
	ctx.Context.Namespace = k.Namespace

	f := kcFile{
		APIVersion:     "v1",
		Kind:           "Config",
		Clusters:       []kcCluster{cl},
		Users:          []kcUser{u},
		Contexts:       []kcContext{ctx},
		CurrentContext: contextName,
	}
	data, err := yaml.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("pki: marshal kubeconfig: %w", err)
	}
	return data, nil
}
