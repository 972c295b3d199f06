package admission_test

import (
	"slices"
	"strings"
	"testing"

	"platform.io/services/admission/admission"
)

// The spec's default set (release 1.26) plus ValidatingAdmissionPolicy (upstream's default since
// 1.30), in upstream's order (kube-apiserver's AllOrderedPlugins): the oracle for
// Enabled(nil, nil).
var specDefaults = []string{
	"NamespaceLifecycle", "LimitRanger", "ServiceAccount", "TaintNodesByCondition", "PodSecurity",
	"Priority", "DefaultTolerationSeconds", "DefaultStorageClass", "StorageObjectInUseProtection",
	"PersistentVolumeClaimResize", "RuntimeClass", "CertificateApproval", "CertificateSigning",
	"CertificateSubjectRestriction", "DefaultIngressClass", "MutatingAdmissionWebhook",
	"ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook", "ResourceQuota",
}

func TestEnabled(t *testing.T) {
	without := func(names ...string) []string {
		return slices.DeleteFunc(slices.Clone(specDefaults), func(n string) bool { return slices.Contains(names, n) })
	}
	cases := []struct {
		rule            string
		enable, disable []string
		want            []string
	}{
		{rule: "spec: the 1.26 default set when no flag is given", want: specDefaults},
		{
			rule:   "spec: --enable-admission-plugins adds to the defaults; order of the flag is not important",
			enable: []string{"AlwaysDeny", "EventRateLimit", "AlwaysPullImages", "NamespaceAutoProvision"},
			want: append([]string{"NamespaceAutoProvision", "NamespaceLifecycle", "LimitRanger", "ServiceAccount", "TaintNodesByCondition",
				"AlwaysPullImages", "PodSecurity", "Priority", "DefaultTolerationSeconds", "EventRateLimit"},
				append(slices.Clone(specDefaults[7:]), "AlwaysDeny")...),
		},
		{
			rule:    "spec: --disable-admission-plugins disables even default plugins",
			disable: []string{"ServiceAccount", "ResourceQuota", "MutatingAdmissionWebhook"},
			want:    without("ServiceAccount", "ResourceQuota", "MutatingAdmissionWebhook"),
		},
		{
			rule:    "disabling every default leaves only the enabled ones",
			enable:  []string{"AlwaysAdmit"},
			disable: specDefaults,
			want:    []string{"AlwaysAdmit"},
		},
		{rule: "naming a default in --enable-admission-plugins changes nothing", enable: []string{"Priority"}, want: specDefaults},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			got, err := admission.Enabled(c.enable, c.disable)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("Enabled(%v, %v)\n got  %v\n want %v", c.enable, c.disable, got, c.want)
			}
		})
	}
}

func TestEnabledErrors(t *testing.T) {
	cases := []struct {
		rule            string
		enable, disable []string
		want            []string // substrings of the error
	}{
		{
			rule:   "an unknown plugin refuses to start, naming the flag and the plugin",
			enable: []string{"NoSuchPlugin"},
			want:   []string{"--enable-admission-plugins", `"NoSuchPlugin"`, "known: AlwaysAdmit, AlwaysDeny"},
		},
		{
			rule:    "unknown names in --disable-admission-plugins are errors too (upstream)",
			disable: []string{"Nope"},
			want:    []string{"--disable-admission-plugins", `"Nope"`},
		},
		{
			rule:   "PodSecurityPolicy was removed upstream: the message says what replaces it",
			enable: []string{"PodSecurityPolicy"},
			want:   []string{"--enable-admission-plugins", "removed upstream in 1.25", "use PodSecurity"},
		},
		{
			rule:   "PersistentVolumeLabel was removed upstream",
			enable: []string{"PersistentVolumeLabel"},
			want:   []string{"--enable-admission-plugins", "PersistentVolumeLabel was removed upstream in 1.31"},
		},
		{
			rule:    "upstream: a plugin named in both flags is refused",
			enable:  []string{"AlwaysPullImages", "LimitRanger"},
			disable: []string{"LimitRanger", "AlwaysPullImages"},
			want:    []string{"--enable-admission-plugins and --disable-admission-plugins both name AlwaysPullImages, LimitRanger"},
		},
		{
			rule:    "every error is reported at once",
			enable:  []string{"A1"},
			disable: []string{"B2"},
			want:    []string{`"A1"`, `"B2"`},
		},
		{
			rule:   "names are case-sensitive, as upstream",
			enable: []string{"alwayspullimages"},
			want:   []string{`"alwayspullimages"`},
		},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			got, err := admission.Enabled(c.enable, c.disable)
			if err == nil {
				t.Fatalf("Enabled(%v, %v) = %v, want an error", c.enable, c.disable, got)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// Order is upstream's: every default is in it, the webhooks, ResourceQuota and AlwaysDeny come
// last, and the removed plugins are not runnable.
func TestOrder(t *testing.T) {
	for _, n := range admission.DefaultEnabled {
		if !slices.Contains(admission.Order, n) {
			t.Errorf("default %s is not in Order", n)
		}
	}
	if !sameSet(admission.DefaultEnabled, specDefaults) {
		t.Errorf("DefaultEnabled = %v, want the spec's %v", admission.DefaultEnabled, specDefaults)
	}
	tail := admission.Order[len(admission.Order)-5:]
	if !slices.Equal(tail, []string{"MutatingAdmissionWebhook", "ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook", "ResourceQuota", "AlwaysDeny"}) {
		t.Errorf("Order ends with %v: upstream runs the webhooks and policies, then ResourceQuota, then AlwaysDeny last", tail)
	}
	if admission.Order[0] != "AlwaysAdmit" || admission.Order[1] != "NamespaceAutoProvision" || admission.Order[2] != "NamespaceLifecycle" {
		t.Errorf("Order starts with %v, want AlwaysAdmit, NamespaceAutoProvision, NamespaceLifecycle", admission.Order[:3])
	}
	seen := map[string]bool{}
	for _, n := range admission.Order {
		if seen[n] {
			t.Errorf("%s twice in Order", n)
		}
		seen[n] = true
		if _, removed := admission.Removed[n]; removed {
			t.Errorf("removed plugin %s is in Order", n)
		}
	}
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

func TestRegisterUnknownPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "NotAPlugin is not in Order") {
			t.Fatalf("recover() = %v, want a panic naming the plugin", r)
		}
	}()
	admission.NewRegistry().Register("NotAPlugin", nil)
}
