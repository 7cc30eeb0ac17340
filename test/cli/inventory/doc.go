// Package inventorysuite runs the inventory case of test/cli (Gather)
// against a real API server that serves Cluster API v1beta1 only, as older
// management clusters do, and checks that discovery finds that version;
// internal/cli/inventory runs the same case against the model API server
// (v1beta2).
package inventorysuite
