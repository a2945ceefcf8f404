// Command image builds fedbr's container image without a Docker daemon, from scratch (no base
// image to pull), and pushes it when asked. `make image` and `make image-push` run it.
//
//	image build --repo DIR --out DIR --tag REF --version V --revision R --source URL [flags]
//	image push --layout DIR --ref REF
//	image verify --layout DIR --tag REF --version V
//
// build compiles ./cmd/fedbr for every --platforms entry and writes an OCI image layout
// (OUT/oci) and a docker-loadable tarball per platform (OUT/fedbr-<os>-<arch>.tar). Each image
// is two layers on an empty base: CA certificates, passwd and group with the nonroot user
// (65532), its home and a sticky /tmp; then the binary at /usr/local/bin/fedbr, the
// entrypoint. push uploads the layout's multi-platform index to a registry. verify checks that a
// layout is fedbr V under REF: its name, every image's version label, and what its binary for
// this machine says it is (make release).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		_, _ = fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: image build|push|verify [flags]")
	}
	switch args[0] {
	case "build":
		return build(ctx, args[1:], out)
	case "push":
		return push(ctx, args[1:], out)
	case "verify":
		return verify(ctx, args[1:], out)
	default:
		return fmt.Errorf("unknown command %q: want build, push or verify", args[0])
	}
}

func build(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	var (
		repo      = fs.String("repo", ".", "fedbr checkout to build ./cmd/fedbr from")
		dir       = fs.String("out", "", "output folder (replaced): oci/ and fedbr-<os>-<arch>.tar")
		tag       = fs.String("tag", "", "the image's name in the tarballs and the layout, REPOSITORY:TAG")
		platforms = fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated OS/ARCH[/VARIANT] to build")
		ldflags   = fs.String("ldflags", "", "go build -ldflags (the version stamp)")
		created   = fs.Int64("created", 0, "creation time, Unix seconds (SOURCE_DATE_EPOCH): same inputs, same digests")
		caBundle  = fs.String("ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "CA certificates to copy into the image")
		s         Spec
	)
	fs.StringVar(&s.Version, "version", "", "fedbr version, for the label "+LabelVersion)
	fs.StringVar(&s.Revision, "revision", "", "commit, for the label "+LabelRevision)
	fs.StringVar(&s.Source, "source", "", "repository URL, for the label "+LabelSource)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *tag == "" || s.Version == "" || s.Revision == "" || s.Source == "" {
		return errors.New("build needs --out, --tag, --version, --revision and --source")
	}
	ref, err := name.NewTag(*tag)
	if err != nil {
		return err
	}
	var plats []v1.Platform
	for _, ps := range strings.Split(*platforms, ",") {
		p, err := v1.ParsePlatform(strings.TrimSpace(ps))
		if err != nil {
			return err
		}
		plats = append(plats, *p)
	}
	s.Created, s.CABundle = time.Unix(*created, 0).UTC(), *caBundle
	tmp, err := os.MkdirTemp("", "fedbr-image-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	bins, err := BuildBinaries(ctx, *repo, tmp, *ldflags, plats)
	if err != nil {
		return err
	}
	idx, err := Assemble(s, bins)
	if err != nil {
		return err
	}
	o, err := Write(*dir, ref, idx)
	if err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	return report(out, ref, d, bins, o)
}

// report prints the index, and per platform its image's digest and size, the binary's size
// and the tarball.
func report(w io.Writer, ref name.Tag, digest v1.Hash, bins []Binary, o Output) error {
	if _, err := fmt.Fprintf(w, "image %s, index %s\nOCI layout: %s\n", ref, digest, o.Layout); err != nil {
		return err
	}
	for i, img := range o.Images {
		st, err := os.Stat(bins[i].Path)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "  %-12s %s  image %s (binary %s)  docker load -i %s\n",
			img.Platform, img.Digest, mib(img.Size), mib(st.Size()), img.Tarball); err != nil {
			return err
		}
	}
	return nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func push(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	dir := fs.String("layout", "", "OCI layout written by build (OUT/oci)")
	to := fs.String("ref", "", "where to push, REGISTRY/REPOSITORY:TAG")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *to == "" {
		return errors.New("push needs --layout and --ref")
	}
	ref, err := name.ParseReference(*to)
	if err != nil {
		return err
	}
	d, err := Push(ctx, *dir, ref)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "pushed %s@%s\n", ref.Context(), d)
	return err
}

func verify(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	dir := fs.String("layout", "", "OCI layout written by build (OUT/oci)")
	tag := fs.String("tag", "", "the name the layout's index must have, REPOSITORY:TAG")
	version := fs.String("version", "", "the version every image and its binary must say")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *tag == "" || *version == "" {
		return errors.New("verify needs --layout, --tag and --version")
	}
	if err := Verify(ctx, *dir, *tag, *version); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "image %s: every platform is fedbr %s\n", *tag, *version)
	return err
}
