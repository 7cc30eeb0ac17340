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
		return RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			c.add(Classify(req).Verb)
			return rt.RoundTrip(req)
		})
	})
	return out
}

// RoundTripperFunc is an http.RoundTripper made of a function.
type RoundTripperFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f RoundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Request names an API request by what it does.
type Request struct {
	// Verb is get, list, watch, create, update, patch or delete, or
	// discovery for a request of an API group version itself.
	Verb string
	// Resource is the resource, with its subresource as "clusters/status",
	// and "namespaces" for a request of a namespace itself.
	Resource string
	// Namespace is the namespace of a namespaced request.
	Namespace string
}

// Classify names req.
func Classify(req *http.Request) Request {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:]
	}
	var r Request
	if len(rest) >= 2 && rest[0] == "namespaces" {
		r.Namespace = rest[1]
		if len(rest) > 2 {
			rest = rest[2:]
		} else {
			rest = []string{"namespaces"}
		}
	}
	if len(rest) > 0 {
		r.Resource = rest[0]
	}
	if len(rest) > 2 {
		r.Resource += "/" + rest[2]
	}
	switch req.Method {
	case http.MethodPost:
		r.Verb = "create"
	case http.MethodPut:
		r.Verb = "update"
	case http.MethodPatch:
		r.Verb = "patch"
	case http.MethodDelete:
		r.Verb = "delete"
	default:
		switch {
		case req.URL.Query().Get("watch") == "true":
			r.Verb = "watch"
		case len(rest) == 0:
			r.Verb = "discovery"
		case len(rest) == 1:
			r.Verb = "list"
		default:
			r.Verb = "get"
		}
	}
	return r
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
