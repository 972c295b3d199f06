package listcache

import (
	"encoding/json"
	"hash/maphash"
	"strconv"
	"sync"

	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/gateway/registry"
)

// The JSON cache keeps the JSON encoding of recently read objects, keyed by type, namespace,
// name and resourceVersion. An object never changes without its resourceVersion changing, so an
// entry is valid for as long as it is kept; lists and gets of unchanged objects then skip the
// Protobuf decode and the JSON encode, which are most of the gateway's CPU for large lists
// (upstream caches serializations in its watch cache for the same reason).

// jsonCacheBytes bounds the cache's memory.
const jsonCacheBytes = 64 << 20

const jsonCacheShards = 16

type jsonCacheKey struct {
	res       *registry.Resource
	namespace string
	name      string
	rv        int64
}

type jsonCacheShard struct {
	mu      sync.Mutex
	entries map[jsonCacheKey][]byte
	bytes   int
}

// JSONCache keeps the JSON encodings of recently read objects (see above).
type JSONCache struct {
	seed   maphash.Seed
	shards [jsonCacheShards]jsonCacheShard
}

// NewJSONCache returns an empty JSON cache.
func NewJSONCache() *JSONCache {
	c := &JSONCache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].entries = map[jsonCacheKey][]byte{}
	}
	return c
}

func (c *JSONCache) shard(k jsonCacheKey) *jsonCacheShard {
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteString(k.namespace)
	h.WriteString(k.name)
	return &c.shards[h.Sum64()%jsonCacheShards]
}

func (c *JSONCache) get(k jsonCacheKey) ([]byte, bool) {
	s := c.shard(k)
	s.mu.Lock()
	b, ok := s.entries[k]
	s.mu.Unlock()
	return b, ok
}

func (c *JSONCache) put(k jsonCacheKey, b []byte) {
	s := c.shard(k)
	size := len(b) + len(k.namespace) + len(k.name) + 64
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.entries[k]; ok {
		return
	}
	if s.bytes+size > jsonCacheBytes/jsonCacheShards {
		// Over budget: drop about half the shard (map order is random, so this is a random
		// eviction, cheap and without bookkeeping per entry).
		n := len(s.entries) / 2
		for key, v := range s.entries {
			if n == 0 {
				break
			}
			delete(s.entries, key)
			s.bytes -= len(v) + len(key.namespace) + len(key.name) + 64
			n--
		}
	}
	s.entries[k] = b
	s.bytes += size
}

// StoredJSON returns the JSON encoding of a stored object of res (with its resourceVersion
// set), from the cache when it is there.
func (c *JSONCache) StoredJSON(res *registry.Resource, o *storagev1.Object) ([]byte, error) {
	k := jsonCacheKey{res: res, namespace: o.Namespace, name: o.Name, rv: o.ResourceVersion}
	if b, ok := c.get(k); ok {
		return b, nil
	}
	obj, err := res.Strategy().DecodeStored(o.Value)
	if err != nil {
		return nil, err
	}
	registry.Meta(obj).SetResourceVersion(strconv.FormatInt(o.ResourceVersion, 10))
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	c.put(k, b)
	return b, nil
}
