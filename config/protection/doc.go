// Package protection holds the lock guard that initlock ships,
// lock-guard.yaml (a ValidatingAdmissionPolicy and its binding, installed
// by kustomize from this folder), embedded in the binaries: the manager
// and kubectl initlock compare the guard installed in a cluster with it
// (internal/lockguard), and the test kit installs it (kubeenv). The file
// is the one source: nothing holds a copy of its text.
//
// It parses nothing: internal/lockguard.Shipped reads the bytes.
package protection
