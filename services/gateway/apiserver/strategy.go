package apiserver

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"platform.io/services/gateway/registry"
)

// Every kind's differences live in its registry.Strategy, chosen once per served resource and
// version by the registry: builtinStrategy (strategy_builtin.go) for the Go types of k8s.io/api,
// customStrategy (strategy_custom.go) for the resources of CustomResourceDefinitions. The verb
// handlers reach them through the resource (res.Strategy()) and never branch on the kind.

// strategies is the factory the API installs in its registry.
func (a *API) strategies() registry.StrategyFactory {
	shared := &builtinShared{scheme: a.reg.Scheme, codec: a.codec}
	addVersionConversions(a.reg.Scheme)
	return registry.StrategyFactory{
		Builtin: func(res *registry.Resource) registry.Strategy {
			b := &builtinStrategy{res: res, shared: shared}
			if s := newEventsStrategy(a.reg, b); s != nil {
				return s
			}
			if s := newAPIServiceStrategy(b); s != nil {
				return s
			}
			if s := newVersionStrategy(a.reg, b); s != nil {
				return s
			}
			return b
		},
		Custom: func(res *registry.Resource) registry.Strategy {
			return &customStrategy{res: res}
		},
	}
}

// fieldManagerSet holds a strategy's field managers, one per subresource, built on first use.
type fieldManagerSet struct {
	mu    sync.Mutex
	bySub map[string]*managedfields.FieldManager
}

func (s *fieldManagerSet) get(subresource string, build func() (*managedfields.FieldManager, error)) (*managedfields.FieldManager, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fm, ok := s.bySub[subresource]; ok {
		return fm, nil
	}
	fm, err := build()
	if err != nil {
		return nil, err
	}
	if s.bySub == nil {
		s.bySub = map[string]*managedfields.FieldManager{}
	}
	s.bySub[subresource] = fm
	return fm, nil
}

// builtinShared is what every built-in kind's strategy shares: the scheme, the codec, and
// client-go's type converter of the built-in schemas (built on first use: it is large).
type builtinShared struct {
	scheme    *runtime.Scheme
	codec     *codec
	once      sync.Once
	converter managedfields.TypeConverter
}

func (s *builtinShared) typeConverter() managedfields.TypeConverter {
	s.once.Do(func() { s.converter = newBuiltinTypeConverter(s.scheme) })
	return s.converter
}

// applyDefaults applies the defaults of res's kind.
func applyDefaults(res *registry.Resource, obj runtime.Object) { res.Strategy().Default(obj) }
