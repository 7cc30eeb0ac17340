package oci_test

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/initlock/initlock/hack/release/archive"
	"github.com/initlock/initlock/hack/release/oci"
)

func build(t *testing.T, dir string) v1.Hash {
	t.Helper()
	epoch := time.Unix(1700000000, 0)
	var imgs []v1.Image
	for _, arch := range []string{"amd64", "arm64"} {
		img, err := oci.Build(oci.Image{
			OS: "linux", Architecture: arch,
			Files: []archive.File{
				{Name: "etc", Mode: 0o755, Dir: true},
				{Name: "etc/passwd", Mode: 0o644, Content: []byte("nonroot:x:65532:65532::/home/nonroot:/sbin/nologin\n")},
				{Name: "app", Mode: 0o755, Content: []byte("binary for " + arch)},
			},
			User: "65532:65532", Entrypoint: []string{"/app"},
			Labels: map[string]string{"org.opencontainers.image.version": "v0.0.1"},
		}, epoch)
		if err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
	}
	idx, err := oci.Index(imgs, map[string]string{"org.opencontainers.image.version": "v0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := oci.WriteLayout(dir, "v0.0.1", idx)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Two builds of the same files give the same index digest, and the layout
// holds the images as built: platform, user, entrypoint, files and times.
func TestBuildIsReproducible(t *testing.T) {
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	ha, hb := build(t, a), build(t, b)
	if ha != hb {
		t.Fatalf("two builds give %s and %s", ha, hb)
	}
	ia, _ := os.ReadFile(filepath.Join(a, "index.json"))
	ib, _ := os.ReadFile(filepath.Join(b, "index.json"))
	if string(ia) != string(ib) {
		t.Fatalf("index.json differs:\n%s\n%s", ia, ib)
	}

	p, err := layout.FromPath(a)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 || m.Manifests[0].Digest != ha {
		t.Fatalf("layout index: %+v, %v", m, err)
	}
	inner, err := idx.ImageIndex(ha)
	if err != nil {
		t.Fatal(err)
	}
	im, err := inner.IndexManifest()
	if err != nil || len(im.Manifests) != 2 || im.Manifests[0].Platform.Architecture != "amd64" || im.Manifests[1].Platform.Architecture != "arm64" {
		t.Fatalf("image index: %+v, %v", im, err)
	}
	img, err := inner.Image(im.Manifests[1].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Architecture != "arm64" || cf.OS != "linux" || cf.Config.User != "65532:65532" || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/app" || cf.Created.Unix() != 1700000000 {
		t.Fatalf("config: %+v", cf)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(b)
		if h.ModTime.Unix() != 1700000000 || h.Uid != 0 {
			t.Errorf("%s: time %v, uid %d", h.Name, h.ModTime, h.Uid)
		}
	}
	if got["app"] != "binary for arm64" || len(got) != 3 {
		t.Fatalf("layer files: %v", got)
	}
}
