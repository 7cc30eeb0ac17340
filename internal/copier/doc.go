// Package copier copies the regular files of one folder into another. It is
// the entrypoint of initlock's Velero plugin image, which has no shell and
// no cp: Velero installs a plugin by running its image as an init container
// with the server's plugin folder mounted at /target, and the image copies
// its binaries there (see cmd/copy-plugins).
//
// It guarantees that each file appears in the target complete or not at
// all (written to a temporary name in the target folder, synced, then
// renamed), with the executable bits of the source, and that files already
// in the target under other names are left alone.
//
// It does not descend into subfolders, follow symbolic links or copy
// ownership: the copy belongs to whoever runs it.
package copier
