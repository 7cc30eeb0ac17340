//go:build release

package release_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
	Platform  *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform,omitempty"`
}

type imageConfig struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		User       string            `json:"User"`
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
}

// unpacked is an image of this machine's platform, unpacked.
type unpacked struct {
	config imageConfig
	// root holds the files of the layers; files lists them, folders
	// with a trailing slash.
	root  string
	files []string
}

func distDir(t *testing.T) string {
	t.Helper()
	d := os.Getenv("INITLOCK_DIST")
	if d == "" {
		t.Fatal("INITLOCK_DIST is not set: run these tests with make test-release")
	}
	return d
}

// unpack reads the OCI layout of image in the release and unpacks the
// image of this machine's platform into a root folder open to every user.
func unpack(t *testing.T, image string) unpacked {
	t.Helper()
	dir := filepath.Join(distDir(t), "images", image)
	var layout struct {
		Manifests []descriptor `json:"manifests"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	unmarshal(t, b, &layout)
	if len(layout.Manifests) != 1 || layout.Manifests[0].MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("%s: index.json holds %+v, want one image index", image, layout.Manifests)
	}
	var idx struct {
		Manifests []descriptor `json:"manifests"`
	}
	unmarshal(t, blob(t, dir, layout.Manifests[0]), &idx)
	i := slices.IndexFunc(idx.Manifests, func(d descriptor) bool {
		return d.Platform != nil && d.Platform.OS == runtime.GOOS && d.Platform.Architecture == runtime.GOARCH
	})
	if i < 0 {
		t.Fatalf("%s: no image for %s/%s in %+v", image, runtime.GOOS, runtime.GOARCH, idx.Manifests)
	}
	var m struct {
		Config descriptor   `json:"config"`
		Layers []descriptor `json:"layers"`
	}
	unmarshal(t, blob(t, dir, idx.Manifests[i]), &m)
	var u unpacked
	unmarshal(t, blob(t, dir, m.Config), &u.config)
	if u.config.OS != runtime.GOOS || u.config.Architecture != runtime.GOARCH {
		t.Fatalf("%s: config of %s/%s", image, u.config.OS, u.config.Architecture)
	}
	// The image's user runs in a chroot of the root folder, so only that
	// folder must be open to it.
	u.root = filepath.Join(t.TempDir(), "rootfs")
	if err := os.Mkdir(u.root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(u.root, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	for _, l := range m.Layers {
		u.files = append(u.files, extract(t, blob(t, dir, l), u.root)...)
	}
	return u
}

// blob reads a blob of the layout and checks its size and digest.
func blob(t *testing.T, dir string, d descriptor) []byte {
	t.Helper()
	hexDigest, ok := strings.CutPrefix(d.Digest, "sha256:")
	if !ok {
		t.Fatalf("digest %q is not sha256", d.Digest)
	}
	b, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", hexDigest))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != hexDigest || int64(len(b)) != d.Size {
		t.Fatalf("blob %s: %d bytes with digest %x, want %d bytes", d.Digest, len(b), sum, d.Size)
	}
	return b
}

// extract unpacks a gzip-compressed layer into root and lists its entries.
func extract(t *testing.T, layer []byte, root string) []string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(layer))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(root, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(path, root+string(filepath.Separator)) {
			t.Fatalf("layer entry %q leaves the root", h.Name)
		}
		names = append(names, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, os.FileMode(h.Mode).Perm()); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, os.FileMode(h.Mode).Perm()); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("layer entry %q of type %c: the images hold only files and folders", h.Name, h.Typeflag)
		}
	}
}

func unmarshal(t *testing.T, b []byte, into any) {
	t.Helper()
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
}

// check compares what the image holds and how it runs with the release's
// conventions.
func (u unpacked) check(t *testing.T, entrypoint []string, files ...string) {
	t.Helper()
	want := append([]string{"LICENSE", "etc/", "etc/group", "etc/passwd"}, files...)
	slices.Sort(want)
	got := slices.Sorted(slices.Values(u.files))
	if !slices.Equal(got, want) {
		t.Errorf("image files %v, want %v (no shell, nothing else)", got, want)
	}
	c := u.config.Config
	if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, entrypoint) || len(c.Cmd) != 0 {
		t.Errorf("image runs %v %v as %q, want %v as 65532:65532", c.Entrypoint, c.Cmd, c.User, entrypoint)
	}
	if c.Labels["org.opencontainers.image.licenses"] != "Apache-2.0" {
		t.Errorf("labels %v", c.Labels)
	}
}
