// Package webhook is the admission webhook dispatcher: the MutatingAdmissionWebhook and
// ValidatingAdmissionWebhook plugins, which call the webhooks of the stored
// MutatingWebhookConfigurations and ValidatingWebhookConfigurations with an AdmissionReview, as
// upstream (release 1.33) does.
//
// Matching: configurations sorted by name, each one's webhooks in order; rules (operations,
// groups with upstream's names read as Platform's, versions, resources and subresources,
// scope), namespaceSelector, objectSelector, matchPolicy, and matchConditions in CEL (package
// matchconditions). Requests on the webhook configurations themselves never go to webhooks.
//
// Calls: clientConfig url, or service resolved through its Service object; caBundle, else the
// system roots; credentials from the plugins' kubeConfigFile; HTTP/1.1 POST of an AdmissionReview
// (admission.platform.io, in the first version of admissionReviewVersions the dispatcher speaks: v1,
// v1beta1), a fresh uid per call, the answer read in the version sent (at most MaxResponseBytes).
// Mutating webhooks run in order, each one's JSON patch applied before the next; validating
// webhooks run in parallel. One time budget bounds every webhook call of a request (see budget).
//
// Signals: audit annotations (mutation.webhook.admission.<suffix>/round_<r>_index_<i> for every
// mutating call, patch.webhook.admission.<suffix>/... for every applied patch, failed-open
// annotations, the webhooks' own annotations under "<webhook>/<key>"), warnings under the spec's
// size rules (libs/warning), and upstream's metrics (SetMetrics).
package webhook

import (
	"platform.io/services/admission/admission"
)

// Register adds the MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins. The plugins
// built from one registry share the requests' time budgets, so the mutating and validating
// webhooks of a request count against the same one.
func Register(r *admission.Registry) {
	shared := newBudgets()
	r.Register(admission.MutatingAdmissionWebhook, func(deps admission.Deps, config []byte) (admission.Plugin, error) {
		return newMutating(deps, config, shared)
	})
	r.Register(admission.ValidatingAdmissionWebhook, func(deps admission.Deps, config []byte) (admission.Plugin, error) {
		return newValidating(deps, config, shared)
	})
}
