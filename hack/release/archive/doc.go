// Package archive writes reproducible tar and tar.gz archives: the same
// files always give the same bytes, whoever builds them and whenever. It
// is the one tar writer of initlock's release, used for the image layers
// and for the kubectl-initlock archives.
//
// It guarantees that entries are written in the order given, with the
// modification time given (usually SOURCE_DATE_EPOCH), owner 0:0 and no
// user or group names, with the mode of each File, and that the gzip
// stream has no name or time in its header. Parent folders are not added
// implicitly: list them as Files.
//
// It does not read modes, owners or times from the file system, and holds
// each file in memory.
package archive
