package oci

import (
	"bytes"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/initlock/initlock/hack/release/archive"
)

// Image is one platform's image: its files and how it runs.
type Image struct {
	// OS and Architecture of the platform, e.g. linux and arm64.
	OS, Architecture string
	// Files of the single layer, in order.
	Files []archive.File
	// User is "uid:gid".
	User string
	// Entrypoint is the command the container runs.
	Entrypoint []string
	// Env is KEY=value lines.
	Env []string
	// Labels are the image's OCI annotations, also set as config labels.
	Labels map[string]string
}

// Build returns the OCI image of img, every time in it set to epoch.
func Build(img Image, epoch time.Time) (v1.Image, error) {
	var layerTar bytes.Buffer
	if err := archive.WriteTar(&layerTar, img.Files, epoch); err != nil {
		return nil, err
	}
	b := layerTar.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("making the layer: %w", err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	out, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "initlock hack/release", Comment: "initlock " + img.Entrypoint[0]},
	})
	if err != nil {
		return nil, err
	}
	cf, err := out.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = img.OS, img.Architecture
	cf.Created = v1.Time{Time: epoch}
	cf.Config.User = img.User
	cf.Config.Entrypoint = img.Entrypoint
	cf.Config.Env = img.Env
	cf.Config.Labels = img.Labels
	if out, err = mutate.ConfigFile(out, cf); err != nil {
		return nil, err
	}
	out = mutate.Annotations(out, img.Labels).(v1.Image)
	return mutate.CreatedAt(out, v1.Time{Time: epoch})
}

// Index returns an image index of imgs, one per platform, in order, with
// annotations.
func Index(imgs []v1.Image, annotations map[string]string) (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	for _, img := range imgs {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: cf.OS, Architecture: cf.Architecture},
		}})
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	return mutate.Annotations(idx, annotations).(v1.ImageIndex), nil
}

// WriteLayout writes idx as an OCI image layout in dir (which must not
// exist or be empty), the index itself the only entry of index.json, named
// ref (org.opencontainers.image.ref.name, the tag), and returns its digest.
func WriteLayout(dir, ref string, idx v1.ImageIndex) (v1.Hash, error) {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("writing an OCI layout in %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		return v1.Hash{}, fmt.Errorf("writing an OCI layout in %s: %w", dir, err)
	}
	return idx.Digest()
}
