package auth

import (
	"sync"
	"time"
)

// ttlCache is a bounded map of entries that expire. When full it first drops what expired and,
// if that is not enough, everything: decisions are cheap to recompute, and a bound on memory
// matters more than the hit rate of a cache under a flood of distinct credentials.
type ttlCache[V any] struct {
	mu  sync.Mutex
	max int
	m   map[[32]byte]ttlEntry[V]
}

type ttlEntry[V any] struct {
	v       V
	expires time.Time
}

func newTTLCache[V any](max int) *ttlCache[V] {
	return &ttlCache[V]{max: max, m: map[[32]byte]ttlEntry[V]{}}
}

func (c *ttlCache[V]) get(k [32]byte, now time.Time) (V, bool) {
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (c *ttlCache[V]) put(k [32]byte, v V, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		now := time.Now()
		for key, e := range c.m {
			if !now.Before(e.expires) {
				delete(c.m, key)
			}
		}
		if len(c.m) >= c.max {
			c.m = map[[32]byte]ttlEntry[V]{}
		}
	}
	c.m[k] = ttlEntry[V]{v: v, expires: expires}
}
