package kubeenv

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// WriteVerbs are the verbs that change objects.
var WriteVerbs = []string{"create", "update", "patch", "delete"}

// Counter counts the requests made through a rest.Config it wrapped, by
// what they asked (Request: verb, API group and version, resource,
// namespace and name) and by the status code of the answer, and keeps the
// requests that authorisation refused. A request is counted when it is
// sent, so that a count read meanwhile includes the requests under way.
type Counter struct {
	mu     sync.Mutex
	counts map[Call]int
	denied []string
}

// Call is a request a Counter counted and the status code of its answer:
// 0 while it waits for the answer, NoAnswer when none came.
type Call struct {
	Request
	Status int
}

// NoAnswer is the Status of a request that got no answer (a transport
// error).
const NoAnswer = -1

// CountingConfig returns a copy of cfg whose requests c counts.
func (c *Counter) CountingConfig(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			// Counted when sent, and moved to its status when answered.
			sent := Call{Request: Classify(req)}
			c.answered(Call{}, sent)
			resp, err := rt.RoundTrip(req)
			if err != nil {
				c.answered(sent, Call{Request: sent.Request, Status: NoAnswer})
				return resp, err
			}
			c.answered(sent, Call{Request: sent.Request, Status: resp.StatusCode})
			if resp.StatusCode == http.StatusForbidden {
				c.keepDenied(req, resp)
			}
			return resp, nil
		})
	})
	return out
}

// Record counts one request answered with status, made by a client that
// does not send HTTP requests (the model API server's, apimodel).
func (c *Counter) Record(r Request, status int) { c.answered(Call{}, Call{Request: r, Status: status}) }

// keepDenied keeps a request refused with 403 Forbidden, unless the refusal
// is a write into a namespace being deleted, which is not authorisation's.
func (c *Counter) keepDenied(req *http.Request, resp *http.Response) {
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	if bytes.Contains(b, []byte("NamespaceTerminating")) {
		return
	}
	what := req.Method + " " + req.URL.Path
	if req.URL.RawQuery != "" {
		what += "?" + req.URL.RawQuery
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.denied = append(c.denied, what+": "+string(b))
}

// answered moves one count from call from (none when zero) to call to.
func (c *Counter) answered(from, to Call) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[Call]int{}
	}
	if from != (Call{}) {
		if c.counts[from] == 0 {
			return // reset meanwhile
		}
		if c.counts[from]--; c.counts[from] == 0 {
			delete(c.counts, from)
		}
	}
	c.counts[to]++
}

// Reset sets every count to zero. The refused requests are kept.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = nil
}

// Count returns the number of requests with the given verbs.
func (c *Counter) Count(verbs ...string) int { return c.Of("", "").Count(verbs...) }

// Writes returns the number of create, update, patch and delete requests.
func (c *Counter) Writes() int { return c.Count(WriteVerbs...) }

// Reads returns the number of get and list requests.
func (c *Counter) Reads() int { return c.Count("get", "list") }

// Of returns the counts of the requests for resource ("" for any, with its
// subresource as in Request) in namespace ("" for any).
func (c *Counter) Of(resource, namespace string) Counts {
	return Counts{c: c, resource: resource, namespace: namespace}
}

// Calls returns a copy of the counts of every request and answer.
func (c *Counter) Calls() map[Call]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

// Denied returns the requests the API server refused with 403 Forbidden
// for authorisation, each as "METHOD path?query: answer".
func (c *Counter) Denied() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.denied)
}

// String lists the counts by verb, resource, namespace and status, one a
// line, sorted.
func (c *Counter) String() string {
	sums := map[string]int{}
	for k, v := range c.Calls() {
		sums[fmt.Sprintf("%s %s ns=%s status=%d", k.Verb, k.Resource, k.Namespace, k.Status)] += v
	}
	lines := make([]string, 0, len(sums))
	for k, v := range sums {
		lines = append(lines, fmt.Sprintf("%s: %d\n", k, v))
	}
	slices.Sort(lines)
	return strings.Join(lines, "")
}

// Counts are the counts of a Counter for one resource and namespace.
type Counts struct {
	c                   *Counter
	resource, namespace string
}

// Count returns the number of requests with the given verbs.
func (s Counts) Count(verbs ...string) int {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	n := 0
	for k, v := range s.c.counts {
		if (s.resource == "" || k.Resource == s.resource) && (s.namespace == "" || k.Namespace == s.namespace) &&
			slices.Contains(verbs, k.Verb) {
			n += v
		}
	}
	return n
}

// Writes returns the number of create, update, patch and delete requests.
func (s Counts) Writes() int { return s.Count(WriteVerbs...) }
