package archive_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/initlock/initlock/hack/release/archive"
)

func TestTarGzIsReproducible(t *testing.T) {
	files := []archive.File{
		{Name: "bin", Mode: 0o755, Dir: true},
		{Name: "bin/tool", Mode: 0o755, Content: []byte("binary")},
		{Name: "LICENSE", Mode: 0o644, Content: []byte("text")},
	}
	epoch := time.Unix(1700000000, 0)
	var a, b bytes.Buffer
	if err := archive.WriteTarGz(&a, files, epoch); err != nil {
		t.Fatal(err)
	}
	if err := archive.WriteTarGz(&b, files, epoch); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two archives of the same files differ")
	}
	zr, err := gzip.NewReader(&a)
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("gzip header names %q, dated %v", zr.Name, zr.ModTime)
	}
	tr := tar.NewReader(zr)
	var got []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(epoch) || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: time %v, owner %d:%d %q:%q", h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname)
		}
		got = append(got, h.Name)
	}
	if want := []string{"bin/", "bin/tool", "LICENSE"}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("entries %v, want %v", got, want)
	}
}
