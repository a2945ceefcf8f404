package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	testVersion  = "v9.9.9-imagetest"
	testRevision = "0123456789abcdef"
	testSource   = "https://github.com/fedbr/fedbr"
	testTag      = "example.com/fedbr/fedbr:" + testVersion
	testCA       = "-----BEGIN CERTIFICATE-----\ntest bundle\n-----END CERTIFICATE-----\n"
)

// fixture is the image TestMain builds once: the real fedbr binary for this machine's
// architecture, and a stand-in file for a second platform (the index and the tarballs are
// per platform; only the first is run).
var fixture struct {
	dir  string
	spec Spec
	bins []Binary
	idx  v1.ImageIndex
	out  Output
}

func TestMain(m *testing.M) {
	err := setup()
	code := 1
	if err == nil {
		code = m.Run()
	} else {
		_, _ = fmt.Fprintln(os.Stderr, "build the image:", err)
	}
	if fixture.dir != "" {
		_ = os.RemoveAll(fixture.dir)
	}
	os.Exit(code)
}

func setup() error {
	dir, err := os.MkdirTemp("", "fedbr-image-test-")
	if err != nil {
		return err
	}
	fixture.dir = dir
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte(testCA), 0o644); err != nil {
		return err
	}
	fixture.spec = Spec{Version: testVersion, Revision: testRevision, Source: testSource,
		Created: time.Unix(1_700_000_000, 0).UTC(), CABundle: ca}
	ldflags := "-X github.com/fedbr/fedbr/internal/version.version=" + testVersion +
		" -X github.com/fedbr/fedbr/internal/version.commit=" + testRevision
	host := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	bins, err := BuildBinaries(context.Background(), filepath.Join("..", ".."), filepath.Join(dir, "bin"), ldflags, []v1.Platform{host})
	if err != nil {
		return err
	}
	other := v1.Platform{OS: "linux", Architecture: "arm64"}
	if host.Architecture == "arm64" {
		other.Architecture = "amd64"
	}
	stand := filepath.Join(dir, "bin", "other")
	if err := os.WriteFile(stand, []byte("stand-in for another platform's binary"), 0o755); err != nil {
		return err
	}
	fixture.bins = append(bins, Binary{Platform: other, Path: stand})
	if fixture.idx, err = Assemble(fixture.spec, fixture.bins); err != nil {
		return err
	}
	tag, err := name.NewTag(testTag)
	if err != nil {
		return err
	}
	fixture.out, err = Write(filepath.Join(dir, "image"), tag, fixture.idx)
	return err
}

// layoutImages reads the images back from the OCI layout, by platform, in the index's order.
func layoutImages(t *testing.T) ([]v1.Platform, []v1.Image) {
	t.Helper()
	idx, err := layoutIndex(fixture.out.Layout)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var plats []v1.Platform
	var imgs []v1.Image
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		plats, imgs = append(plats, *d.Platform), append(imgs, img)
	}
	return plats, imgs
}

func TestLayoutListsEveryPlatformUnderItsName(t *testing.T) {
	p, err := layout.FromPath(fixture.out.Layout)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Annotations[RefNameAnnotation] != testTag {
		t.Fatalf("layout index.json lists %+v, want one index named %s", m.Manifests, testTag)
	}
	plats, _ := layoutImages(t)
	if len(plats) != 2 || !plats[0].Equals(fixture.bins[0].Platform) || !plats[1].Equals(fixture.bins[1].Platform) {
		t.Errorf("index platforms %v, want %v and %v", plats, fixture.bins[0].Platform, fixture.bins[1].Platform)
	}
}

func TestConfig(t *testing.T) {
	plats, imgs := layoutImages(t)
	for i, img := range imgs {
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/fedbr"}) || len(c.Cmd) != 0 {
			t.Errorf("%s: user %q, entrypoint %q, cmd %q; want 65532:65532, [/usr/local/bin/fedbr], none", plats[i], c.User, c.Entrypoint, c.Cmd)
		}
		want := map[string]string{
			"org.opencontainers.image.source":   testSource,
			"org.opencontainers.image.version":  testVersion,
			"org.opencontainers.image.revision": testRevision,
		}
		if fmt.Sprint(c.Labels) != fmt.Sprint(want) {
			t.Errorf("%s: labels %v, want %v", plats[i], c.Labels, want)
		}
		if cf.OS != plats[i].OS || cf.Architecture != plats[i].Architecture || !cf.Created.Equal(fixture.spec.Created) {
			t.Errorf("%s: config says %s/%s created %s", plats[i], cf.OS, cf.Architecture, cf.Created.Time)
		}
		mt, err := img.MediaType()
		if err != nil || mt != types.OCIManifestSchema1 {
			t.Errorf("%s: manifest media type %s (%v), want OCI", plats[i], mt, err)
		}
		if layers, err := img.Layers(); err != nil || len(layers) != 2 {
			t.Errorf("%s: %d layers (%v), want 2: base files, binary", plats[i], len(layers), err)
		}
	}
}

// fsEntry is one entry of an image's flattened filesystem.
type fsEntry struct {
	hdr  *tar.Header
	data []byte
}

// files flattens img's layers into its filesystem, by path without the leading slash.
func files(t *testing.T, img v1.Image) map[string]fsEntry {
	t.Helper()
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	out := map[string]fsEntry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(h.Name, "/")] = fsEntry{h, b}
	}
}

func TestFilesystem(t *testing.T) {
	_, imgs := layoutImages(t)
	fsys := files(t, imgs[0])
	bin, err := os.ReadFile(fixture.bins[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path     string
		mode     fs.FileMode
		uid      int
		contains string
		equals   []byte
	}{
		{path: "usr/local/bin/fedbr", mode: 0o755, equals: bin},
		{path: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, equals: []byte(testCA)},
		{path: "etc/passwd", mode: 0o644, contains: "\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"},
		{path: "etc/group", mode: 0o644, contains: "\nnonroot:x:65532:\n"},
		{path: "tmp", mode: fs.ModeDir | fs.ModeSticky | 0o777},
		{path: "home/nonroot", mode: fs.ModeDir | 0o700, uid: 65532},
	} {
		f, ok := fsys[c.path]
		if !ok {
			t.Errorf("/%s missing from the image", c.path)
			continue
		}
		if got := f.hdr.FileInfo().Mode(); got != c.mode || f.hdr.Uid != c.uid || f.hdr.Gid != c.uid {
			t.Errorf("/%s: mode %s, owner %d:%d; want %s, %d:%d", c.path, got, f.hdr.Uid, f.hdr.Gid, c.mode, c.uid, c.uid)
		}
		if c.equals != nil && !bytes.Equal(f.data, c.equals) {
			t.Errorf("/%s: %d bytes, not the %d expected", c.path, len(f.data), len(c.equals))
		}
		if !strings.Contains(string(f.data), c.contains) {
			t.Errorf("/%s: %q lacks %q", c.path, f.data, c.contains)
		}
	}
	if !statically(t, fixture.bins[0].Path) {
		t.Errorf("the image's binary asks for a dynamic loader: it must be static (CGO_ENABLED=0) for an empty base")
	}
}

// statically says whether the ELF binary at path needs no dynamic loader.
func statically(t *testing.T, path string) bool {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

// TestBinaryFromTheImageRuns runs `fedbr version` with the binary read out of the image's layer.
func TestBinaryFromTheImageRuns(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the image's binary is for Linux")
	}
	_, imgs := layoutImages(t)
	f := files(t, imgs[0])["usr/local/bin/fedbr"]
	bin := filepath.Join(t.TempDir(), "fedbr")
	if err := os.WriteFile(bin, f.data, f.hdr.FileInfo().Mode().Perm()); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("fedbr version: %v: %s", err, out)
	}
	want := fmt.Sprintf("fedbr %s (commit %s,", testVersion, testRevision)
	if !strings.HasPrefix(string(out), want) || !strings.Contains(string(out), "linux/"+runtime.GOARCH) {
		t.Errorf("fedbr version printed %q, want %q… linux/%s", out, want, runtime.GOARCH)
	}
}

// TestVerify: the fixture is fedbr testVersion under testTag; another version or tag is refused
// naming each disagreement (the labels, and what the binary says).
func TestVerify(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the image's binary is for Linux")
	}
	ctx := context.Background()
	if err := Verify(ctx, fixture.out.Layout, testTag, testVersion); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	err := Verify(ctx, fixture.out.Layout, "example.com/fedbr/fedbr:v1.0.0", "v1.0.0")
	for _, want := range []string{
		"image example.com/fedbr/fedbr:v1.0.0 is not fedbr v1.0.0: ",
		"the layout's index is not named example.com/fedbr/fedbr:v1.0.0 alone",
		"linux/" + runtime.GOARCH + `: label org.opencontainers.image.version is "` + testVersion + `"`,
		"linux/" + runtime.GOARCH + `: fedbr version prints "fedbr ` + testVersion + " (commit " + testRevision,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Verify of another version: %v; want it to say %q", err, want)
		}
	}
}

// TestDockerTarballs: each platform's tarball holds that platform's image under the tag, as
// docker load reads it.
func TestDockerTarballs(t *testing.T) {
	plats, imgs := layoutImages(t)
	tag, err := name.NewTag(testTag)
	if err != nil {
		t.Fatal(err)
	}
	for i, pi := range fixture.out.Images {
		if filepath.Base(pi.Tarball) != "fedbr-linux-"+plats[i].Architecture+".tar" {
			t.Errorf("%s: tarball %s", plats[i], pi.Tarball)
		}
		got, err := tarball.ImageFromPath(pi.Tarball, &tag)
		if err != nil {
			t.Fatalf("%s: %v", plats[i], err)
		}
		// The config names the layers by content (rootfs.diff_ids): the same config is the same image.
		a, errA := got.ConfigName()
		b, errB := imgs[i].ConfigName()
		if errA != nil || errB != nil || a != b {
			t.Errorf("%s: tarball's config %s (%v), layout's %s (%v)", plats[i], a, errA, b, errB)
		}
	}
}

// TestSameInputsSameDigest: two builds from the same binary and spec are the same image (on
// the small stand-in binary: how big the binary is changes nothing, and gzip takes its time).
func TestSameInputsSameDigest(t *testing.T) {
	var digests []v1.Hash
	for range 2 {
		idx, err := Assemble(fixture.spec, fixture.bins[1:])
		if err != nil {
			t.Fatal(err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d)
	}
	if digests[0] != digests[1] {
		t.Errorf("index digests %s and %s differ", digests[0], digests[1])
	}
}

func TestPushToRegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref, err := name.ParseReference(strings.TrimPrefix(srv.URL, "http://") + "/fedbr/fedbr:" + testVersion)
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := Push(t.Context(), fixture.out.Layout, ref)
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Index(ref, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	d, err := got.Digest()
	want, _ := fixture.idx.Digest()
	if err != nil || d != want || pushed != want {
		t.Errorf("registry has %s (%v), push said %s, built %s", d, err, pushed, want)
	}
}
