package kubeenv

import (
	"net/http"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// Counter counts the requests made through a rest.Config it wrapped, by
// verb: get, list, watch, create, update, patch and delete, and discovery
// for the API discovery a client makes on its first use of a kind.
type Counter struct {
	mu     sync.Mutex
	counts map[string]int
}

// CountingConfig returns a copy of cfg whose requests c counts.
func (c *Counter) CountingConfig(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			c.add(verb(req))
			return rt.RoundTrip(req)
		})
	})
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func verb(req *http.Request) string {
	switch req.Method {
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	if req.URL.Query().Get("watch") == "true" {
		return "watch"
	}
	// A collection path has an even number of segments after the group
	// version: .../namespaces/ns/configmaps or .../configmaps.
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:]
	}
	switch {
	case len(rest) == 0:
		return "discovery"
	case len(rest)%2 == 1:
		return "list"
	}
	return "get"
}

func (c *Counter) add(v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[v]++
}

// Reset sets every count to zero.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = nil
}

// Count returns the number of requests with the given verbs.
func (c *Counter) Count(verbs ...string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range verbs {
		n += c.counts[v]
	}
	return n
}

// Writes returns the number of create, update, patch and delete requests.
func (c *Counter) Writes() int { return c.Count("create", "update", "patch", "delete") }

// Reads returns the number of get and list requests.
func (c *Counter) Reads() int { return c.Count("get", "list") }
