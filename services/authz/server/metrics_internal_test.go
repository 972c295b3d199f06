package server

import (
	"errors"
	"testing"

	"platform.io/services/authz/authorizer"
)

// authorization_attempts_total{result}: a decision wins over a failed mode (the chain goes on
// past a failing mode and another decided); a failure with no decision is an error, not a
// no-opinion (the caller could not have been allowed, but the policy did not say so).
func TestAttemptResult(t *testing.T) {
	failed := errors.New("webhook unreachable")
	for _, c := range []struct {
		d    authorizer.Decision
		err  error
		want string
	}{
		{authorizer.Allow, nil, "allowed"},
		{authorizer.Allow, failed, "allowed"},
		{authorizer.Deny, nil, "denied"},
		{authorizer.Deny, failed, "denied"},
		{authorizer.NoOpinion, nil, "no-opinion"},
		{authorizer.NoOpinion, failed, "error"},
	} {
		if got := attemptResult(c.d, c.err); got != c.want {
			t.Errorf("attemptResult(%v, %v) = %q, want %q", c.d, c.err, got, c.want)
		}
	}
}
