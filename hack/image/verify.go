package main

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Verify checks that the OCI layout at dir (OUT/oci of build) is the image of fedbr version:
// its index is named tag, every platform's image carries version in its version label, and the
// binary of this machine's platform, read out of the image and run, says `fedbr version` (it
// is skipped when the image has no such platform). `make release` runs it, so the tag the
// charts' appVersion names, the labels and what the binary reports cannot drift apart. It
// returns every disagreement at once.
func Verify(ctx context.Context, dir, tag, version string) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		return err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return err
	}
	tm, err := top.IndexManifest()
	if err != nil {
		return err
	}
	var bad []string
	if len(tm.Manifests) != 1 || tm.Manifests[0].Annotations[RefNameAnnotation] != tag {
		bad = append(bad, fmt.Sprintf("the layout's index is not named %s alone", tag))
	}
	idx, err := layoutIndex(dir)
	if err != nil {
		return err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	ran := false
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			return err
		}
		plat := d.Platform.String()
		if got := cfg.Config.Labels[LabelVersion]; got != version {
			bad = append(bad, fmt.Sprintf("%s: label %s is %q", plat, LabelVersion, got))
		}
		if d.Platform.OS != runtime.GOOS || d.Platform.Architecture != runtime.GOARCH {
			continue
		}
		out, err := runVersion(ctx, img)
		if err != nil {
			return fmt.Errorf("%s: fedbr version: %w", plat, err)
		}
		ran = true
		if !strings.HasPrefix(out, "fedbr "+version+" ") {
			bad = append(bad, fmt.Sprintf("%s: fedbr version prints %q", plat, strings.TrimSpace(out)))
		}
	}
	if !ran {
		bad = append(bad, fmt.Sprintf("no image for %s/%s to run fedbr version from", runtime.GOOS, runtime.GOARCH))
	}
	if len(bad) > 0 {
		return fmt.Errorf("image %s is not fedbr %s: %s", tag, version, strings.Join(bad, "; "))
	}
	return nil
}

// runVersion runs `fedbr version` with the binary read out of img's filesystem.
func runVersion(ctx context.Context, img v1.Image) (string, error) {
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", errors.New("no usr/local/bin/fedbr in the image")
		}
		if err != nil {
			return "", err
		}
		if strings.TrimPrefix(h.Name, "/") != "usr/local/bin/fedbr" {
			continue
		}
		dir, err := os.MkdirTemp("", "fedbr-image-verify-")
		if err != nil {
			return "", err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		bin := filepath.Join(dir, "fedbr")
		f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755) //nolint:gosec // G302: a binary, in a folder of our own, to run it
		if err != nil {
			return "", err
		}
		_, err = io.Copy(f, tr) //nolint:gosec // our own image's binary, written to run it
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", err
		}
		out, err := exec.CommandContext(ctx, bin, "version").CombinedOutput() //nolint:gosec // G204: the image's own binary, which verify is to run
		if err != nil {
			return "", fmt.Errorf("%w: %s", err, out)
		}
		return string(out), nil
	}
}
