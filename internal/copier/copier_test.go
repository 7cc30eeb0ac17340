package copier_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/initlock/initlock/internal/copier"
)

func TestCopy(t *testing.T) {
	from, to := t.TempDir(), t.TempDir()
	write := func(dir, name, content string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(from, "plugin-b", "binary b", 0o755)
	write(from, "plugin-a", "binary a", 0o755)
	write(to, "plugin-a", "old a", 0o755)
	write(to, "other-plugin", "kept", 0o755)
	if err := os.Mkdir(filepath.Join(from, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}

	got, err := copier.Copy(from, to)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"plugin-a", "plugin-b"}) {
		t.Fatalf("copied %v", got)
	}
	entries, err := os.ReadDir(to)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"other-plugin", "plugin-a", "plugin-b"}) {
		t.Fatalf("target holds %v: no temporary file may be left, other files are kept", names)
	}
	for name, want := range map[string]string{"plugin-a": "binary a", "plugin-b": "binary b", "other-plugin": "kept"} {
		b, err := os.ReadFile(filepath.Join(to, name))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q (%v), want %q", name, b, err, want)
		}
		if fi, err := os.Stat(filepath.Join(to, name)); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s mode = %v (%v), want 0755", name, fi.Mode(), err)
		}
	}
}

func TestCopyErrors(t *testing.T) {
	empty, to := t.TempDir(), t.TempDir()
	if _, err := copier.Copy(empty, to); err == nil {
		t.Error("copying an empty folder succeeded")
	}
	if _, err := copier.Copy(filepath.Join(empty, "missing"), to); err == nil {
		t.Error("copying a missing folder succeeded")
	}
	from := t.TempDir()
	if err := os.WriteFile(filepath.Join(from, "p"), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := copier.Copy(from, filepath.Join(to, "missing")); err == nil {
		t.Error("copying into a missing folder succeeded")
	}
}
