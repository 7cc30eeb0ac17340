// Package relinksecrets holds the opt-in role that lets the manager's
// relinker link Secrets, role.yaml (installed by kustomize from this
// folder), embedded in the binaries: kubectl initlock doctor wants its
// rules granted when the manager runs with --relink-secrets. The file is
// the one source: nothing holds a copy of its rules.
package relinksecrets
