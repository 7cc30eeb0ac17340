// Package capi knows just enough of Cluster API to guard its init lock: the
// group, kinds and labels, and how to read "paused" and "control plane
// initialised" from a Cluster of any served version (v1beta1 or v1beta2),
// given as unstructured content.
//
// It deliberately does not import the Cluster API Go types: initlock has to
// work on management clusters that serve only v1beta1 as well as on those
// that store v1beta2, and reading the few fields it needs from unstructured
// content keeps it independent of the Cluster API release a provider uses.
//
// It does not talk to the API server; see Discover for the one exception,
// which only asks discovery which versions are served.
package capi
