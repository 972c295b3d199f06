// Package basic holds the built-in admission plugins that need no stored objects, or only their
// own state: AlwaysAdmit, AlwaysDeny, DenyServiceExternalIPs, EventRateLimit and
// ImagePolicyWebhook, each as upstream's plugin of the same name in Kubernetes 1.33.
package basic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"platform.io/libs/naming"
	"platform.io/services/admission/admission"
)

// Register adds the factories of this package's plugins to r.
func Register(r *admission.Registry) {
	r.Register(admission.AlwaysAdmit, newAlwaysAdmit)
	r.Register(admission.AlwaysDeny, newAlwaysDeny)
	r.Register(admission.DenyServiceExternalIPs, newDenyServiceExternalIPs)
	r.Register(admission.EventRateLimit, newEventRateLimit)
	r.Register(admission.ImagePolicyWebhook, newImagePolicyWebhook)
}

// forbidden is upstream's admission.NewForbidden: 403 naming the resource and the object, not
// wrapping an error that already is a Forbidden.
func forbidden(a *admission.Attributes, err error) error {
	if apierrors.IsForbidden(err) {
		return err
	}
	return admission.Forbidden(a, err)
}

// alwaysAdmit is AlwaysAdmit: it admits everything, so it acts on nothing and declares no
// interest (enabling it costs no request a hop). Deprecated upstream.
type alwaysAdmit struct{}

func newAlwaysAdmit(deps admission.Deps, _ []byte) (admission.Plugin, error) {
	deps.Log.Warn("the AlwaysAdmit admission plugin is deprecated and admits everything", slog.String("plugin", admission.AlwaysAdmit))
	return alwaysAdmit{}, nil
}

func (alwaysAdmit) Name() string { return admission.AlwaysAdmit }

// Interests: none; admitting needs no call.
func (alwaysAdmit) Interests() []admission.Interest { return nil }

func (alwaysAdmit) Admit(context.Context, *admission.Attributes) error { return nil }

func (alwaysAdmit) Validate(context.Context, *admission.Attributes) error { return nil }

// alwaysDeny is AlwaysDeny: it rejects every write, in both phases, with upstream's message.
// Deprecated upstream; for tests.
type alwaysDeny struct{}

func newAlwaysDeny(deps admission.Deps, _ []byte) (admission.Plugin, error) {
	deps.Log.Warn("the AlwaysDeny admission plugin is deprecated and rejects every write", slog.String("plugin", admission.AlwaysDeny))
	return alwaysDeny{}, nil
}

func (alwaysDeny) Name() string { return admission.AlwaysDeny }

// Interests: every operation on every resource and subresource of every group.
func (alwaysDeny) Interests() []admission.Interest {
	return []admission.Interest{{Operations: []admission.Operation{"*"}, APIGroups: []string{"*"}, Resources: []string{"*", "*/*"}, Scope: "*"}}
}

var errDenyAll = errors.New("admission control is denying all modifications")

func (alwaysDeny) Admit(_ context.Context, a *admission.Attributes) error {
	return forbidden(a, errDenyAll)
}

func (alwaysDeny) Validate(_ context.Context, a *admission.Attributes) error {
	return forbidden(a, errDenyAll)
}

// decodeJSON reads a plugin's JSON configuration.
func decodeJSON(config []byte, v any) error { return json.Unmarshal(config, v) }

// checkKind accepts a configuration whose apiVersion and kind are absent, or are kind in
// groupVersion (upstream's spelling of the group read as Platform's).
func checkKind(apiVersion, kind, wantKind, groupVersion string) error {
	if apiVersion == "" && kind == "" {
		return nil
	}
	gv := apiVersion
	if i := strings.LastIndex(gv, "/"); i >= 0 {
		gv = naming.Group(gv[:i]) + gv[i:]
	}
	if kind != wantKind || gv != groupVersion {
		return fmt.Errorf("the configuration must be kind %s in %s, not %q in %q", wantKind, groupVersion, kind, apiVersion)
	}
	return nil
}
