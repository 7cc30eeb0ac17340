// Package capi is the main module's view of Cluster API. The facts the init
// lock relies on (group, versions, kinds, the cluster-name label, the paused
// annotation, and how to read "paused" and "control plane initialised" from
// unstructured content) are defined once, in the library's package
// github.com/initlock/initlock/pkg/initlock/capi, and only named here. What
// the manager and the kubectl plugin need besides (the watch-filter label,
// and which version discovery offers) is defined here.
//
// It does not import the Cluster API Go types, for the reasons the
// library's package gives. It does not talk to the API server; see Discover
// for the one exception, which only asks discovery which versions are
// served.
package capi
