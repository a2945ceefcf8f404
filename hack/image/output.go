package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// RefNameAnnotation names the index in the OCI layout (image-spec's annotation for it).
const RefNameAnnotation = "org.opencontainers.image.ref.name"

// Output is what Write produced.
type Output struct {
	// Layout is the OCI image layout: its index.json lists one image index, named by
	// RefNameAnnotation, that lists the image of every platform.
	Layout string
	// Images are the platforms' images, in the index's order.
	Images []PlatformImage
}

// PlatformImage is one platform's image and its docker-loadable tarball.
type PlatformImage struct {
	Platform v1.Platform
	Digest   v1.Hash
	// Size is the registry size: manifest, config and compressed layers.
	Size    int64
	Tarball string
}

// Write writes idx into dir, which it replaces: an OCI image layout in dir/oci and, per
// platform, dir/fedbr-<os>-<arch>.tar, which `docker load` reads as ref.
func Write(dir string, ref name.Tag, idx v1.ImageIndex) (Output, error) {
	if err := os.RemoveAll(dir); err != nil {
		return Output{}, err
	}
	out := Output{Layout: filepath.Join(dir, "oci")}
	p, err := layout.Write(out.Layout, empty.Index)
	if err != nil {
		return Output{}, err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{RefNameAnnotation: ref.String()})); err != nil {
		return Output{}, fmt.Errorf("OCI layout: %w", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return Output{}, err
	}
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return Output{}, err
		}
		pi := PlatformImage{Platform: *d.Platform, Digest: d.Digest,
			Tarball: filepath.Join(dir, "fedbr-"+platformName(*d.Platform)+".tar")}
		if pi.Size, err = registrySize(img); err != nil {
			return Output{}, err
		}
		if err := tarball.WriteToFile(pi.Tarball, ref, img); err != nil {
			return Output{}, fmt.Errorf("tarball for %s: %w", d.Platform, err)
		}
		out.Images = append(out.Images, pi)
	}
	return out, nil
}

// platformName is os-arch[-variant], for file names.
func platformName(p v1.Platform) string {
	s := p.OS + "-" + p.Architecture
	if p.Variant != "" {
		s += "-" + p.Variant
	}
	return s
}

// registrySize is what a registry stores for img: its manifest, config and compressed layers.
func registrySize(img v1.Image) (int64, error) {
	m, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	mf, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	size := int64(len(m)) + mf.Config.Size
	for _, l := range mf.Layers {
		size += l.Size
	}
	return size, nil
}
