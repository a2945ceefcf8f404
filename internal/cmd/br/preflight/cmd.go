// Package preflight is the `fedbr br preflight` command: it checks, with a step's own identity
// and from where a step runs, what every step needs of AWS: a region, credentials (for IRSA,
// the web identity exchange itself), EC2's reads, and the backups' storage. The agent chart
// runs it as its helm test, in each namespace of stepServiceAccount.namespaces.
package preflight

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/checklist"
	"github.com/fedbr/fedbr/internal/cmd/br/session"
)

// ErrFailed is the command's error when a check failed.
var ErrFailed = errors.New("preflight failed")

// probePrefix is where the storage check writes its probe object, under the storage's prefix.
const probePrefix = ".fedbr-preflight/"

type options struct {
	session session.Flags
	timeout time.Duration
}

// NewCmd returns `br preflight`.
func NewCmd() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "preflight [--storage URL] [--region REGION]",
		Short: "Check a step's AWS access from where steps run: region, credentials, EC2 reads, storage",
		Long: `Check, with this process's AWS identity (run it as the steps' service account: the agent
chart's helm test does, in each namespace of stepServiceAccount.namespaces), one line per check:

  region      --region, else AWS_REGION or AWS_DEFAULT_REGION, names one
  identity    credentials are retrieved as a step's calls retrieve them (for IRSA: the web
              identity token exchanged at STS), and where they came from
  ec2         ec2:DescribeVolumes and ec2:DescribeSnapshots (owner self) answer in the region
  storage     with --storage: an object is written under PREFIX/.fedbr-preflight/, read back
              and deleted, as a backup writes and a clean deletes its metadata

It exits non-zero when a check fails; checks after a failed region or identity are skipped.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SilenceUsage = true
			return o.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.session.Storage, "storage", "s", "", "the backups' storage prefix to check: s3://BUCKET/PREFIX[?region=REGION] (default: no storage check)")
	f.StringVar(&o.session.Region, "region", "", "AWS region of EC2, EBS and (unless --storage names one) S3 (default: from the AWS environment)")
	f.StringVar(&o.session.Endpoint, "aws-endpoint", "", "endpoint override for every AWS service, e.g. the lab's AWS double")
	f.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long")
	return cmd
}

type check struct {
	name   string
	detail string
	err    error
}

func (o *options) run(ctx context.Context, out io.Writer) error {
	validate := o.session.ValidateEndpoint
	if o.session.Storage != "" {
		validate = o.session.Validate
	}
	if err := validate(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	l := checklist.List{WhatWidth: 9}
	for _, c := range o.checks(ctx) {
		l.Checks = append(l.Checks, checklist.Check{What: c.name, Detail: c.detail, Err: c.err})
	}
	if err := l.Print(out); err != nil {
		return err
	}
	if failed := l.Failed(); failed > 0 {
		return fmt.Errorf("%w: %d of %d checks", ErrFailed, failed, len(l.Checks))
	}
	return nil
}

func (o *options) checks(ctx context.Context) []check {
	var out []check
	p, err := o.session.Provider(ctx)
	if err != nil {
		return append(out, check{name: "region", err: err})
	}
	region := p.Region()
	if region == "" {
		return append(out, check{name: "region", err: errors.New("no region: give --region, or set AWS_REGION (the agent passes its --region to the steps)")})
	}
	out = append(out, check{name: "region", detail: region})
	who, err := p.Identity(ctx)
	out = append(out, check{name: "identity", detail: who, err: err})
	if err != nil {
		return out
	}
	out = append(out, check{name: "ec2", detail: "DescribeVolumes and DescribeSnapshots (owner self) answer", err: p.CheckReadAccess(ctx)})
	if o.session.Storage != "" {
		detail, err := o.storage(ctx)
		out = append(out, check{name: "storage", detail: detail, err: err})
	}
	return out
}

// storage writes, reads back and deletes a probe object under the storage's prefix.
func (o *options) storage(ctx context.Context) (string, error) {
	store, err := o.session.Store(ctx)
	if err != nil {
		return "", fmt.Errorf("%s: %w", o.session.Storage, err)
	}
	b := store.Blob()
	host, _ := os.Hostname()
	key := probePrefix + host + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	body := []byte("fedbr preflight " + key + "\n")
	if err := b.Put(ctx, key, body); err != nil {
		return "", fmt.Errorf("%s: write %s: %w", o.session.Storage, key, err)
	}
	got, err := b.Get(ctx, key, int64(len(body)))
	if err == nil && string(got) != string(body) {
		err = fmt.Errorf("read back %d bytes that differ from the %d written", len(got), len(body))
	}
	delErr := b.Delete(ctx, key)
	if err != nil {
		return "", fmt.Errorf("%s: read %s: %w", o.session.Storage, key, errors.Join(err, delErr))
	}
	if delErr != nil {
		return "", fmt.Errorf("%s: delete %s: %w", o.session.Storage, key, delErr)
	}
	return fmt.Sprintf("%s: %s written, read back and deleted", o.session.Storage, key), nil
}
