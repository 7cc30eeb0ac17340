package apimodel

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
)

// page is where a continued list resumes: the revision its first page was
// read at, and the last object it served.
type page struct {
	rev             int64
	namespace, name string
}

func (p page) token() string {
	return strconv.FormatInt(p.rev, 10) + "/" + p.namespace + "/" + p.name
}

// parseContinue reads a continue token of listPage; a token it did not
// make is refused with 400 Bad Request, as the API server refuses one.
func parseContinue(token string) (*page, error) {
	parts := strings.Split(token, "/")
	if len(parts) == 3 {
		if rev, err := strconv.ParseInt(parts[0], 10, 64); err == nil && rev > 0 {
			return &page{rev: rev, namespace: parts[1], name: parts[2]}, nil
		}
	}
	return nil, apierrors.NewBadRequest(fmt.Sprintf("apimodel: invalid continue token %q", token))
}

// listPage returns the objects of kind k.Kind in namespace k.Namespace
// (every namespace when it is empty) whose labels sel matches (every object
// when sel is nil), sorted by namespace and name as etcd's keys sort, by
// pages of at most limit objects (every object left when limit is 0). The
// first page (from nil) is read at the store's last revision, as a
// consistent list of the API server is read at etcd's current revision; the
// page after from at from's revision, as the API server reads every page of
// a list at its first page's revision. It returns the page, its revision
// and the continue token of the next page, "" after the last.
func (s *Store) listPage(k Key, sel labels.Selector, from *page, limit int64) (items []map[string]any, rv, next string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := page{rev: s.rev}
	if from != nil {
		at = *from
	}
	for key, versions := range s.history {
		if key.Kind != k.Kind || (k.Namespace != "" && key.Namespace != k.Namespace) {
			continue
		}
		if from != nil && (key.Namespace < from.namespace || (key.Namespace == from.namespace && key.Name <= from.name)) {
			continue
		}
		obj := s.objects[key] // as it is at the store's last revision
		if from != nil {
			obj = versionAt(versions, at.rev)
		}
		if obj == nil || (sel != nil && !sel.Matches(labels.Set(labelsOf(obj)))) {
			continue
		}
		items = append(items, deepCopy(obj))
	}
	sort.Slice(items, func(i, j int) bool {
		a, b := metadata(items[i]), metadata(items[j])
		if a["namespace"] != b["namespace"] {
			return a["namespace"].(string) < b["namespace"].(string)
		}
		return a["name"].(string) < b["name"].(string)
	})
	if limit > 0 && int64(len(items)) > limit {
		items = items[:limit]
		last := metadata(items[limit-1])
		next = page{rev: at.rev, namespace: last["namespace"].(string), name: last["name"].(string)}.token()
	}
	return items, strconv.FormatInt(at.rev, 10), next
}

// versionAt is the object as it was at revision rev, nil when it did not
// exist then.
func versionAt(versions []Version, rev int64) map[string]any {
	var obj map[string]any
	for _, v := range versions {
		if v.RV > rev {
			break
		}
		obj = v.Object
	}
	return obj
}
