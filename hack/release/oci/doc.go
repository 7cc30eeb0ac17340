// Package oci builds initlock's container images without Docker: each image
// is one layer of files made by package archive on an empty base, with a
// config naming the user, entrypoint and labels, assembled with
// go-containerregistry and written as an OCI image layout holding an image
// index of one image per platform.
//
// It guarantees reproducibility: the same files, config and epoch give the
// same layer, manifest, config and index digests, on any machine (every
// time in the image is the epoch, the tar and gzip streams are
// deterministic, and the platforms are written in the order given).
//
// It does not pull base images, so an image holds only what it is given:
// no shell, no CA bundle, no time zone data.
package oci
