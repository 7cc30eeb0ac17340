// Package v1beta1 runs the initlock manager against a management
// cluster that serves only Cluster API v1beta1 (the CRDs of Cluster API
// v1.8.4). It holds tests only; the Env of a test package serves one set of
// CRDs, hence its own package.
package v1beta1
