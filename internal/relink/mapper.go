package relink

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// memoMapper remembers the REST mappings it found. A namespaced cache asks
// for the mapping of the kind on every read, and the manager's mapper walks
// every API group each time; the relinker's kinds are resolved once at
// start and do not change while it runs.
type memoMapper struct {
	meta.RESTMapper

	mu   sync.RWMutex
	memo map[mappingKey]*meta.RESTMapping
}

type mappingKey struct {
	gk      schema.GroupKind
	version string
}

var _ meta.RESTMapper = (*memoMapper)(nil)

func newMemoMapper(m meta.RESTMapper) *memoMapper {
	return &memoMapper{RESTMapper: m, memo: map[mappingKey]*meta.RESTMapping{}}
}

// RESTMapping returns the mapping of gk, from memory when it was found
// before. Lookups with more than one version, and failures, are not
// remembered.
func (m *memoMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if len(versions) > 1 {
		return m.RESTMapper.RESTMapping(gk, versions...)
	}
	key := mappingKey{gk: gk}
	if len(versions) == 1 {
		key.version = versions[0]
	}
	m.mu.RLock()
	found, ok := m.memo[key]
	m.mu.RUnlock()
	if ok {
		return found, nil
	}
	mapping, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.memo[key] = mapping
	m.mu.Unlock()
	return mapping, nil
}
