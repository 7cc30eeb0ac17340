// Command release builds initlock's release artefacts from the work tree,
// without Docker: the container images as OCI layouts, the install
// manifests pinned to the images' digests, the clusterctl provider files,
// the kubectl-initlock archives and their krew manifest, the release notes
// and checksums. "make images" and "make release" run it.
//
// Every artefact is reproducible: binaries are static (CGO_ENABLED=0),
// built with -trimpath, without VCS stamping and with an empty build id,
// and every archive and image is dated SOURCE_DATE_EPOCH, by default the
// time of the HEAD commit. Building twice from the same commit gives the
// same bytes.
//
// Usage (from this folder):
//
//	go run . -version v0.1.0 -out ../../dist [-images-only] [-registry ghcr.io/initlock]
//	    [-download-url https://github.com/initlock/initlock/releases/download]
//
// -images-only refuses an -out folder that holds anything but images, such
// as a release: it never deletes what a full run wrote.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// options of one run.
type options struct {
	root, out, version, registry, downloadURL string
	platforms                                 []string
	// archivePlatforms are the platforms of the kubectl-initlock archives.
	archivePlatforms []string
	imagesOnly       bool
}

var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

func main() {
	var o options
	var platforms, archivePlatforms string
	flag.StringVar(&o.root, "root", "../..", "The initlock work tree.")
	flag.StringVar(&o.out, "out", "../../dist", "Folder the artefacts are written to; emptied first (with -images-only, only when it holds nothing but images).")
	flag.StringVar(&o.version, "version", "", "Release version, vMAJOR.MINOR.PATCH[-pre] (required).")
	flag.StringVar(&o.registry, "registry", "ghcr.io/initlock", "Registry and namespace the images are published under.")
	flag.StringVar(&o.downloadURL, "download-url", "https://github.com/initlock/initlock/releases/download", "Where the release's files are published, followed by /VERSION/FILE.")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "Platforms of the images, comma-separated.")
	flag.StringVar(&archivePlatforms, "archive-platforms", strings.Join(krewPlatforms, ","), "Platforms of the kubectl-initlock archives and of the krew manifest, comma-separated.")
	flag.BoolVar(&o.imagesOnly, "images-only", false, "Build the images only.")
	flag.Parse()
	o.platforms = strings.Split(platforms, ",")
	o.archivePlatforms = strings.Split(archivePlatforms, ",")
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "release: %v\n", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if !semver.MatchString(o.version) {
		return fmt.Errorf("-version=%q is not vMAJOR.MINOR.PATCH[-pre] (make release VERSION=v0.1.0)", o.version)
	}
	var err error
	if o.root, err = filepath.Abs(o.root); err != nil {
		return err
	}
	if o.out, err = filepath.Abs(o.out); err != nil {
		return err
	}
	if o.imagesOnly {
		if err := holdsOnlyImages(o.out); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(o.out); err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	r, err := newRelease(o)
	if err != nil {
		return err
	}
	defer r.cleanup()
	refs, err := r.images()
	if err != nil {
		return err
	}
	if o.imagesOnly {
		return r.checksums()
	}
	steps := []func() error{
		func() error { return r.manifests(refs) },
		r.archives,
		r.krew,
		func() error { return r.notes(refs) },
		r.checksums,
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "release: wrote %s\n", o.out)
	return nil
}

// imagesOnlyFiles are the entries of a folder that an -images-only run
// writes: it may empty a folder that holds nothing else.
var imagesOnlyFiles = map[string]bool{"images": true, "images.txt": true, "checksums.txt": true}

// holdsOnlyImages refuses a folder that holds anything an -images-only run
// does not write, such as the release that "make release" wrote there:
// "make images" replaces the images of an earlier "make images" and
// deletes nothing else.
func holdsOnlyImages(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var others []string
	for _, e := range entries {
		if !imagesOnlyFiles[e.Name()] {
			others = append(others, e.Name())
		}
	}
	if len(others) == 0 {
		return nil
	}
	return fmt.Errorf("%s holds %s, which -images-only would delete (a release made by make release?): "+
		"build the images into another folder (make images DIST=dist/images-only) or move them away first", dir, strings.Join(others, ", "))
}
