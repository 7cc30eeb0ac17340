// Package release checks initlock's clusterctl provider files with the
// clusterctl library of the Cluster API release pinned in this module: its
// test lays out the components YAML and metadata.yaml of a release
// ($INITLOCK_DIST, written by make release) as a local file repository and
// reads them back as "clusterctl generate provider --addon initlock"
// does, checking the release series, the contract, the provider label on
// every object, the target namespace and the image, and the clusterctl
// variables of the manager's settings, with their defaults and set. make
// test-release runs it; it holds no code of its own.
package release
