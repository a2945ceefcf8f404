// Package up is `fedbr-lab lab up`: bring up the whole lab — Kubernetes control planes, the AWS
// double, lab nodes and stand-in tidb-operators.
package up

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	labinstall "github.com/fedbr/fedbr/internal/cmd/lab/install"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/controlplane"
	"github.com/fedbr/fedbr/internal/lab/env"
)

type options struct {
	o          env.Options
	zones      []string
	dryRun     bool
	repoDir    string
	install    bool
	installing labinstall.Flags
}

// NewCmd returns `fedbr-lab lab up`.
func NewCmd() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "up --dir DIR [--clusters control,dp1,dp2,dp3] [--nodes 3]",
		Short: "Bring up the lab: control planes, the AWS double, nodes and tidb-operators, all in one go",
		Long: `Bring up the whole lab on this machine, in parallel where possible:

  - one real Kubernetes control plane per cluster (etcd, API server, controller-manager,
    scheduler) on free loopback ports; DIR/kubeconfig has a context per cluster;
  - one AWS double shared by all clusters (state in DIR/aws);
  - in every data-plane cluster (every cluster but --control): --nodes lab nodes, each an EC2
    instance of the AWS double in the cluster's zone, and a stand-in tidb-operator with its
    own address block 127.0.N.x and store-id base;
  - in every cluster: fedbr's CRDs and the TidbCluster CRD (--crd-dir), and the default
    StorageClass gp3 (provisioner ebs.csi.aws.com, provisioned by the nodes in the AWS double);
  - for one data plane (--eks-auth, default the first): an EKS token authenticator, its
    kube-apiserver's token webhook, which has the AWS double's STS check each token.

The processes keep running after this command exits; DIR/lab.json says where everything is.
Stop them with ` + "`fedbr-lab lab down --dir DIR`" + `. With --install, fedbr is then installed
through its Helm charts, as ` + "`fedbr-lab lab install`" + ` does (its flags prefixed --install-).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&o.o.Dir, "dir", "", "lab state directory (created if missing)")
	f.StringSliceVar(&o.o.Clusters, "clusters", env.DefaultClusters, "cluster names; each becomes a kubeconfig context")
	f.StringVar(&o.o.Control, "control", "", "the control cluster: no nodes, no operator (default: the first of --clusters)")
	f.IntVar(&o.o.Nodes, "nodes", env.DefaultNodes, "lab nodes per data-plane cluster")
	f.StringSliceVar(&o.zones, "zones", nil, "zone per data-plane cluster, CLUSTER=ZONE (default: REGION+a, b, c … in --clusters order)")
	f.StringVar(&o.o.Region, "region", env.DefaultRegion, "region of the AWS double")
	f.StringVar(&o.o.EKSAuth, "eks-auth", "", "the data plane whose API server authenticates bearer tokens as EKS does (the lab's EKS authenticator and the AWS double's STS), and whose manager kubeconfig user is \"aws eks get-token\" (default: the first data plane; "+env.NoEKSAuth+" for none)")
	f.IntVar(&o.o.IPBase, "ip-base", env.DefaultIPBase, "data-plane cluster i (from 0) gets the address block 127.0.(ip-base+i+1).x for its PD and TiKV")
	f.Uint64Var(&o.o.StoreIDStep, "store-id-step", env.DefaultStoreIDStep, "data-plane cluster i (from 0) gets store ids from step*(i+1)+1")
	f.StringArrayVar(&o.o.Images, "image", nil, "extra image mapping PATTERN=PATH for every node, after fedbr's own (repeatable)")
	f.StringVar(&o.o.Fedbr, "fedbr", "", "fedbr-lab binary the lab processes run (default: this one)")
	f.StringVar(&o.o.BinDir, "bin-dir", "", "folder with etcd and the Kubernetes binaries (default: the make k8s-bin cache)")
	f.StringSliceVar(&o.o.CRDDirs, "crd-dir", nil, "folder with CRD manifests to install, repeatable (default: REPO/config/crd/bases and REPO/test/fixtures/crd)")
	f.StringVar(&o.repoDir, "repo", ".", "fedbr checkout whose .cache holds the binaries and config/crd/bases and test/fixtures/crd the CRDs, when --bin-dir or --crd-dir is not given")
	f.DurationVar(&o.o.SnapshotTime, "snapshot-time", env.DefaultSnapshotTime,
		"fixed time the AWS double adds to every snapshot's completion (EBS takes minutes; an instant one puts the completion's work inside the GC pause window)")
	f.StringVar(&o.o.Volumes, "volumes", awsdouble.VolumesExt4,
		"how EBS volumes are kept: ext4 (image files the nodes attach as loop devices and mount ext4, as EBS volumes on EKS; needs root, loop devices, e2fsprogs) or dir (directories)")
	f.DurationVar(&o.o.ReadyTimeout, "ready-timeout", 2*time.Minute, "how long to wait for each part to be ready")
	f.BoolVar(&o.dryRun, "dry-run", false, "validate the flags and print the plan")
	f.BoolVar(&o.install, "install", false, "then install fedbr through its Helm charts, as `fedbr-lab lab install` (flags --install-*)")
	o.installing.Register(cmd, "install-")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

func (o *options) complete() error {
	if o.o.ReadyTimeout <= 0 {
		return errors.New("--ready-timeout must be positive")
	}
	zones, err := env.ParseZones(o.zones)
	if err != nil {
		return err
	}
	o.o.Zones = zones
	if o.o.Nodes <= 0 {
		return fmt.Errorf("--nodes %d: want at least 1", o.o.Nodes)
	}
	if o.o.IPBase <= 0 {
		return fmt.Errorf("--ip-base %d: want a positive octet", o.o.IPBase)
	}
	if o.o.StoreIDStep == 0 {
		return errors.New("--store-id-step must be positive")
	}
	if o.o.Fedbr == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find this fedbr-lab binary (pass --fedbr): %w", err)
		}
		o.o.Fedbr = self
	}
	if o.o.BinDir == "" {
		dir, err := controlplane.DefaultBinDir(o.repoDir)
		if err != nil {
			return err
		}
		o.o.BinDir = dir
	}
	if len(o.o.CRDDirs) == 0 {
		o.o.CRDDirs = controlplane.DefaultCRDDirs(o.repoDir)
	}
	return o.o.Validate()
}

func (o *options) run(cmd *cobra.Command) error {
	if err := o.complete(); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if o.dryRun {
		return printPlan(out, o.o)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	o.o.Log = func(format string, args ...any) { _, _ = fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...) }
	l, err := env.Up(ctx, o.o)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "lab up in %s: clusters %v (control %s)\nexport KUBECONFIG=%s\nAWS endpoint: %s (region %s)\nlab description: %s\n",
		time.Since(start).Round(time.Millisecond), l.Contexts, l.Control, l.Kubeconfig, l.AWS.Endpoint, l.AWS.Region,
		filepath.Join(l.Dir, env.File))
	if err != nil || !o.install {
		return err
	}
	cmd.SetContext(ctx)
	o.installing.Repo = o.repoDir
	return o.installing.Run(cmd, l)
}

func printPlan(w io.Writer, o env.Options) error {
	p, err := env.NewPlan(o)
	if err != nil {
		return err
	}
	_, _ = fmt.Fprintf(w, "would start clusters %v in %s (control %s) with binaries from %s, fedbr %s, CRDs from %s\n",
		o.Clusters, o.Dir, p.Control, o.BinDir, o.Fedbr, o.CRDDirs)
	for _, d := range p.DataPlanes {
		_, _ = fmt.Fprintf(w, "  %s: zone %s, nodes %v, operator on %s.x with store ids from %d\n",
			d.Cluster, d.Zone, d.Nodes, d.IPPrefix, d.StoreIDBase+1)
	}
	if p.EKSAuth != "" {
		_, _ = fmt.Fprintf(w, "  %s: API server authenticates EKS tokens (lab EKS authenticator, STS of the AWS double)\n", p.EKSAuth)
	}
	return nil
}
