package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image holds, and where.
const (
	// Entrypoint is the fedbr binary's path in the image.
	Entrypoint = "/usr/local/bin/fedbr"
	// CABundle is where the CA certificates are: the first place Go looks on Linux.
	CABundle = "/etc/ssl/certs/ca-certificates.crt"
	// User is the image's user: nonroot, uid and gid 65532, as in distroless images.
	User = "65532:65532"

	nonrootID = 65532
	nonroot   = "nonroot"
)

// OCI label keys (image-spec annotations) the image's config carries.
const (
	LabelSource   = "org.opencontainers.image.source"
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
)

// Spec is what the image is built from besides the binaries.
type Spec struct {
	// Version and Revision label the image (fedbr's version and commit); Source is the
	// repository's URL.
	Version, Revision, Source string
	// Created is the image's creation time and every file's modification time: the same
	// inputs give the same digests.
	Created time.Time
	// CABundle is the host's CA bundle, copied to CABundle in the image.
	CABundle string
}

// Binary is a fedbr binary built for one platform.
type Binary struct {
	Platform v1.Platform
	Path     string
}

// Assemble builds one image per binary, on an empty base, and the index that lists them.
func Assemble(s Spec, bins []Binary) (v1.ImageIndex, error) {
	base, err := baseLayer(s)
	if err != nil {
		return nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, b := range bins {
		img, err := platformImage(s, base, b)
		if err != nil {
			return nil, fmt.Errorf("image for %s: %w", b.Platform, err)
		}
		p := b.Platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return idx, nil
}

// platformImage is the base layer, the layer with b's binary and the config for b's platform.
func platformImage(s Spec, base v1.Layer, b Binary) (v1.Image, error) {
	bin, err := os.ReadFile(b.Path)
	if err != nil {
		return nil, err
	}
	app, err := layer(s.Created, []entry{dir("usr", 0o755), dir("usr/local", 0o755), dir("usr/local/bin", 0o755),
		file(Entrypoint[1:], 0o755, bin)})
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: b.Platform.Architecture,
		OS:           b.Platform.OS,
		Variant:      b.Platform.Variant,
		Created:      v1.Time{Time: s.Created},
		Config: v1.Config{
			User:       User,
			Entrypoint: []string{Entrypoint},
			Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
			WorkingDir: "/home/" + nonroot,
			Labels:     map[string]string{LabelSource: s.Source, LabelVersion: s.Version, LabelRevision: s.Revision},
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: s.Created}
	return mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: created, CreatedBy: "make image: CA certificates, passwd, group, /tmp", Comment: "base"}},
		mutate.Addendum{Layer: app, History: v1.History{Created: created, CreatedBy: "make image: " + Entrypoint, Comment: "fedbr " + s.Version}})
}

// baseLayer is what a program expects of a system: CA certificates, a nonroot user and its
// home, and a /tmp anyone can write to.
func baseLayer(s Spec) (v1.Layer, error) {
	ca, err := os.ReadFile(s.CABundle)
	if err != nil {
		return nil, fmt.Errorf("CA bundle: %w", err)
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%[1]s:x:%[2]d:%[2]d:%[1]s:/home/%[1]s:/sbin/nologin\n", nonroot, nonrootID)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", nonroot, nonrootID)
	home := dir("home/"+nonroot, 0o700)
	home.uid = nonrootID
	return layer(s.Created, []entry{
		dir("etc", 0o755), file("etc/passwd", 0o644, []byte(passwd)), file("etc/group", 0o644, []byte(group)),
		dir("etc/ssl", 0o755), dir("etc/ssl/certs", 0o755), file(CABundle[1:], 0o644, ca),
		dir("home", 0o755), home,
		dir("root", 0o700),
		dir("tmp", 0o1777),
	})
}

// entry is one file or directory of a layer.
type entry struct {
	name string
	mode int64
	uid  int
	data []byte
	dir  bool
}

func dir(name string, mode int64) entry { return entry{name: name, mode: mode, dir: true} }

func file(name string, mode int64, data []byte) entry {
	return entry{name: name, mode: mode, data: data}
}

// layer is a gzipped OCI layer of entries, every one modified at mtime. It is compressed at
// gzip's default level (go-containerregistry's own is its fastest: about 8 % more to pull for fedbr), once:
// the digest, the layout and the tarballs all read the kept result.
func layer(mtime time.Time, entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if path.Clean(e.name) != e.name || path.IsAbs(e.name) {
			return nil, fmt.Errorf("layer entry %q: want a clean relative path", e.name)
		}
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: mtime}
		if e.dir {
			h.Typeflag, h.Name = tar.TypeDir, e.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.DefaultCompression), tarball.WithCompressedCaching)
}
