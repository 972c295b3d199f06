package apiserver

import (
	"fmt"
	"net/http"
	"strings"
	"unicode"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Field ownership (metadata.managedFields) and server-side apply come from structured-merge-diff
// through apimachinery's managedfields.FieldManager, as upstream's do. Each kind's strategy
// builds its FieldManagers (one per subresource, on first use) with its type converter: the real
// schemas of built-in kinds, the definition's schemas for custom resources.

// maxFieldManagerLength is upstream's bound on a fieldManager name.
const maxFieldManagerLength = 128

// fieldManagerName reads ?fieldManager, or derives the manager from the user agent (the part
// before the first "/", as upstream does) for writes that name none.
func fieldManagerName(r *http.Request, required bool) (string, error) {
	name := r.URL.Query().Get("fieldManager")
	if name == "" {
		if required {
			return "", apierrors.NewBadRequest("fieldManager is required for apply requests (PatchOptions.fieldManager: Required value)")
		}
		ua := r.UserAgent()
		if i := strings.Index(ua, "/"); i >= 0 {
			ua = ua[:i]
		}
		if len(ua) > maxFieldManagerLength {
			ua = ua[:maxFieldManagerLength]
		}
		return ua, nil
	}
	if len(name) > maxFieldManagerLength {
		return "", apierrors.NewBadRequest(fmt.Sprintf("fieldManager must be at most %d characters", maxFieldManagerLength))
	}
	for _, c := range name {
		if !unicode.IsPrint(c) {
			return "", apierrors.NewBadRequest("fieldManager must contain printable characters only")
		}
	}
	return name, nil
}
