package copier

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Copy copies every regular file of from into to, which must exist, and
// returns the names copied, in lexical order. A folder without regular
// files is an error: an image that copies nothing is broken.
func Copy(from, to string) ([]string, error) {
	entries, err := os.ReadDir(from)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", from, err)
	}
	if fi, err := os.Stat(to); err != nil {
		return nil, fmt.Errorf("target folder: %w (mount it at %s)", err, to)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("target %s is not a folder", to)
	}
	var copied []string
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if err := copyFile(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
			return copied, err
		}
		copied = append(copied, e.Name())
	}
	if len(copied) == 0 {
		return nil, fmt.Errorf("no file to copy in %s", from)
	}
	return copied, nil
}

func copyFile(src, dst string) (retErr error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*")
	if err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	defer func() {
		if retErr != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, in); err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if err := tmp.Chmod(fi.Mode().Perm()); err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if err := errors.Join(tmp.Sync(), tmp.Close()); err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	return nil
}
