package webhook

import (
	"container/list"
	"sync"
	"time"
)

// decisionCache holds the remote's answers until they expire, dropping the least recently used
// when full.
type decisionCache struct {
	mu      sync.Mutex
	max     int
	entries map[string]*list.Element
	lru     *list.List // front: most recently used
}

type cacheEntry struct {
	key     string
	st      status
	expires time.Time
}

func newDecisionCache(max int) *decisionCache {
	return &decisionCache{max: max, entries: map[string]*list.Element{}, lru: list.New()}
}

// get returns a fresh answer for key.
func (c *decisionCache) get(key string, now time.Time) (status, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return status{}, false
	}
	e := el.Value.(*cacheEntry)
	if !now.Before(e.expires) {
		c.lru.Remove(el)
		delete(c.entries, key)
		return status{}, false
	}
	c.lru.MoveToFront(el)
	return e.st, true
}

// add stores an answer until expires.
func (c *decisionCache) add(key string, st status, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		e := el.Value.(*cacheEntry)
		e.st, e.expires = st, expires
		c.lru.MoveToFront(el)
		return
	}
	c.entries[key] = c.lru.PushFront(&cacheEntry{key: key, st: st, expires: expires})
	for c.lru.Len() > c.max {
		oldest := c.lru.Back()
		c.lru.Remove(oldest)
		delete(c.entries, oldest.Value.(*cacheEntry).key)
	}
}
