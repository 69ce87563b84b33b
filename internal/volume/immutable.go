package volume

import (
	"maps"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// immutableCache keeps the ConfigMaps and Secrets marked immutable that a
// pod's volumes read: their data cannot change, so each is read once per
// pod and never again, which spares the apiserver a GET per volume per
// sync (the point of `immutable`). An immutable object that is deleted and
// recreated with other data is seen by new pods only, as upstream.
type immutableCache struct {
	mu   sync.Mutex
	objs map[immutableKey]any // *v1.ConfigMap or *v1.Secret
}

type immutableKey struct {
	pod             types.UID
	kind            string
	namespace, name string
}

func (c *immutableCache) get(k immutableKey) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.objs[k]
	return o, ok
}

func (c *immutableCache) put(k immutableKey, o any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.objs == nil {
		c.objs = map[immutableKey]any{}
	}
	c.objs[k] = o
}

// forget drops what the pod read, once it is gone.
func (c *immutableCache) forget(pod types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	maps.DeleteFunc(c.objs, func(k immutableKey, _ any) bool { return k.pod == pod })
}

func isImmutable(o any) bool {
	switch o := o.(type) {
	case *v1.ConfigMap:
		return o != nil && o.Immutable != nil && *o.Immutable
	case *v1.Secret:
		return o != nil && o.Immutable != nil && *o.Immutable
	}
	return false
}

// cachedGet reads an object through the pod's immutable cache: a cached
// immutable object is returned without a request; a freshly read one is
// cached if immutable. Errors (NotFound included) are not cached.
func cachedGet[T any](c *immutableCache, k immutableKey, get func() (*T, error)) (*T, error) {
	if o, ok := c.get(k); ok {
		return o.(*T), nil
	}
	obj, err := get()
	if err != nil {
		return nil, err
	}
	if isImmutable(any(obj)) {
		c.put(k, obj)
	}
	return obj, nil
}
