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
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	"github.com/fedbr/fedbr/internal/checklist"
	"github.com/fedbr/fedbr/internal/cmd/br/session"
	"github.com/fedbr/fedbr/internal/podenv"
)

// ErrFailed is the command's error when a check failed.
var ErrFailed = errors.New("preflight failed")

// probePrefix is where the storage check writes its probe object, under the storage's prefix.
const probePrefix = ".fedbr-preflight/"

type options struct {
	session      session.Flags
	timeout      time.Duration
	aws          bool
	tidbClusters []string
	kubeconfig   string
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
  tidbcluster with --tidbcluster NAMESPACE/NAME (repeatable; needs get on tidbclusters: the agent
              chart runs it as the agent's service account): the TidbCluster exists, and the
              TiKV release it runs (its TiKV status's image, else spec.tikv.image, .version or
              spec.version) serves PrepareSnapshotBackup, the lease every backup's pause holds:
              v6.5.8 and later 6.5, v7.5.1 and later 7.5, v8.0.0 and later; a release the
              TidbCluster does not name (latest, a digest) is not judged

It exits non-zero when a check fails; checks after a failed region or identity are skipped.
--aws=false leaves out region, identity, ec2 and storage.`,
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
	f.BoolVar(&o.aws, "aws", true, "check region, identity, EC2 and (with --storage) the storage")
	f.StringArrayVar(&o.tidbClusters, "tidbcluster", nil, "NAMESPACE/NAME of a TidbCluster to check (repeatable): found, and its TiKV release serves the snapshot lease")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "with --tidbcluster: the kubeconfig to read it with (default: the pod's service account)")
	return cmd
}

type check struct {
	name   string
	detail string
	err    error
}

func (o *options) run(ctx context.Context, out io.Writer) error {
	for _, ref := range o.tidbClusters {
		if ns, name, ok := strings.Cut(ref, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("--tidbcluster %q: want NAMESPACE/NAME", ref)
		}
	}
	if !o.aws && len(o.tidbClusters) == 0 {
		return errors.New("--aws=false and no --tidbcluster: nothing to check")
	}
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
	if o.aws {
		out = o.awsChecks(ctx)
	}
	return append(out, o.tidbClusterChecks(ctx)...)
}

// tidbClusterChecks reads each --tidbcluster and judges the TiKV release it runs.
func (o *options) tidbClusterChecks(ctx context.Context) []check {
	if len(o.tidbClusters) == 0 {
		return nil
	}
	var out []check
	var (
		cfg *rest.Config
		err error
	)
	if o.kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	} else {
		cfg, err = podenv.RESTConfig()
	}
	var dc dynamic.Interface
	if err == nil {
		dc, err = dynamic.NewForConfig(cfg)
	}
	for _, ref := range o.tidbClusters {
		ns, name, _ := strings.Cut(ref, "/")
		c := check{name: "tidbcluster"}
		if err != nil {
			c.err = fmt.Errorf("%s: %w", ref, err)
			out = append(out, c)
			continue
		}
		u, gerr := dc.Resource(pcv1alpha1.GroupVersion.WithResource("tidbclusters")).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if gerr != nil {
			c.err = fmt.Errorf("%s: %w", ref, gerr)
			out = append(out, c)
			continue
		}
		release := tidbcluster.TiKVRelease(u.Object)
		replicas, _, _ := unstructured.NestedInt64(u.Object, "spec", "tikv", "replicas")
		switch ok, judged := tidbcluster.ServesLease(release); {
		case !judged:
			c.detail = fmt.Sprintf("%s found, %d TiKV; its TiKV release is not named (%q): not judged, the pause checks each store", ref, replicas, release)
		case ok:
			c.detail = fmt.Sprintf("%s found, %d TiKV; TiKV %s serves the snapshot lease", ref, replicas, release)
		default:
			c.err = fmt.Errorf("%s: %w", ref, tidbcluster.LeaseCheck(release))
		}
		out = append(out, c)
	}
	return out
}

func (o *options) awsChecks(ctx context.Context) []check {
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
