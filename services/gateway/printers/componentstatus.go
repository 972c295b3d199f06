package printers

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ComponentStatus columns are upstream's: the Healthy condition as "Healthy", "Unhealthy" or
// "Unknown", with its message and error.
func init() {
	register(func(o *corev1.ComponentStatus, _ time.Time) []any {
		status, message, errText := "Unknown", "", ""
		for _, c := range o.Conditions {
			if c.Type != corev1.ComponentHealthy {
				continue
			}
			status = "Unhealthy"
			if c.Status == corev1.ConditionTrue {
				status = "Healthy"
			}
			message, errText = c.Message, c.Error
		}
		return []any{o.Name, status, message, errText}
	}, nameColumn,
		text("Status", "Status of the component conditions"),
		text("Message", "Message of the component conditions"),
		text("Error", "Error of the component conditions"))
}
