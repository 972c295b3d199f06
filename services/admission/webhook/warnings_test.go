package webhook

import (
	"strings"
	"testing"

	"platform.io/services/admission/admission"
)

// The plugin applies the rules to what the request already carries plus a webhook's warnings.
func TestWarningAdder(t *testing.T) {
	a := &admission.Attributes{}
	a.AddWarning("from a plugin")
	var w warningAdder
	w.add(a, []string{"from a plugin", "new"})
	if got := a.Warnings(); strings.Join(got, "|") != "from a plugin|new" {
		t.Errorf("got %q", got)
	}
}
