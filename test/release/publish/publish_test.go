package publish_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// root is the initlock work tree.
const root = "../../.."

// docs are the files that tell how to publish the images.
var docs = []string{"README.md", "docs/install.md", "docs/release.md"}

// images are the images of a release.
var images = []string{"initlock-manager", "velero-plugin-initlock"}

func dist(t *testing.T) string {
	t.Helper()
	d := os.Getenv("INITLOCK_DIST")
	if d == "" {
		t.Fatal("INITLOCK_DIST is not set: run these tests with make test-release")
	}
	return d
}

// digests reads images.txt: the digest of each image, by name.
func digests(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dist(t), "images.txt"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, ref := range strings.Fields(string(b)) {
		named, digest, ok := strings.Cut(ref, "@")
		repo := named[:strings.LastIndex(named, ":")]
		if !ok || !strings.HasPrefix(digest, "sha256:") {
			t.Fatalf("images.txt: %q is not REGISTRY/NAME:VERSION@sha256:...", ref)
		}
		out[repo[strings.LastIndex(repo, "/")+1:]] = digest
	}
	if len(out) != len(images) {
		t.Fatalf("images.txt names %v, want %v", out, images)
	}
	return out
}

// command is a crane command of a document.
type command struct {
	doc, line string
	// verb is push or digest; flags are its flags; args its arguments.
	verb  string
	flags []string
	args  []string
}

// craneLine finds a crane command in a line of a shell block, or in the
// inline code of a line of prose.
var craneLine = regexp.MustCompile("(?:^|`|\\s)crane (push|digest)((?: [^ `#]+)+)")

// commands reads the crane push and crane digest commands of the docs.
func commands(t *testing.T) []command {
	t.Helper()
	var out []command
	for _, doc := range docs {
		f, err := os.Open(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(strings.TrimLeft(sc.Text(), "> "))
			for _, m := range craneLine.FindAllStringSubmatch(line, -1) {
				c := command{doc: doc, line: line, verb: m[1]}
				for _, w := range strings.Fields(m[2]) {
					if strings.HasPrefix(w, "-") {
						c.flags = append(c.flags, w)
					} else {
						c.args = append(c.args, w)
					}
				}
				out = append(out, c)
			}
		}
		_ = f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// push does what "crane push [--index] PATH REF" does when PATH is an OCI
// image layout, with the same go-containerregistry calls as crane's push
// command (cmd/crane/cmd/push.go of v0.22.1) and crane's default options:
// without --index, the layout must hold one entry, an image or an image
// index, and that entry is pushed as it is; with --index, the layout's own
// index (index.json) is pushed, the entries its manifests. It returns the
// digest crane prints.
func push(path, ref string, flags []string) (v1.Hash, error) {
	index := false
	for _, f := range flags {
		switch f {
		case "--index":
			index = true
		default:
			return v1.Hash{}, fmt.Errorf("crane push %s: the test does not mirror this flag", f)
		}
	}
	l, err := layout.ImageIndexFromPath(path)
	if err != nil {
		return v1.Hash{}, err
	}
	var pushed partial.WithRawManifest = l
	if !index {
		m, err := l.IndexManifest()
		if err != nil {
			return v1.Hash{}, err
		}
		if len(m.Manifests) != 1 {
			return v1.Hash{}, fmt.Errorf("%s holds %d entries: crane push needs --index", path, len(m.Manifests))
		}
		switch d := m.Manifests[0]; {
		case d.MediaType.IsIndex():
			pushed, err = l.ImageIndex(d.Digest)
		case d.MediaType.IsImage():
			pushed, err = l.Image(d.Digest)
		default:
			err = fmt.Errorf("%s holds a %s", path, d.MediaType)
		}
		if err != nil {
			return v1.Hash{}, err
		}
	}
	o := crane.GetOptions()
	r, err := name.ParseReference(ref, o.Name...)
	if err != nil {
		return v1.Hash{}, err
	}
	switch p := pushed.(type) {
	case v1.ImageIndex:
		if err := remote.WriteIndex(r, p, o.Remote...); err != nil {
			return v1.Hash{}, err
		}
		return p.Digest()
	case v1.Image:
		if err := remote.Write(r, p, o.Remote...); err != nil {
			return v1.Hash{}, err
		}
		return p.Digest()
	}
	return v1.Hash{}, errors.New("nothing to push")
}

// localRegistry serves a registry in process and returns its host, which
// go-containerregistry reaches over plain HTTP (a loopback address).
func localRegistry(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

// local moves a documented reference to the local registry: its registry
// host is replaced, its repository and tag kept, and $img is img.
func local(t *testing.T, host, ref, img string) string {
	t.Helper()
	ref = strings.ReplaceAll(ref, "$img", img)
	_, rest, ok := strings.Cut(ref, "/")
	if !ok || strings.Contains(ref, "$") {
		t.Fatalf("%q is not REGISTRY/REPOSITORY:TAG", ref)
	}
	return host + "/" + rest
}

// Every crane push of the docs, done as the docs write it, pushes each
// image under a tag whose digest is the image's digest in images.txt; and
// every crane digest of the docs then prints that digest.
func TestPublishAsDocumented(t *testing.T) {
	want := digests(t)
	host := localRegistry(t)
	pushes := map[string]int{}
	var digestCommands []command
	for _, c := range commands(t) {
		if c.verb == "digest" {
			digestCommands = append(digestCommands, c)
			continue
		}
		pushes[c.doc]++
		if len(c.args) != 2 || !strings.HasPrefix(c.args[0], "dist/images/") {
			t.Errorf("%s: %q: want crane push [FLAGS] dist/images/NAME REGISTRY/NAME:TAG", c.doc, c.line)
			continue
		}
		for _, img := range images {
			if !strings.Contains(c.line, "$img") && !strings.Contains(c.line, img) {
				continue
			}
			path := filepath.Join(dist(t), filepath.FromSlash(strings.TrimPrefix(strings.ReplaceAll(c.args[0], "$img", img), "dist/")))
			ref := local(t, host, c.args[1], img)
			printed, err := push(path, ref, c.flags)
			if err != nil {
				t.Errorf("%s: %q for %s: %v", c.doc, c.line, img, err)
				continue
			}
			got, err := crane.Digest(ref)
			if err != nil {
				t.Errorf("%s: crane digest %s: %v", c.doc, ref, err)
				continue
			}
			if got != want[img] || printed.String() != want[img] {
				t.Errorf("%s: %q pushed %s with digest %s (printed %s); images.txt says %s", c.doc, c.line, img, got, printed, want[img])
			}
		}
	}
	t.Logf("crane push commands by document: %v; crane digest commands: %d", pushes, len(digestCommands))
	for _, doc := range docs {
		if pushes[doc] == 0 {
			t.Errorf("%s shows no crane push", doc)
		}
	}
	if len(digestCommands) == 0 {
		t.Error("no document shows crane digest")
	}
	for _, c := range digestCommands {
		if len(c.flags) != 0 || len(c.args) != 1 {
			t.Errorf("%s: %q: want crane digest REGISTRY/NAME:TAG", c.doc, c.line)
			continue
		}
		img := ""
		for _, i := range images {
			if strings.Contains(c.args[0], "/"+i+":") {
				img = i
			}
		}
		if img == "" {
			t.Errorf("%s: %q names no image of the release", c.doc, c.line)
			continue
		}
		// The documented push of the same document put it there.
		if got, err := crane.Digest(local(t, host, c.args[0], img)); err != nil || got != want[img] {
			t.Errorf("%s: %q prints %s (%v); images.txt says %s", c.doc, c.line, got, err, want[img])
		}
	}
}

// The layout as a whole, what crane push --index pushes, is not the image
// of images.txt: its index wraps it, and the tag gets the wrapper's digest,
// which nothing of the release names. This is why no document may say
// --index.
func TestPushIndexGivesAnotherDigest(t *testing.T) {
	want := digests(t)
	host := localRegistry(t)
	for _, img := range images {
		ref := host + "/initlock/" + img + ":wrapped"
		got, err := push(filepath.Join(dist(t), "images", img), ref, []string{"--index"})
		if err != nil {
			t.Fatal(err)
		}
		if got.String() == want[img] {
			t.Errorf("%s: crane push --index gives the digest of images.txt; the docs could say it", img)
		}
	}
	for _, c := range commands(t) {
		if c.verb == "push" && len(c.flags) > 0 {
			t.Errorf("%s: %q: push without flags (the layout's one entry, as it is)", c.doc, c.line)
		}
	}
}
