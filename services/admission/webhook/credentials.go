package webhook

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"platform.io/libs/naming"
)

// Plugin configuration (the webhook plugins' entry of the admission configuration file): kind
// WebhookAdmissionConfiguration (or WebhookAdmission) in apiserver.config.platform.io/v1, or the
// deprecated apiserver.platform.io/v1alpha1; upstream's group names are read as the same.
var (
	configGroupVersion           = naming.Group("apiserver.config.k8s.io") + "/v1"
	deprecatedConfigGroupVersion = naming.Group("apiserver.k8s.io") + "/v1alpha1"
)

type pluginConfig struct {
	APIVersion     string `json:"apiVersion"`
	Kind           string `json:"kind"`
	KubeConfigFile string `json:"kubeConfigFile"`
}

// parseConfig reads a plugin's configuration: the kubeConfigFile path ("" when there is none),
// and whether the deprecated version was used.
func parseConfig(data []byte) (kubeConfigFile string, deprecated bool, err error) {
	if len(data) == 0 || string(data) == "null" {
		return "", false, nil
	}
	var c pluginConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return "", false, fmt.Errorf("reading the plugin configuration: %w", err)
	}
	gv := c.APIVersion
	if i := strings.LastIndex(gv, "/"); i >= 0 {
		gv = naming.Group(gv[:i]) + gv[i:]
	}
	switch gv {
	case configGroupVersion:
	case deprecatedConfigGroupVersion:
		deprecated = true
	default:
		return "", false, fmt.Errorf("apiVersion must be %s (or the deprecated %s), not %q", configGroupVersion, deprecatedConfigGroupVersion, c.APIVersion)
	}
	if c.Kind != "WebhookAdmissionConfiguration" && c.Kind != "WebhookAdmission" {
		return "", false, fmt.Errorf("kind must be WebhookAdmissionConfiguration, not %q", c.Kind)
	}
	if c.KubeConfigFile != "" && !filepath.IsAbs(c.KubeConfigFile) {
		return "", false, fmt.Errorf("kubeConfigFile: Invalid value: %q: must be an absolute file path", c.KubeConfigFile)
	}
	return c.KubeConfigFile, deprecated, nil
}

// credential is what the dispatcher presents to one webhook: a client certificate, a bearer
// token, basic authentication, or nothing; and optionally identities to impersonate.
type credential struct {
	cert          *tls.Certificate
	token         string
	username      string
	password      string
	impersonate   string
	impersonateGr []string
	impersonateEx map[string][]string
}

// credentials are the users of the kubeConfigFile, keyed by the names the spec's matching rules
// look up: "<service>.<namespace>.svc" (with ":<port>" for other ports than 443), "host[:port]"
// for URL webhooks, "*.<suffix>" wildcards and "*" as the default; the current context's user
// comes last.
type credentials struct {
	users       map[string]*credential
	currentUser string
}

type kubeconfigFile struct {
	CurrentContext string `json:"current-context"`
	Contexts       []struct {
		Name    string `json:"name"`
		Context struct {
			User string `json:"user"`
		} `json:"context"`
	} `json:"contexts"`
	Users []struct {
		Name string       `json:"name"`
		User kubeconfUser `json:"user"`
	} `json:"users"`
}

type kubeconfUser struct {
	ClientCertificate     string              `json:"client-certificate"`
	ClientCertificateData []byte              `json:"client-certificate-data"`
	ClientKey             string              `json:"client-key"`
	ClientKeyData         []byte              `json:"client-key-data"`
	Token                 string              `json:"token"`
	TokenFile             string              `json:"tokenFile"`
	Username              string              `json:"username"`
	Password              string              `json:"password"`
	Impersonate           string              `json:"as"`
	ImpersonateGroups     []string            `json:"as-groups"`
	ImpersonateUserExtra  map[string][]string `json:"as-user-extra"`
	Exec                  json.RawMessage     `json:"exec"`
	AuthProvider          json.RawMessage     `json:"auth-provider"`
}

// loadCredentials reads a kubeconfig file's users; relative file names are relative to the
// file's directory, as kubectl reads them.
func loadCredentials(path string) (*credentials, error) {
	c := &credentials{users: map[string]*credential{}}
	if path == "" {
		return c, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kubeConfigFile: %w", err)
	}
	data, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("kubeConfigFile %s: %w", path, err)
	}
	var kc kubeconfigFile
	if err := json.Unmarshal(data, &kc); err != nil {
		return nil, fmt.Errorf("kubeConfigFile %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	resolve := func(f string) string {
		if f == "" || filepath.IsAbs(f) {
			return f
		}
		return filepath.Join(dir, f)
	}
	for _, u := range kc.Users {
		cred, err := u.User.credential(resolve)
		if err != nil {
			return nil, fmt.Errorf("kubeConfigFile %s: user %q: %w", path, u.Name, err)
		}
		c.users[u.Name] = cred
	}
	for _, ctx := range kc.Contexts {
		if ctx.Name == kc.CurrentContext && kc.CurrentContext != "" {
			c.currentUser = ctx.Context.User
		}
	}
	return c, nil
}

func (u *kubeconfUser) credential(resolve func(string) string) (*credential, error) {
	if len(u.AuthProvider) > 0 && string(u.AuthProvider) != "null" {
		return nil, errors.New("auth provider not supported")
	}
	if len(u.Exec) > 0 && string(u.Exec) != "null" {
		return nil, errors.New("exec credential plugins are not supported for webhook credentials")
	}
	c := &credential{impersonate: u.Impersonate, impersonateGr: u.ImpersonateGroups, impersonateEx: u.ImpersonateUserExtra}
	// Precedence as upstream: a token (inline, else from tokenFile), a client certificate, basic
	// authentication; a user may carry several.
	switch {
	case u.Token != "":
		c.token = u.Token
	case u.TokenFile != "":
		tok, err := os.ReadFile(resolve(u.TokenFile))
		if err != nil {
			return nil, fmt.Errorf("tokenFile: %w", err)
		}
		c.token = strings.TrimSpace(string(tok))
	}
	if u.ClientCertificate != "" || len(u.ClientCertificateData) > 0 {
		certPEM, keyPEM := u.ClientCertificateData, u.ClientKeyData
		var err error
		if len(certPEM) == 0 {
			if certPEM, err = os.ReadFile(resolve(u.ClientCertificate)); err != nil {
				return nil, fmt.Errorf("client-certificate: %w", err)
			}
		}
		if len(keyPEM) == 0 {
			if u.ClientKey == "" {
				return nil, errors.New("client-certificate is set but client-key is not")
			}
			if keyPEM, err = os.ReadFile(resolve(u.ClientKey)); err != nil {
				return nil, fmt.Errorf("client-key: %w", err)
			}
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("client certificate and key: %w", err)
		}
		c.cert = &cert
	}
	c.username, c.password = u.Username, u.Password
	return c, nil
}

// lookup returns the credential for a target ("host:port"), by upstream's rules: the exact
// name; "*." wildcards from the longest suffix; the same two without the port when it is 443;
// "*"; the current context's user; nothing (no credentials).
func (c *credentials) lookup(target string) *credential {
	if c == nil || len(c.users) == 0 {
		return nil
	}
	if cred := c.exactOrWildcard(target); cred != nil {
		return cred
	}
	if host, port, err := net.SplitHostPort(target); err == nil && port == "443" {
		if cred := c.exactOrWildcard(host); cred != nil {
			return cred
		}
	}
	if cred, ok := c.users["*"]; ok {
		return cred
	}
	if cred, ok := c.users[c.currentUser]; ok && c.currentUser != "" {
		return cred
	}
	return nil
}

func (c *credentials) exactOrWildcard(target string) *credential {
	if cred, ok := c.users[target]; ok {
		return cred
	}
	steps := strings.Split(target, ".")
	for i := 1; i < len(steps); i++ {
		if cred, ok := c.users["*."+strings.Join(steps[i:], ".")]; ok {
			return cred
		}
	}
	return nil
}
