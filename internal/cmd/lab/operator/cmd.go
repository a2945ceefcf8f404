// Package operator is the `fedbr-lab lab operator` command: the lab's stand-in tidb-operator
// (package internal/lab/operator) for one lab cluster.
package operator

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	pdlog "github.com/pingcap/log"
	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	labop "github.com/fedbr/fedbr/internal/lab/operator"
)

type options struct {
	kubeconfig string
	context    string
	dryRun     bool
	run        labop.RunOptions
}

// NewCmd returns the `lab operator` command.
func NewCmd() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "operator --kubeconfig FILE --context CLUSTER (--ip-prefix 127.0.N | --base-port PORT)",
		Short: "Run the stand-in tidb-operator: TidbClusters as PD and TiKV double pods on PVCs",
		Long: `Run the lab's stand-in tidb-operator for one lab cluster. Each TidbCluster gets pods
<tc>-pd-0 and <tc>-tikv-<i> running "fedbr-lab lab pd|tikv", claims pd-<tc>-pd-0 and
tikv-<tc>-tikv-<i> (storage class and size from spec.pd / spec.tikv), and a headless Service
<tc>-pd. Pods share the host network, so every member gets an address of its own: with
--ip-prefix 127.0.N, PD on 127.0.N.10:2379 and TiKV i on 127.0.N.(100+i):20160; otherwise
127.0.0.1 with PD on --base-port and TiKV i on --base-port+100+i. Addresses are published in the
TidbCluster status (status.pd.members, status.tikv.stores from PD's store list). A TidbCluster's
annotations lab.fedbr.io/ip-prefix, lab.fedbr.io/base-port and lab.fedbr.io/store-id-base
override these flags for it.

In recovery mode TiKV (and its claims) start only once the tidb.pingcap.com/tikv-volumes-ready
annotation is set; when spec.recoveryMode goes back to false, TiKV pods started in recovery mode
are deleted and recreated.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.runE(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the lab (default $KUBECONFIG)")
	f.StringVar(&o.context, "context", "", "kubeconfig context: the lab cluster to run in (default: current context)")
	f.StringVar(&o.run.Namespace, "namespace", "", "only reconcile TidbClusters in this namespace (default: all)")
	f.StringVar(&o.run.Config.Addressing.IPPrefix, "ip-prefix", "", "give each member its own loopback IP 127.0.N.x with the real ports (distinct N per lab cluster)")
	f.IntVar(&o.run.Config.Addressing.BasePort, "base-port", 0, "without --ip-prefix: first port of this cluster's block on 127.0.0.1 (uses base..base+199)")
	f.Uint64Var(&o.run.Config.Addressing.StoreIDBase, "store-id-base", 0, "TiKV member i gets store id base+i+1 (distinct per lab cluster of one federated TiDB cluster)")
	f.StringVar(&o.run.Config.Image, "image", "fedbr", "image of the PD and TiKV pods (the lab node maps it to the fedbr-lab binary)")
	f.StringVar(&o.run.DNSDir, "dns-dir", "", "the lab's cluster DNS table: publish each PD Service's names there and resolve spec.cluster's PD with it (needs --cluster-domain)")
	f.StringVar(&o.run.ClusterDomain, "cluster-domain", "", "this cluster's DNS domain, as in tidb-operator's clusterDomain (e.g. dp1.local)")
	f.BoolVar(&o.dryRun, "dry-run", false, "validate the flags and print the configuration without starting")
	return cmd
}

func (o *options) runE(cmd *cobra.Command) error {
	a := o.run.Config.Addressing
	if err := a.Validate(); err != nil {
		return err
	}
	if (o.run.DNSDir == "") != (o.run.ClusterDomain == "") {
		return fmt.Errorf("--dns-dir and --cluster-domain go together")
	}
	if o.run.Config.Image == "" {
		return fmt.Errorf("--image must not be empty")
	}
	out := cmd.OutOrStdout()
	if o.dryRun {
		_, err := fmt.Fprintf(out, "would run the lab tidb-operator in context %q of %s: image %s, PD %s, TiKV 0 at %s (store %d)\n",
			o.context, o.kubeconfig, o.run.Config.Image, a.PD(0), a.TiKV(0), a.StoreID(0))
		return err
	}
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: o.kubeconfig}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context}).ClientConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig %s context %q: %w", o.kubeconfig, o.context, err)
	}
	ctrl.SetLogger(klog.NewKlogr())
	// The PD client logs every connection at info level; the operator opens one per status read.
	pdlog.SetLevel(zapcore.WarnLevel)
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	_, _ = fmt.Fprintf(out, "lab tidb-operator running against %s (PD at %s)\n", cfg.Host, a.PD(0))
	return labop.Run(ctx, cfg, o.run)
}
