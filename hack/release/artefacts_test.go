package main

import (
	"archive/tar"
	"bufio"
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
)

// The tests of this file check the artefacts of a release that
// "make test-release" builds into $INITLOCK_DIST.

func dist(t *testing.T) string {
	t.Helper()
	d := os.Getenv("INITLOCK_DIST")
	if d == "" {
		t.Fatal("INITLOCK_DIST is not set: run these tests with make test-release")
	}
	return d
}

// refs reads images.txt: NAME to REGISTRY/NAME:VERSION@DIGEST.
func refs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dist(t), "images.txt"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, ref := range strings.Fields(string(b)) {
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
	if os.Getenv("INITLOCK_PLATFORMS") == "" {
		t.Fatal("INITLOCK_PLATFORMS is not set: run these tests with make test-release")
	}
	want := refs(t)
	first := want[ManagerImage]
	registry := first[:strings.LastIndex(first, "/")]
	out := filepath.Join(t.TempDir(), "dist")
	if err := run(options{root: "../..", out: out, version: version(t), registry: registry,
		platforms: strings.Split(os.Getenv("INITLOCK_PLATFORMS"), ","), imagesOnly: true}); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(dist(t), "images.txt"))
	b, err := os.ReadFile(filepath.Join(out, "images.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Fatalf("a second build gives other digests:\nfirst:\n%s\nsecond:\n%s", a, b)
	}
	t.Logf("both builds:\n%s", a)
}

// checksums.txt names every other file of the release with its sha256.
func TestChecksums(t *testing.T) {
	d := dist(t)
	f, err := os.Open(filepath.Join(d, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	listed := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("checksums.txt line %q", sc.Text())
		}
		got, err := sha256File(filepath.Join(d, name))
		if err != nil || got != sum {
			t.Errorf("%s: sha256 %s (%v), checksums.txt says %s", name, got, err, sum)
		}
		listed[name] = true
	}
	err = filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
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
	for _, want := range []string{"install.yaml", "install-relink-secrets.yaml", "addon-components.yaml", "owner-references-enforcement.yaml", "metadata.yaml", "initlock.yaml", "release-notes.md", "images.txt"} {
		if !listed[want] {
			t.Errorf("the release has no %s", want)
		}
	}
}

// Every manifest runs the manager image of the release, by digest.
func TestManifestsPinTheImage(t *testing.T) {
	ref := refs(t)[ManagerImage]
	for _, name := range []string{"install.yaml", "install-relink-secrets.yaml", "addon-components.yaml"} {
		b, err := os.ReadFile(filepath.Join(dist(t), name))
		if err != nil {
			t.Fatal(err)
		}
		var images []string
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "image: "); ok {
				images = append(images, v)
			}
		}
		if len(images) != 1 || images[0] != ref {
			t.Errorf("%s runs %v, want [%s]", name, images, ref)
		}
	}
}

// The release notes name the images and the changes.
func TestReleaseNotes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(dist(t), "release-notes.md"))
	if err != nil {
		t.Fatal(err)
	}
	plugin := refs(t)[PluginImage]
	name, digest, _ := strings.Cut(plugin, "@")
	byDigest := name[:strings.LastIndex(name, ":")] + "@" + digest
	for _, want := range []string{"# initlock " + version(t), refs(t)[ManagerImage], plugin, "velero plugin add " + byDigest + " ",
		"## Compatibility\n\n| initlock | Cluster API | Kubernetes (management cluster) | Velero |\n", "## Changes since "} {
		if !strings.Contains(string(b), want) {
			t.Errorf("release-notes.md has no %q:\n%s", want, b)
		}
	}
}

// Each kubectl-initlock archive holds the stripped binary of its platform
// and the licence.
func TestArchives(t *testing.T) {
	for _, p := range archivePlatforms(t) {
		goos, goarch, _ := strings.Cut(p, "/")
		name := "kubectl-initlock_" + version(t) + "_" + goos + "_" + goarch + ".tar.gz"
		files := untarGz(t, filepath.Join(dist(t), name))
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

func untarGz(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
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
	v := os.Getenv("INITLOCK_ARCHIVE_PLATFORMS")
	if v == "" {
		t.Fatal("INITLOCK_ARCHIVE_PLATFORMS is not set: run these tests with make test-release")
	}
	return strings.Split(v, ",")
}
