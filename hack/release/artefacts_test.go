package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"debug/macho"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/initlock/initlock/hack/release/notes"
)

// The tests of this file check the artefacts of a release that
// "make test-release" builds into $INITLOCK_DIST.

// env returns $name, which make test-release sets.
func env(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: run these tests with make test-release", name)
	}
	return v
}

func dist(t *testing.T) string {
	t.Helper()
	return env(t, "INITLOCK_DIST")
}

// read returns the text of the release's file name.
func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dist(t), name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// refs reads images.txt: NAME to REGISTRY/NAME:VERSION@DIGEST.
func refs(t *testing.T) map[string]string {
	t.Helper()
	b := read(t, "images.txt")
	out := map[string]string{}
	for _, ref := range strings.Fields(b) {
		repo, _, _ := strings.Cut(ref, ":")
		out[repo[strings.LastIndex(repo, "/")+1:]] = ref
	}
	if len(out) != 2 || out[ManagerImage] == "" || out[PluginImage] == "" {
		t.Fatalf("images.txt: %q", b)
	}
	return out
}

// version is the release version of the artefacts.
func version(t *testing.T) string {
	ref, _, _ := strings.Cut(refs(t)[ManagerImage], "@")
	return ref[strings.LastIndex(ref, ":")+1:]
}

// Building the images again from the same commit (for the platforms of
// $INITLOCK_PLATFORMS, those of the release) gives the same digests.
func TestImagesAreReproducible(t *testing.T) {
	platforms := env(t, "INITLOCK_PLATFORMS")
	want := refs(t)
	first := want[ManagerImage]
	registry := first[:strings.LastIndex(first, "/")]
	out := filepath.Join(t.TempDir(), "dist")
	if err := run(options{root: "../..", out: out, version: version(t), registry: registry,
		platforms: strings.Split(platforms, ","), imagesOnly: true}); err != nil {
		t.Fatal(err)
	}
	a := read(t, "images.txt")
	b, err := os.ReadFile(filepath.Join(out, "images.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if a != string(b) {
		t.Fatalf("a second build gives other digests:\nfirst:\n%s\nsecond:\n%s", a, b)
	}
	t.Logf("both builds:\n%s", a)
}

// checksums.txt names every other file of the release with its sha256.
func TestChecksums(t *testing.T) {
	d := dist(t)
	listed := map[string]bool{}
	for line := range strings.Lines(read(t, "checksums.txt")) {
		sum, name, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "  ")
		if !ok {
			t.Fatalf("checksums.txt line %q", line)
		}
		got, err := sha256File(filepath.Join(d, name))
		if err != nil || got != sum {
			t.Errorf("%s: sha256 %s (%v), checksums.txt says %s", name, got, err, sum)
		}
		listed[name] = true
	}
	err := filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(d, path)
		if rel != "checksums.txt" && !listed[filepath.ToSlash(rel)] {
			t.Errorf("%s is not in checksums.txt", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"install.yaml", "install-relink-secrets.yaml", "addon-components.yaml", "lock-guard.yaml", "owner-references-enforcement.yaml",
		"monitoring.yaml", MetricsCertPatch, "metadata.yaml", "initlock.yaml", "release-notes.md", "images.txt"} {
		if !listed[want] {
			t.Errorf("the release has no %s", want)
		}
	}
}

// Every manifest runs the manager image of the release, by digest.
func TestManifestsPinTheImage(t *testing.T) {
	ref := refs(t)[ManagerImage]
	for _, name := range []string{"install.yaml", "install-relink-secrets.yaml", "addon-components.yaml"} {
		var images []string
		for line := range strings.Lines(read(t, name)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "image: "); ok {
				images = append(images, v)
			}
		}
		if len(images) != 1 || images[0] != ref {
			t.Errorf("%s runs %v, want [%s]", name, images, ref)
		}
	}
}

// The release notes say, in order, what changed for an operator (changed
// defaults, upgrade notes, from docs/upgrade-notes.md), the release's row
// of the compatibility table, the images, how to install, and the changes.
func TestReleaseNotes(t *testing.T) {
	text := read(t, "release-notes.md")
	plugin := refs(t)[PluginImage]
	name, digest, _ := strings.Cut(plugin, "@")
	byDigest := name[:strings.LastIndex(name, ":")] + "@" + digest
	changedDefaults, upgradeNotes, err := notes.Upgrade("../..", version(t))
	if err != nil {
		t.Fatal(err)
	}
	last := 0
	for _, want := range []string{"# initlock " + version(t) + "\n",
		"\n## Changed defaults\n\n" + changedDefaults + "\n",
		"\n## Upgrade notes\n\n" + upgradeNotes + "\n",
		"\n## Compatibility\n\n| initlock | Cluster API | Kubernetes (management cluster) | Velero |\n| --- | --- | --- | --- |\n| " + version(t) + " | v1.",
		"\n## Images\n", refs(t)[ManagerImage], plugin,
		"\n## Install\n", "/lock-guard.yaml", "velero plugin add " + byDigest + " ", "/monitoring.yaml",
		"\n## Changes since "} {
		i := strings.Index(text[last:], want)
		if i < 0 {
			t.Fatalf("release-notes.md has no %q after byte %d:\n%s", want, last, text)
		}
		last += i + len(want)
	}
	if strings.Count(text, "\n| v") != 1 {
		t.Errorf("release-notes.md has %d compatibility rows, want the release's alone:\n%s", strings.Count(text, "\n| v"), text)
	}
}

// Every image reference of the release is under $INITLOCK_REGISTRY and
// every download URL under $INITLOCK_DOWNLOAD_URL/VERSION (make
// test-release sets both to other than the defaults), and no text file of
// the release names the default registry or download location.
func TestRegistryAndDownloadURL(t *testing.T) {
	registry, downloadURL := env(t, "INITLOCK_REGISTRY"), env(t, "INITLOCK_DOWNLOAD_URL")
	if registry == "ghcr.io/initlock" || strings.HasPrefix(downloadURL, "https://github.com/initlock/") {
		t.Fatal("the test release uses the default registry or download location: the test would show nothing")
	}
	for name, ref := range refs(t) {
		if !strings.HasPrefix(ref, registry+"/"+name+":") {
			t.Errorf("images.txt: %s is not under %s", ref, registry)
		}
	}
	var uris int
	for line := range strings.Lines(read(t, "initlock.yaml")) {
		if uri, ok := strings.CutPrefix(strings.TrimSpace(line), "uri: "); ok {
			uris++
			if !strings.HasPrefix(uri, downloadURL+"/"+version(t)+"/kubectl-initlock_") {
				t.Errorf("initlock.yaml: uri %s is not under %s/%s", uri, downloadURL, version(t))
			}
		}
	}
	if uris != len(archivePlatforms(t)) {
		t.Errorf("initlock.yaml has %d uris, want %d", uris, len(archivePlatforms(t)))
	}
	notes := read(t, "release-notes.md")
	for _, file := range []string{"install.yaml", "initlock.yaml", "monitoring.yaml"} {
		if !strings.Contains(notes, downloadURL+"/"+version(t)+"/"+file) {
			t.Errorf("release-notes.md does not name %s/%s/%s", downloadURL, version(t), file)
		}
	}
	entries, err := os.ReadDir(dist(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") && !strings.HasSuffix(e.Name(), ".md") && !strings.HasSuffix(e.Name(), ".txt") {
			continue
		}
		text := read(t, e.Name())
		for _, def := range []string{"ghcr.io/initlock", "github.com/initlock/initlock/releases"} {
			if strings.Contains(text, def) {
				t.Errorf("%s names %s, the default", e.Name(), def)
			}
		}
	}
}

// make images into the folder of a release fails and leaves every file of
// the release as it was.
func TestImagesKeepARelease(t *testing.T) {
	out := filepath.Join(t.TempDir(), "dist")
	// The release's files but the image layouts, which weigh much and
	// which the check does not read.
	entries, err := os.ReadDir(dist(t))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	if err := os.MkdirAll(filepath.Join(out, "images"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if err := os.WriteFile(filepath.Join(out, e.Name()), []byte(read(t, e.Name())), 0o644); err != nil {
			t.Fatal(err)
		}
		want[e.Name()], _ = sha256File(filepath.Join(out, e.Name()))
	}
	cmd := exec.CommandContext(t.Context(), "make", "-s", "images", "DIST="+out, "VERSION="+version(t), "PLATFORMS="+env(t, "INITLOCK_PLATFORMS"))
	cmd.Dir = "../.."
	b, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("make images into a release's folder succeeded:\n%s", b)
	}
	if !strings.Contains(string(b), "release-notes.md") || !strings.Contains(string(b), "make images DIST=") {
		t.Errorf("make images says:\n%s\nwant the files it would delete and what to do", b)
	}
	for name, sum := range want {
		if got, err := sha256File(filepath.Join(out, name)); err != nil || got != sum {
			t.Errorf("%s changed: sha256 %s (%v), was %s", name, got, err, sum)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "images")); err != nil {
		t.Errorf("images/: %v", err)
	}
}

// Each kubectl-initlock archive holds the stripped binary of its platform
// and the licence.
func TestArchives(t *testing.T) {
	for _, p := range archivePlatforms(t) {
		goos, goarch, _ := strings.Cut(p, "/")
		name := "kubectl-initlock_" + version(t) + "_" + goos + "_" + goarch + ".tar.gz"
		files := untarGz(t, name)
		if len(files) != 2 || len(files["LICENSE"]) == 0 {
			t.Fatalf("%s holds %d files", name, len(files))
		}
		bin := files["kubectl-initlock"]
		switch goos {
		case "linux":
			f, err := elf.NewFile(bytes.NewReader(bin))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[goarch]; f.Machine != want {
				t.Errorf("%s: machine %v, want %v", name, f.Machine, want)
			}
			if f.Section(".symtab") != nil {
				t.Errorf("%s: not stripped (.symtab)", name)
			}
		case "darwin":
			f, err := macho.NewFile(bytes.NewReader(bin))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[goarch]; f.Cpu != want {
				t.Errorf("%s: cpu %v, want %v", name, f.Cpu, want)
			}
			// A stripped Mach-O binary keeps only the undefined symbols it
			// imports from the system libraries.
			if f.Symtab == nil {
				t.Fatalf("%s: no symbol table at all", name)
			}
			for _, s := range f.Symtab.Syms {
				if s.Sect != 0 {
					t.Errorf("%s: not stripped (defines %s)", name, s.Name)
					break
				}
			}
		}
	}
}

// untarGz reads the release's archive name.
func untarGz(t *testing.T, name string) map[string][]byte {
	t.Helper()
	zr, err := gzip.NewReader(strings.NewReader(read(t, name)))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if out[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
}

// krew's own validation accepts the manifest, and krew installs every
// platform's archive from it, checking its sha256; the installed plugin of
// this machine's platform runs.
func TestKrew(t *testing.T) {
	d := dist(t)
	manifest := filepath.Join(d, "initlock.yaml")
	krew := func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "go", append([]string{"tool", "-modfile=../pins/krew/go.mod"}, args...)...)
		cmd.Env = append(append(os.Environ(), "GOWORK=off"), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	krew(nil, "validate-krew-manifest", "-manifest", manifest, "-skip-install")
	for _, p := range archivePlatforms(t) {
		goos, goarch, _ := strings.Cut(p, "/")
		root := t.TempDir()
		archive := filepath.Join(d, "kubectl-initlock_"+version(t)+"_"+goos+"_"+goarch+".tar.gz")
		krew([]string{"KREW_ROOT=" + root, "KREW_OS=" + goos, "KREW_ARCH=" + goarch},
			"krew", "install", "--manifest="+manifest, "--archive="+archive)
		if _, err := os.Stat(filepath.Join(root, "store", "initlock", version(t), "LICENSE")); err != nil {
			t.Errorf("%s: krew did not install the licence: %v", p, err)
		}
		if goos != runtime.GOOS || goarch != runtime.GOARCH {
			continue
		}
		out, err := exec.CommandContext(t.Context(), filepath.Join(root, "bin", "kubectl-initlock"), "version").Output()
		if err != nil || !strings.HasPrefix(string(out), "kubectl-initlock "+version(t)+" (") {
			t.Errorf("installed plugin: version = %q (%v)", out, err)
		}
	}
}

// archivePlatforms are the platforms of the release's kubectl-initlock
// archives, $INITLOCK_ARCHIVE_PLATFORMS (make test-release sets it).
func archivePlatforms(t *testing.T) []string {
	return strings.Split(env(t, "INITLOCK_ARCHIVE_PLATFORMS"), ",")
}
