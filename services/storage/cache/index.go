package cache

import (
	"strings"
	"sync/atomic"

	"github.com/google/btree"
	"google.golang.org/protobuf/proto"

	storagev1 "platform.io/proto/storage/v1"
	"platform.io/services/storage/backend"
)

// version is one state of a key: the object as of rev, or nil if the key was deleted at rev.
type version struct {
	rev int64
	obj *storagev1.Object // as stored, with the attributes selectors match
	out *storagev1.Object // as reads return it (ReadView), made once per version
	// wire is out's Protobuf encoding, made by the first list that returns this version and
	// shared by every later one (nil for a deletion): see listWire.
	wire *atomic.Pointer[[]byte]
}

// encoded returns the Protobuf encoding of v.out, made at most once (a concurrent first use may
// encode it twice; both results are equal).
func (v *version) encoded() []byte {
	if b := v.wire.Load(); b != nil {
		return *b
	}
	// Marshal fails only on invalid UTF-8 in a string; every stored string arrived in a request
	// that Protobuf decoding already checked.
	b, _ := proto.Marshal(v.out)
	v.wire.Store(&b)
	return b
}

// ReadView is obj as reads return it. Labels and selectable fields are attributes storage
// indexes for selectors; the same data is inside the object's value, which every reader decodes,
// so responses leave them out: they would otherwise dominate the cost of encoding and decoding
// large lists (protobuf maps). obj itself is returned when it has none.
func ReadView(obj *storagev1.Object) *storagev1.Object {
	if obj == nil || len(obj.GetLabels()) == 0 && len(obj.GetFields()) == 0 {
		return obj
	}
	return &storagev1.Object{Namespace: obj.GetNamespace(), Name: obj.GetName(), Value: obj.GetValue(),
		ResourceVersion: obj.GetResourceVersion(), Uid: obj.GetUid()}
}

// index is a multi-version index of one type's keys: for every key, its states from the newest
// one at or before the compacted revision up to the present. It answers "what did key k hold at
// revision r" for every retained r. It is not safe for concurrent use; typeCache guards it.
type index struct {
	versions map[string][]version
	// keys holds every key with at least one version, in order, for ordered (paged) scans: a
	// B-tree, so that a new key costs O(log n) (in a sorted slice, an insert moved half of a
	// type's keys: 4% of the all-in-one's CPU under creates once a namespace held 40,000).
	keys *btree.BTreeG[string]
	// live counts the keys whose newest version is an object (not a deletion): the
	// apiserver_storage_objects metric, kept up to date so a scrape costs nothing.
	live int
}

// keysDegree is the B-tree's degree: nodes of up to 63 keys, few levels, cheap in-order scans.
const keysDegree = 32

func newIndex() *index {
	return &index{versions: make(map[string][]version), keys: btree.NewOrderedG[string](keysDegree)}
}

// len is the number of keys with at least one version.
func (ix *index) len() int { return ix.keys.Len() }

// add records that key holds obj (nil: deleted) from rev on. Revisions arrive in order.
func (ix *index) add(key string, rev int64, obj *storagev1.Object) {
	vs, ok := ix.versions[key]
	if ok && vs[len(vs)-1].obj != nil {
		ix.live--
	}
	if obj != nil {
		ix.live++
	}
	if !ok {
		ix.keys.ReplaceOrInsert(key)
	}
	v := version{rev: rev, obj: obj, out: ReadView(obj)}
	if obj != nil {
		v.wire = new(atomic.Pointer[[]byte])
	}
	ix.versions[key] = append(vs, v)
}

// at returns the state key had at rev, or nil if it had none.
func (ix *index) at(key string, rev int64) *version {
	return versionAt(ix.versions[key], rev)
}

func versionAt(vs []version, rev int64) *version {
	// Reads are mostly of the newest state: look from the end.
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].rev <= rev {
			if vs[i].obj == nil {
				return nil
			}
			return &vs[i]
		}
	}
	return nil
}

// compactKey drops the versions of key that no read at a revision >= compacted can see.
func (ix *index) compactKey(key string, compacted int64) {
	vs := ix.versions[key]
	// Keep the newest version at or before compacted (the state at compacted) and all later ones.
	keep := 0
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].rev <= compacted {
			keep = i
			if vs[i].obj == nil {
				keep = i + 1 // absent at compacted: the tombstone itself is no longer needed
			}
			break
		}
	}
	if keep == 0 {
		return
	}
	rest := vs[keep:]
	if len(rest) == 0 {
		delete(ix.versions, key)
		ix.keys.Delete(key)
		return
	}
	ix.versions[key] = append([]version(nil), rest...)
}

// scan calls fn, in key order, for each object visible at rev whose key starts with prefix and
// sorts after `after` (exclusive; "" for the start), until fn returns false.
func (ix *index) scan(prefix, after string, rev int64, fn func(key string, v *version) bool) {
	from := prefix
	if after >= from {
		from = after + "\x00"
	}
	ix.keys.AscendGreaterOrEqual(from, func(key string) bool {
		if !strings.HasPrefix(key, prefix) {
			return false
		}
		if v := versionAt(ix.versions[key], rev); v != nil {
			return fn(key, v)
		}
		return true
	})
}

// buildIndex reconstructs the index from a snapshot: the live objects at snap.Revision and the
// retained events, whose previous objects give every key's state at the compacted revision.
func buildIndex(snap *backend.Snapshot) *index {
	ix := newIndex()
	for _, ev := range snap.Events {
		key := backend.Key(ev.Object.GetNamespace(), ev.Object.GetName())
		if _, seen := ix.versions[key]; !seen && ev.Prev != nil {
			ix.add(key, ev.Prev.GetResourceVersion(), ev.Prev)
		}
		ix.apply(key, ev)
	}
	for _, obj := range snap.Objects {
		key := backend.Key(obj.GetNamespace(), obj.GetName())
		if _, seen := ix.versions[key]; !seen {
			ix.add(key, obj.GetResourceVersion(), obj)
		}
	}
	return ix
}

func (ix *index) apply(key string, ev backend.Event) {
	if ev.Type == backend.Deleted {
		ix.add(key, ev.Revision, nil)
		return
	}
	ix.add(key, ev.Revision, ev.Object)
}
