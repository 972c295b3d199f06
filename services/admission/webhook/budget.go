package webhook

import (
	"sync"
	"time"
)

// ChainMargin is the slack added to the longest webhook timeout in a request's time budget (see
// budget), so that a webhook called right after a slow one still gets a moment.
const ChainMargin = time.Second

// maxTimeout is the largest timeoutSeconds a configuration may set.
const maxTimeout = 30 * time.Second

// budget bounds all webhook calls of one API request, going beyond upstream (which gives every
// webhook its own timeoutSeconds, so N slow webhooks take N times as long):
//
//	every call of the request ends by  start + longest + ChainMargin
//
// where start is when the request's first webhook call began and longest is the largest
// timeoutSeconds among the webhooks called for it so far (the current one included). Each call
// also ends after its own timeoutSeconds and never after the request context's deadline. So the
// whole chain (mutating webhooks one after another, both mutating rounds and the validating
// webhooks in parallel) takes at most the largest timeout of the webhooks it calls plus
// ChainMargin, and at most 31 seconds. A webhook whose call would start after the budget ran out
// fails at once, as a timeout under its failurePolicy.
//
// The mutating and validating phases reach the admission service as separate calls; they share
// the budget through the request's uid (Attributes.UID), which the gateway sends with both. A
// request without a uid gets a budget per phase.
type budget struct {
	mu      sync.Mutex
	start   time.Time
	longest time.Duration
}

// deadline registers a call with the given timeout at now and returns when it must end, and
// whether the chain's budget (rather than the webhook's own timeout) is what ends it.
func (b *budget) deadline(now time.Time, timeout time.Duration) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.start.IsZero() {
		b.start = now
	}
	if timeout > b.longest {
		b.longest = timeout
	}
	chain := b.start.Add(b.longest + ChainMargin)
	own := now.Add(timeout)
	if chain.Before(own) {
		return chain, true
	}
	return own, false
}

// total is the budget's length as it stands.
func (b *budget) total() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.longest + ChainMargin
}

// budgets holds the budgets of requests in flight, by uid.
type budgets struct {
	mu        sync.Mutex
	byUID     map[string]*budget
	lastSweep time.Time
}

func newBudgets() *budgets { return &budgets{byUID: map[string]*budget{}} }

// forRequest returns the request's budget (a fresh one when uid is empty).
func (bs *budgets) forRequest(uid string, now time.Time) *budget {
	if uid == "" {
		return &budget{}
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if now.Sub(bs.lastSweep) > 10*time.Second {
		bs.sweep(now)
	}
	b, ok := bs.byUID[uid]
	if !ok {
		b = &budget{}
		bs.byUID[uid] = b
	}
	return b
}

// sweep forgets budgets that can no longer bound anything.
func (bs *budgets) sweep(now time.Time) {
	bs.lastSweep = now
	for uid, b := range bs.byUID {
		b.mu.Lock()
		done := !b.start.IsZero() && now.Sub(b.start) > maxTimeout+ChainMargin+time.Minute
		b.mu.Unlock()
		if done {
			delete(bs.byUID, uid)
		}
	}
}

// len is the number of budgets held (tests).
func (bs *budgets) len() int {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	return len(bs.byUID)
}
