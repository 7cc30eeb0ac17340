package kubeenv

import (
	"net/http"
	"strings"
)

// RoundTripperFunc is an http.RoundTripper made of a function.
type RoundTripperFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f RoundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Request names an API request by what it does.
type Request struct {
	// Verb is get, list, watch, create, update, patch or delete, or
	// discovery for a request of an API group version itself.
	Verb string
	// Group and Version are the API group ("" for the core group) and
	// version requested.
	Group, Version string
	// Resource is the resource, with its subresource as "clusters/status",
	// and "namespaces" for a request of a namespace itself.
	Resource string
	// Namespace is the namespace of a namespaced request.
	Namespace string
	// Name is the name of the object a request is about, "" for a request
	// of a collection or of a namespace itself.
	Name string
}

// Classify names req.
func Classify(req *http.Request) Request {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var r Request
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		r.Version, rest = parts[1], parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		r.Group, r.Version, rest = parts[1], parts[2], parts[3:]
	}
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
	if len(rest) > 1 {
		r.Name = rest[1]
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
