package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An -images-only run may empty a folder that holds only what such a run
// writes, or nothing; it refuses any other, and names what it would delete.
func TestHoldsOnlyImages(t *testing.T) {
	dir := t.TempDir()
	if err := holdsOnlyImages(filepath.Join(dir, "absent")); err != nil {
		t.Errorf("a folder that does not exist: %v", err)
	}
	if err := holdsOnlyImages(dir); err != nil {
		t.Errorf("an empty folder: %v", err)
	}
	touch := func(names ...string) {
		for _, name := range names {
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	touch("images.txt", "checksums.txt")
	if err := os.Mkdir(filepath.Join(dir, "images"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := holdsOnlyImages(dir); err != nil {
		t.Errorf("a folder of images: %v", err)
	}
	touch("install.yaml", "release-notes.md")
	err := holdsOnlyImages(dir)
	if err == nil || !strings.Contains(err.Error(), "install.yaml, release-notes.md") {
		t.Errorf("a release: %v, want a refusal naming its files", err)
	}
	// run refuses before it deletes anything.
	err = run(options{root: "../..", out: dir, version: "v0.1.0", imagesOnly: true})
	if err == nil {
		t.Fatal("run -images-only into a release's folder succeeded")
	}
	if _, statErr := os.Stat(filepath.Join(dir, "release-notes.md")); statErr != nil {
		t.Errorf("run -images-only deleted the release (%v): %v", err, statErr)
	}
}
