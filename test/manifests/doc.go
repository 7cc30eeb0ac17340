// Package manifests tests initlock's install manifests: it renders config/
// with "make manifests" (the pinned kustomize) and applies every object to a
// real kube-apiserver v1.37 with server-side apply in dry-run mode
// (dryRun=All), so that each is valid for that Kubernetes version (unknown
// fields are errors there, and any warning, such as a Pod template that
// breaks the namespace's Pod Security level, fails the test), and checks that
// the objects refer to each other consistently (RBAC bindings, the
// Deployment's ServiceAccount, the Service's selector).
//
// It does not run the manager from the manifests: the tests of
// test/manager run it with exactly the rights of config/rbac.
package manifests
