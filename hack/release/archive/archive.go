package archive

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"time"
)

// File is an entry of an archive: a regular file with Content, or a
// folder when Dir is set. Name is a relative slash-separated path.
type File struct {
	Name    string
	Mode    int64
	Dir     bool
	Content []byte
}

// WriteTar writes files to w as a tar archive, every entry dated mtime.
func WriteTar(w io.Writer, files []File, mtime time.Time) error {
	tw := tar.NewWriter(w)
	for _, f := range files {
		h := &tar.Header{
			Name:    f.Name,
			Mode:    f.Mode,
			ModTime: mtime.UTC(),
			Format:  tar.FormatPAX,
		}
		if f.Dir {
			h.Typeflag, h.Name = tar.TypeDir, f.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Content))
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("archiving %s: %w", f.Name, err)
		}
		if !f.Dir {
			if _, err := tw.Write(f.Content); err != nil {
				return fmt.Errorf("archiving %s: %w", f.Name, err)
			}
		}
	}
	return tw.Close()
}

// WriteTarGz writes files to w as a gzip-compressed tar archive.
func WriteTarGz(w io.Writer, files []File, mtime time.Time) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	if err := WriteTar(zw, files, mtime); err != nil {
		return err
	}
	return zw.Close()
}
