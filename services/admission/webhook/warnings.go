package webhook

import (
	"sync"

	"platform.io/libs/warning"
	"platform.io/services/admission/admission"
)

// warningAdder adds a webhook's warnings to a request, applying the limits to what the request
// already carries plus the new messages (the ones already recorded are not rewritten; the new
// ones are truncated or dropped as the limits say).
type warningAdder struct {
	mu sync.Mutex
}

func (w *warningAdder) add(a *admission.Attributes, warnings []string) {
	if len(warnings) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	existing := a.Warnings()
	all := append(append([]string(nil), existing...), warnings...)
	limited := warning.LimitEach(all)
	have := map[string]bool{}
	for _, e := range existing {
		have[e] = true
	}
	for i := len(existing); i < len(all); i++ {
		if t := limited[i]; t != "" && !have[t] {
			have[t] = true
			a.AddWarning(t)
		}
	}
}
