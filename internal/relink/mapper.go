package relink

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/clock"
)

// DiscoveryRetry is how long a kind the API server did not serve is taken
// as not served: the relinker asks the API server's discovery again only
// for a lookup that fails after that time.
const DiscoveryRetry = time.Minute

// kindMapper is the relinker's RESTMapper, for its cache, its client and
// the owners it looks up. It maps kinds from one snapshot of the API
// server's discovery (two requests with aggregated discovery: /api and
// /apis), taken at start, and takes a new snapshot only when a lookup
// fails and the snapshot is older than DiscoveryRetry. So an annotation
// naming any number of kinds that are not served costs at most one
// snapshot per DiscoveryRetry, whatever the retries; a CRD installed while
// the relinker runs is found within DiscoveryRetry. Mappings found are
// remembered: a namespaced cache asks for its kind's mapping on every
// read.
type kindMapper struct {
	dc    discovery.DiscoveryInterface
	clock clock.PassiveClock

	mu       sync.RWMutex
	snapshot meta.RESTMapper
	// taken is when snapshot was asked for (zero before the first).
	taken time.Time
	found map[mappingKey]*meta.RESTMapping
}

type mappingKey struct {
	gk      schema.GroupKind
	version string
}

var _ meta.RESTMapper = (*kindMapper)(nil)

// newKindMapper returns a kindMapper with a first snapshot.
func newKindMapper(dc discovery.DiscoveryInterface, c clock.PassiveClock) (*kindMapper, error) {
	m := &kindMapper{dc: dc, clock: c, found: map[mappingKey]*meta.RESTMapping{}}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.refreshLocked(); err != nil {
		return nil, err
	}
	return m, nil
}

// refreshLocked takes a new snapshot; a discovery that fails for some
// groups keeps the others. m.mu is held.
func (m *kindMapper) refreshLocked() error {
	m.taken = m.clock.Now()
	groups, err := restmapper.GetAPIGroupResources(m.dc)
	if len(groups) == 0 && err != nil {
		return err
	}
	m.snapshot = restmapper.NewDiscoveryRESTMapper(groups)
	return nil
}

// lookup runs f on the snapshot, and once more on a new one when f finds
// no match and the snapshot is older than DiscoveryRetry.
func (m *kindMapper) lookup(f func(meta.RESTMapper) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	err := f(m.snapshot)
	if !meta.IsNoMatchError(err) || m.clock.Since(m.taken) < DiscoveryRetry {
		return err
	}
	if rerr := m.refreshLocked(); rerr != nil {
		return rerr
	}
	return f(m.snapshot)
}

// RESTMapping returns the mapping of gk, from memory when it was found
// before.
func (m *kindMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	key, memo := mappingKey{gk: gk}, len(versions) <= 1
	if len(versions) == 1 {
		key.version = versions[0]
	}
	if memo {
		m.mu.RLock()
		found, ok := m.found[key]
		m.mu.RUnlock()
		if ok {
			return found, nil
		}
	}
	out, err := mapWith(m, func(s meta.RESTMapper) (*meta.RESTMapping, error) { return s.RESTMapping(gk, versions...) })
	if err != nil {
		return nil, err
	}
	if memo {
		m.mu.Lock()
		m.found[key] = out
		m.mu.Unlock()
	}
	return out, nil
}

// mapWith is lookup for a function of one result.
func mapWith[T any](m *kindMapper, f func(meta.RESTMapper) (T, error)) (out T, err error) {
	err = m.lookup(func(s meta.RESTMapper) (err error) {
		out, err = f(s)
		return err
	})
	return out, err
}

// RESTMappings implements meta.RESTMapper.
func (m *kindMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return mapWith(m, func(s meta.RESTMapper) ([]*meta.RESTMapping, error) { return s.RESTMappings(gk, versions...) })
}

// KindFor implements meta.RESTMapper.
func (m *kindMapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return mapWith(m, func(s meta.RESTMapper) (schema.GroupVersionKind, error) { return s.KindFor(resource) })
}

// KindsFor implements meta.RESTMapper.
func (m *kindMapper) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return mapWith(m, func(s meta.RESTMapper) ([]schema.GroupVersionKind, error) { return s.KindsFor(resource) })
}

// ResourceFor implements meta.RESTMapper.
func (m *kindMapper) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return mapWith(m, func(s meta.RESTMapper) (schema.GroupVersionResource, error) { return s.ResourceFor(input) })
}

// ResourcesFor implements meta.RESTMapper.
func (m *kindMapper) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return mapWith(m, func(s meta.RESTMapper) ([]schema.GroupVersionResource, error) { return s.ResourcesFor(input) })
}

// ResourceSingularizer implements meta.RESTMapper.
func (m *kindMapper) ResourceSingularizer(resource string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.snapshot.ResourceSingularizer(resource)
}
