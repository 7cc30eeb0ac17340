// Package consumer checks that pkg/initlock can be adopted as a module of its
// own: a provider-shaped module outside this repository's main module
// requires it (replaced by the local folder) together with the
// controller-runtime and Kubernetes versions of Cluster API v1.12 (the
// oldest supported) and v1.14 (the newest), and must resolve and build.
// Its module graph must hold none of what only the main module needs
// (Velero, gonum, cobra, cli-runtime). With Cluster API v1.14's own types
// the provider's program then runs against the real API server: the
// drop-in mutex satisfies CABPK's interface with *clusterv1.Cluster and
// *clusterv1.Machine, and the provider's next Update of the Cluster object
// it passed succeeds.
//
// The modules come from the local module cache, or the module proxy when
// missing; the tests skip, saying so, only when the proxy cannot be
// reached. With a warm cache and build cache they take seconds.
package consumer
