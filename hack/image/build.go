package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// BuildBinaries builds ./cmd/fedbr of the checkout at repo for every platform: static
// (CGO_ENABLED=0), -trimpath, linked with ldflags, into dir/<os>-<arch>/fedbr.
func BuildBinaries(ctx context.Context, repo, dir, ldflags string, platforms []v1.Platform) ([]Binary, error) {
	var bins []Binary
	for _, p := range platforms {
		out := filepath.Join(dir, platformName(p), "fedbr")
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, "./cmd/fedbr") //nolint:gosec // G204: go build of fedbr, with the version flags and output path this tool computed
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
		if p.Architecture == "arm" && p.Variant != "" {
			cmd.Env = append(cmd.Env, "GOARM="+p.Variant[1:])
		}
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build ./cmd/fedbr for %s: %w: %s", p, err, b)
		}
		bins = append(bins, Binary{Platform: p, Path: out})
	}
	return bins, nil
}
