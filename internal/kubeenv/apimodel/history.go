package apimodel

import (
	"sort"
	"strconv"
	"strings"
)

// Rank is the place of revision rv in k's versions (0 for the first), or
// -1: revisions are compared only for equality and, per object, for order,
// so ranks name them independently of what else was written between.
func (s *Store) Rank(k Key, rv int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, v := range s.history[k] {
		if v.RV == rv {
			return i
		}
	}
	return -1
}

// History returns the versions of k, oldest first.
func (s *Store) History(k Key) []Version {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Version(nil), s.history[k]...)
}

// Revision is the last revision written.
func (s *Store) Revision() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// Keys lists the objects that exist, sorted.
func (s *Store) Keys() []Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedKeys(s.objects)
}

func sortedKeys[V any](m map[Key]V) []Key {
	keys := make([]Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}

// FingerprintLines digests every object's versions, with revisions named
// by their ranks, as one line per object sorted by key: its key, its
// number of versions and the digests of the last depth ones (all of them
// when depth is 0), or with texts their JSON (without their
// resourceVersion), which a caller may rewrite (rename what they name)
// before digesting it. Two stores with the same lines answer every read
// alike, up to the names of revisions.
func (s *Store) FingerprintLines(depth int, texts bool) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := sortedKeys(s.history)
	lines := make([]string, 0, len(keys))
	var b strings.Builder
	for _, k := range keys {
		h := s.history[k]
		from := 0
		if depth > 0 && len(h) > depth {
			from = len(h) - depth
		}
		b.Reset()
		b.WriteString(k.String())
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(len(h)))
		b.WriteByte(':')
		for _, v := range h[from:] {
			if texts && v.Object != nil {
				b.WriteString(v.text)
			} else {
				b.WriteString(v.Digest)
			}
			b.WriteByte(' ')
		}
		lines = append(lines, b.String())
	}
	return lines
}
