package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/initlock/initlock/hack/release/archive"
	"github.com/initlock/initlock/hack/release/oci"
)

// Images of a release.
const (
	ManagerImage = "initlock-manager"
	PluginImage  = "velero-plugin-initlock"
)

// nonroot is the user every image runs as, and the files naming it.
const nonroot = "65532:65532"

var (
	passwd = []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")
	group  = []byte("root:x:0:\nnonroot:x:65532:\n")
)

// imageSpec is an image's files and entrypoint, from the folder holding
// the binaries of its platform.
type imageSpec struct {
	name, description string
	cmds              []string
	files             func(bin string, license []byte) ([]archive.File, error)
	entrypoint        []string
}

func specs() []imageSpec {
	return []imageSpec{
		{
			name:        ManagerImage,
			description: "Heals the Cluster API control-plane init locks of a management cluster and relinks restored objects.",
			cmds:        []string{"initlock-manager"},
			entrypoint:  []string{"/initlock-manager"},
			files: func(bin string, license []byte) ([]archive.File, error) {
				b, err := os.ReadFile(filepath.Join(bin, "initlock-manager"))
				return append(base(license), archive.File{Name: "initlock-manager", Mode: 0o755, Content: b}), err
			},
		},
		{
			// Velero's plugin image convention: the binary under /plugins,
			// and an entrypoint that copies it into /target, where
			// "velero plugin add" mounts the server's plugin folder.
			name:        PluginImage,
			description: "initlock's Velero RestoreItemAction plugin: records restored objects' owners for the relinker.",
			cmds:        []string{"velero-plugin-initlock", "copy-plugins"},
			entrypoint:  []string{"/copy-plugins", "-from=/plugins", "-to=/target"},
			files: func(bin string, license []byte) ([]archive.File, error) {
				plugin, err := os.ReadFile(filepath.Join(bin, "velero-plugin-initlock"))
				if err != nil {
					return nil, err
				}
				cp, err := os.ReadFile(filepath.Join(bin, "copy-plugins"))
				return append(base(license),
					archive.File{Name: "copy-plugins", Mode: 0o755, Content: cp},
					archive.File{Name: "plugins", Mode: 0o755, Dir: true},
					archive.File{Name: "plugins/velero-plugin-initlock", Mode: 0o755, Content: plugin},
				), err
			},
		},
	}
}

// base is what every image holds besides its binaries: the users, and the
// licence.
func base(license []byte) []archive.File {
	return []archive.File{
		{Name: "LICENSE", Mode: 0o644, Content: license},
		{Name: "etc", Mode: 0o755, Dir: true},
		{Name: "etc/group", Mode: 0o644, Content: group},
		{Name: "etc/passwd", Mode: 0o644, Content: passwd},
	}
}

// images builds every image for every platform, writes each as an OCI
// layout under out/images/NAME and the list of references under
// out/images.txt, and returns the references, NAME to
// REGISTRY/NAME:VERSION@DIGEST.
func (r *release) images() (map[string]string, error) {
	license, err := os.ReadFile(filepath.Join(r.o.root, "LICENSE"))
	if err != nil {
		return nil, err
	}
	bins := map[string]string{}
	for _, p := range r.o.platforms {
		var cmds []string
		for _, s := range specs() {
			cmds = append(cmds, s.cmds...)
		}
		if bins[p], err = r.build(p, cmds...); err != nil {
			return nil, err
		}
	}
	refs := map[string]string{}
	var list strings.Builder
	for _, s := range specs() {
		labels := map[string]string{
			"org.opencontainers.image.title":       s.name,
			"org.opencontainers.image.description": s.description,
			"org.opencontainers.image.version":     r.o.version,
			"org.opencontainers.image.revision":    r.revision,
			"org.opencontainers.image.source":      "https://" + module,
			"org.opencontainers.image.licenses":    "Apache-2.0",
			"org.opencontainers.image.created":     r.epoch.Format(time.RFC3339),
		}
		var imgs []v1.Image
		for _, p := range r.o.platforms {
			files, err := s.files(bins[p], license)
			if err != nil {
				return nil, err
			}
			goos, goarch, _ := strings.Cut(p, "/")
			img, err := oci.Build(oci.Image{OS: goos, Architecture: goarch, Files: files, User: nonroot, Entrypoint: s.entrypoint, Labels: labels}, r.epoch)
			if err != nil {
				return nil, fmt.Errorf("image %s for %s: %w", s.name, p, err)
			}
			imgs = append(imgs, img)
		}
		idx, err := oci.Index(imgs, labels)
		if err != nil {
			return nil, err
		}
		digest, err := oci.WriteLayout(filepath.Join(r.o.out, "images", s.name), r.o.version, idx)
		if err != nil {
			return nil, err
		}
		refs[s.name] = fmt.Sprintf("%s/%s:%s@%s", r.o.registry, s.name, r.o.version, digest)
		fmt.Fprintf(&list, "%s\n", refs[s.name])
		fmt.Fprintf(os.Stderr, "release: image %s\n", refs[s.name])
	}
	return refs, os.WriteFile(filepath.Join(r.o.out, "images.txt"), []byte(list.String()), 0o644)
}
