package naming

import (
	"strings"
	"testing"
)

// use switches the profile for a test and restores the one chosen at start-up afterwards.
func use(t *testing.T, name string) {
	t.Helper()
	was, wasName, wasErr := profile, profileName, profileErr
	profile, profileName, profileErr = profiles[name], name, nil
	apply()
	t.Cleanup(func() {
		profile, profileName, profileErr = was, wasName, wasErr
		apply()
	})
}

func TestGroup(t *testing.T) {
	use(t, PlatformProfile)
	for upstream, want := range map[string]string{
		"":                             "",
		"apps":                         "apps",
		"batch":                        "batch",
		"rbac.authorization.k8s.io":    "rbac.authorization.platform.io",
		"flowcontrol.apiserver.k8s.io": "flowcontrol.apiserver.platform.io",
		"example.com":                  "example.com",
		"notk8s.io":                    "notk8s.io",
	} {
		if got := Group(upstream); got != want {
			t.Errorf("Group(%q) = %q, want %q", upstream, got, want)
		}
	}
}

// TestKubernetesProfile checks that the kubernetes profile speaks upstream's names: every
// identifier tools hard-code, spelled exactly as upstream spells it.
func TestKubernetesProfile(t *testing.T) {
	use(t, KubernetesProfile)
	for _, g := range []string{"", "apps", "rbac.authorization.k8s.io", "example.com"} {
		if got := Group(g); got != g {
			t.Errorf("Group(%q) = %q in the kubernetes profile", g, got)
		}
	}
	for got, want := range map[string]string{
		GroupSuffix:                     "k8s.io",
		Domain:                          "kubernetes.io",
		MetaGroup:                       "meta.k8s.io",
		ProtobufMediaType:               "application/vnd.kubernetes.protobuf",
		SystemNamespace:                 "kube-system",
		PublicNamespace:                 "kube-public",
		NodeLeaseNamespace:              "kube-node-lease",
		ExecInfoEnv:                     "KUBERNETES_EXEC_INFO",
		SecretTypeServiceAccountToken:   "kubernetes.io/service-account-token",
		SecretTypeBootstrapToken:        "bootstrap.kubernetes.io/token",
		LegacyServiceAccountIssuer:      "kubernetes/serviceaccount",
		ControllerManagerUser:           "system:kube-controller-manager",
		AutoupdateAnnotation:            "rbac.authorization.kubernetes.io/autoupdate",
		SignerAPIServerClient:           "kubernetes.io/kube-apiserver-client",
		SignerAPIServerClientKubelet:    "kubernetes.io/kube-apiserver-client-kubelet",
		SignerKubeletServing:            "kubernetes.io/kubelet-serving",
		SignerLegacyUnknown:             "kubernetes.io/legacy-unknown",
		RootCAConfigMap:                 "kube-root-ca.crt",
		ServiceAccountTokenMountPath:    "/var/run/secrets/kubernetes.io/serviceaccount",
		ServiceAccountTokenVolumePrefix: "kube-api-access-",
		PodSecurityLabelPrefix:          "pod-security.kubernetes.io/",
		ImagePolicyAnnotationInfix:      ".image-policy.k8s.io/",
		LabelHostname:                   "kubernetes.io/hostname",
		TaintNodeNotReady:               "node.kubernetes.io/not-ready",
		UserExtraKey("pod-name"):        "authentication.kubernetes.io/pod-name",
		AggregatorAutomanagedLabel:      "kube-aggregator.kubernetes.io/automanaged",
		AggregatorUser:                  "system:kube-aggregator",
		APIServerServiceProvider:        "kubernetes",
		APIServerFieldManager:           "kube-apiserver",
		LabelServiceName:                "kubernetes.io/service-name",
		LabelSkipMirror:                 "endpointslice.kubernetes.io/skip-mirror",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

// TestPlatformProfile checks the default profile's spelling of the same identifiers.
func TestPlatformProfile(t *testing.T) {
	use(t, PlatformProfile)
	for got, want := range map[string]string{
		MetaGroup:                  "meta.platform.io",
		ProtobufMediaType:          "application/vnd.platform.protobuf",
		SystemNamespace:            "platform-system",
		PublicNamespace:            "platform-public",
		ExecInfoEnv:                "PLATFORM_EXEC_INFO",
		SignerAPIServerClient:      "platform.io/platform-apiserver-client",
		RootCAConfigMap:            "platform-root-ca.crt",
		ControllerManagerUser:      "system:platform-controller-manager",
		UserExtraKey("pod-name"):   "authentication.platform.io/pod-name",
		AggregatorAutomanagedLabel: "platform-aggregator.platform.io/automanaged",
		AggregatorUser:             "system:platform-aggregator",
		APIServerServiceProvider:   "platform",
		APIServerFieldManager:      "platform-apiserver",
		LabelServiceName:           "platform.io/service-name",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestProfileFromArgs(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--secure-port=6443"}, ""},
		{[]string{"--naming-profile=kubernetes"}, "kubernetes"},
		{[]string{"--naming-profile", "kubernetes", "--v=2"}, "kubernetes"},
		{[]string{"--naming-profile=kubernetes", "--naming-profile=platform"}, "platform"},
		{[]string{"--", "--naming-profile=kubernetes"}, ""},
		{[]string{"--naming-profile"}, ""},
	} {
		if got := profileFromArgs(c.args); got != c.want {
			t.Errorf("profileFromArgs(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}

func TestCheckProfile(t *testing.T) {
	use(t, KubernetesProfile)
	if err := CheckProfile(KubernetesProfile); err != nil {
		t.Errorf("the chosen profile: %v", err)
	}
	if err := CheckProfile(PlatformProfile); err == nil || !strings.Contains(err.Error(), "chosen at start-up") {
		t.Errorf("another profile than the chosen one: %v", err)
	}
}
