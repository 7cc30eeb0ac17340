// Package clisuite tests kubectl-initlock (internal/cli) by running its
// commands in process against a Backend: the real API server (the tests of
// this folder, with etcd, kube-apiserver, kube-controller-manager and the
// project's lock guard) or the model API server (internal/kubeenv/apimodel:
// the tests of internal/cli, which need no control plane). Each case of
// Run is written once and asserts the same output, exit codes, objects and
// request counts on both; on the model a command is given its client and
// the Cluster API version (cli.Options.Client), on the real API server it
// reads a kubeconfig and discovers the version.
//
// The cases that need the real API server run only here: authorisation
// (a user without a permission is told which), the garbage collector and
// the lock guard's refusal of its delete, Velero's restore (velerosim),
// discovery of the Cluster API version, and relinks over its default kinds,
// which the model does not all serve (its output formats run on both, over
// ConfigMaps).
//
// It is test support: it calls t.Fatal on unexpected errors and guarantees
// nothing about production use.
package clisuite
