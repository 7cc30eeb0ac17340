// Package capi knows just enough of Cluster API to guard its init lock: the
// group, kinds, label and annotation the lock relies on, and how to read
// "paused" and "control plane initialised" from a Cluster of either served
// version (v1beta1 or v1beta2), given as unstructured content.
//
// It deliberately does not import the Cluster API Go types, so that the
// library works with any Cluster API release a provider builds against and
// on management clusters that serve only v1beta1. Typed objects are read
// after conversion to unstructured content.
//
// It keeps no state, and makes no API call but in Discover. It knows only the fields named
// here: a Cluster API release that moved them would need a change here.
package capi
