// Package publish tests the publishing of a release's images as the
// documentation says to do it (make test-release builds the release into
// $INITLOCK_DIST first). It reads every crane command of README.md,
// docs/install.md and docs/release.md, runs each on the release's OCI
// layouts against a registry served in process by go-containerregistry's
// pkg/registry, through the library calls the crane CLI makes for that
// command and those flags, and checks that each pushed tag has the digest
// of dist/images.txt, the one the manifests, the release notes and
// Velero's plugin reference name.
//
// It is a module of its own, with go-containerregistry at the version of
// hack/release, so that the main module does not depend on it. It does not
// run the crane binary itself, nor skopeo, nor push to a registry that
// needs credentials or TLS.
package publish
