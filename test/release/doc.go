// Package release tests the container images of a release (build tag
// release; make test-release builds the release into $INITLOCK_DIST first).
// It reads each OCI image layout with the standard library only, checking
// every blob's digest, unpacks this machine's platform image into a root
// folder and runs what is inside as the image says: its entrypoint, as its
// user (in a chroot of that folder when run as root). The manager from the
// image heals a lock on the local control plane and serves metrics only
// over HTTPS; the plugin image's entrypoint fills a /target folder, and
// the plugin binary it copied is served through Velero's plugin framework.
package release
