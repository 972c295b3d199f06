package basic

import (
	"container/list"
	"time"
)

// lru is a size-bounded map that evicts the least recently used entry, with an optional expiry
// per entry (zero: none). It is not safe for concurrent use; callers hold their own lock.
type lru[V any] struct {
	size  int
	order *list.List // front: most recently used
	items map[string]*list.Element
}

type lruEntry[V any] struct {
	key     string
	value   V
	expires time.Time
}

func newLRU[V any](size int) *lru[V] {
	return &lru[V]{size: size, order: list.New(), items: map[string]*list.Element{}}
}

// get returns the value of key if present and not expired at now (an expired one is dropped).
func (c *lru[V]) get(key string, now time.Time) (V, bool) {
	var zero V
	e, ok := c.items[key]
	if !ok {
		return zero, false
	}
	ent := e.Value.(*lruEntry[V])
	if !ent.expires.IsZero() && !now.Before(ent.expires) {
		c.order.Remove(e)
		delete(c.items, key)
		return zero, false
	}
	c.order.MoveToFront(e)
	return ent.value, true
}

// add stores value under key, expiring at expires (zero: never), evicting the least recently
// used entry when full.
func (c *lru[V]) add(key string, value V, expires time.Time) {
	if e, ok := c.items[key]; ok {
		ent := e.Value.(*lruEntry[V])
		ent.value, ent.expires = value, expires
		c.order.MoveToFront(e)
		return
	}
	c.items[key] = c.order.PushFront(&lruEntry[V]{key: key, value: value, expires: expires})
	for c.order.Len() > c.size {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*lruEntry[V]).key)
	}
}

// len is the number of entries held (expired ones included until looked up or evicted).
func (c *lru[V]) len() int { return c.order.Len() }
