package webhook

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// The budget rule: every call ends by start + longest timeout so far + ChainMargin, and by its
// own timeout.
func TestBudgetDeadline(t *testing.T) {
	start := time.Unix(1000, 0)
	b := &budget{}
	d, byChain := b.deadline(start, 5*time.Second)
	if !d.Equal(start.Add(5*time.Second)) || byChain {
		t.Errorf("first call: %v %v", d.Sub(start), byChain)
	}
	// 4s later a 5s webhook: the chain ends at 5s+margin.
	d, byChain = b.deadline(start.Add(4*time.Second), 5*time.Second)
	if !d.Equal(start.Add(5*time.Second+ChainMargin)) || !byChain {
		t.Errorf("second call: %v %v", d.Sub(start), byChain)
	}
	// A longer webhook extends the budget to its own timeout.
	d, _ = b.deadline(start.Add(4*time.Second), 10*time.Second)
	if !d.Equal(start.Add(10*time.Second + ChainMargin)) {
		t.Errorf("longer webhook: %v", d.Sub(start))
	}
	// A short webhook late in the chain keeps its own timeout.
	d, byChain = b.deadline(start.Add(5*time.Second), time.Second)
	if !d.Equal(start.Add(6*time.Second)) || byChain {
		t.Errorf("short webhook: %v %v", d.Sub(start), byChain)
	}
	// Budgets are per request uid and forgotten after they can no longer matter.
	bs := newBudgets()
	if bs.forRequest("a", start) != bs.forRequest("a", start) || bs.forRequest("a", start) == bs.forRequest("b", start) {
		t.Error("budgets are not per uid")
	}
	if bs.forRequest("", start) == bs.forRequest("", start) {
		t.Error("requests without uid share a budget")
	}
	bs.forRequest("a", start).deadline(start, time.Second)
	bs.forRequest("b", start).deadline(start, time.Second)
	bs.forRequest("c", start.Add(2*time.Minute))
	if n := bs.len(); n != 1 {
		t.Errorf("%d budgets kept after two minutes, want 1", n)
	}
}

// N slow webhooks do not make a request N times the timeout: three mutating webhooks that each
// take 1.5s of their 2s (failurePolicy Ignore) end at 2s + ChainMargin; a validating webhook of
// the same request (same uid) gets what is left.
func TestChainBudget(t *testing.T) {
	slow := newHookServer(t, []string{"127.0.0.1"}, sleepy(1500*time.Millisecond))
	e := newEnv(t)
	for _, n := range []string{"a", "b", "c"} {
		e.addMutating(n, hookSpec{name: n + ".example.com", url: slow.url(), timeout: 2, failure: admissionregistrationv1.Ignore})
	}
	e.addValidating("v", hookSpec{name: "v.example.com", url: slow.url(), timeout: 2, failure: admissionregistrationv1.Fail})
	chain := e.build()
	attrs := createPod(newPod("p", nil))
	ctx := context.Background()
	start := time.Now()
	if err := chain.Admit(ctx, attrs); err != nil {
		t.Fatal(err)
	}
	mutating := time.Since(start)
	want := 2*time.Second + ChainMargin
	if mutating > want+500*time.Millisecond || mutating < want-200*time.Millisecond {
		t.Errorf("three 1.5s webhooks took %v, want about %v", mutating, want)
	}
	ann := attrs.Annotations()
	if ann[mutationFailedOpenAnnotationPrefix+"round_0_index_2"] != "c.example.com" {
		t.Errorf("the third webhook did not fail open: %v", keys(ann))
	}
	err := chain.Validate(ctx, attrs)
	if err == nil || !strings.Contains(err.Error(), "time budget") {
		t.Errorf("the validating webhook after the budget ran out: %v", err)
	}
	if total := time.Since(start); total > want+time.Second {
		t.Errorf("the request's webhooks took %v in all, want at most about %v", total, want)
	}
	t.Logf("mutating phase %v, whole chain %v (budget %v)", mutating, time.Since(start), want)

	// Another request has its own budget.
	other := createPod(newPod("q", nil))
	if err := chain.Validate(ctx, other); err != nil {
		t.Errorf("a fresh request: %v", err)
	}
}
