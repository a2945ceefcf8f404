// Package node is `fedbr-lab lab node`: run one lab node (a virtual-kubelet whose pods are local
// processes) in one lab cluster until interrupted.
package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/log/klogv2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/kubelet"
)

type options struct {
	kubeconfig  string
	context     string
	images      []string
	capacity    map[string]string
	awsEndpoint string
	egressCA    string
	dryRun      bool
	node        kubelet.Options
}

// NewCmd returns `fedbr-lab lab node`.
func NewCmd() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "node --kubeconfig FILE --context CLUSTER --name NAME --dir DIR [--zone ZONE] [--image PATTERN=PATH]...",
		Short: "Run a lab node: a virtual kubelet that runs each container as a local process",
		Long: `Register a Node in one lab cluster and run every container of every pod scheduled to it as
a local process, until interrupted; then stop the pods (SIGTERM, SIGKILL after the grace
period, at most --shutdown-grace) and exit with no process left.

Images map to executables with --image PATTERN=PATH (first match wins; '*' matches
anything; a pattern without tag matches every tag). Without --image, "fedbr" and "*/fedbr"
map to this fedbr-lab binary. An unmapped image fails the pod with reason ErrImagePull.

Mounts: each container gets a root folder, exported as $FEDBR_LAB_ROOT; a volume mounted at
/data is the symlink $FEDBR_LAB_ROOT/data to the volume's directory (emptyDir, secret,
configMap, projected token folders under --dir; a PVC's AWS-double volume directory;
hostPath as is). Processes see the host filesystem and network: programs must prefix mount
paths with $FEDBR_LAB_ROOT. Each container runs as its securityContext's user and groups
(root without runAsUser; fsGroup applied to its volumes as the kubelet does), so the node must
run as root; it lets other users traverse --dir and the folders above it (o+x). Logs: DIR/logs/NS_POD_UID/CONTAINER/RESTART.log, also served
to kubectl logs.

With --aws-endpoint the node stands for an AWS-double instance in --zone (created unless
--instance-id is given or the Node already names one) and for the EBS CSI driver there:
it provisions AWS-double volumes for claims of WaitForFirstConsumer storage classes with
provisioner ebs.csi.aws.com whose first pod was scheduled to it, attaches a claim's volume
to its instance before a pod mounts it (the volume's directory), and detaches it once a
deleted pod is gone.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the lab (default $KUBECONFIG)")
	f.StringVar(&o.context, "context", "", "kubeconfig context: the lab cluster to join (default: current context)")
	f.StringVar(&o.node.Name, "name", "", "Node name")
	f.StringVar(&o.node.Zone, "zone", "", "availability zone (label topology.kubernetes.io/zone), e.g. us-west-2a")
	f.StringVar(&o.node.Dir, "dir", "", "node directory: pods' volumes, container roots and logs")
	f.StringArrayVar(&o.images, "image", nil, "image mapping PATTERN=PATH (repeatable)")
	f.StringVar(&o.awsEndpoint, "aws-endpoint", "", "AWS double URL (admin API) for instances and EBS volumes")
	f.StringVar(&o.node.InstanceID, "instance-id", "", "AWS-double instance the node stands for")
	f.StringVar(&o.egressCA, "aws-egress-ca", "", "the AWS double's egress CA (DIR/egress-tls/ca.crt): serve IRSA, as EKS's pod identity webhook, to pods whose service account names a role (eks.amazonaws.com/role-arn), routed to the double's STS through it as their HTTPS proxy (needs --aws-endpoint)")
	f.StringVar(&o.node.DNSDir, "dns-dir", "", "the lab's cluster DNS table: give every container its own /etc/hosts with the pod's name, its hostAliases and the table (needs root and util-linux)")
	f.StringVar(&o.node.ClusterDomain, "cluster-domain", "", "this cluster's DNS domain: the table's names in it also resolve as <service>.<namespace>[.svc]")
	f.StringVar(&o.node.Address, "address", "127.0.0.1", "node and pod IP")
	f.StringVar(&o.node.KubeletListen, "kubelet-listen", "", "kubelet API address for kubectl logs (default ADDRESS:free port)")
	f.StringToStringVar(&o.capacity, "capacity", nil, "node capacity, e.g. cpu=64,memory=256Gi,pods=110")
	f.DurationVar(&o.node.RestartBackoff, "restart-backoff", 10*time.Second, "first delay before restarting a failed container (doubles up to --max-restart-backoff)")
	f.DurationVar(&o.node.MaxRestartBackoff, "max-restart-backoff", 5*time.Minute, "longest restart delay")
	f.DurationVar(&o.node.ShutdownGrace, "shutdown-grace", 10*time.Second, "longest grace period pods get when the node stops")
	f.BoolVar(&o.dryRun, "dry-run", false, "validate the flags and print the configuration without starting")
	for _, name := range []string{"name", "dir"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

func (o *options) run(cmd *cobra.Command) error {
	if err := o.complete(); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if o.dryRun {
		_, err := fmt.Fprintf(out, "would run node %s (zone %q) in context %q of %s with images %v, data in %s\n",
			o.node.Name, o.node.Zone, o.context, o.kubeconfig, o.node.Images, o.node.Dir)
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	vklog.L = klogv2.New(nil)
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: o.kubeconfig}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context}).ClientConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig %s context %q: %w", o.kubeconfig, o.context, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	o.node.Client, o.node.Server = client, cfg.Host
	if o.awsEndpoint != "" {
		admin := kubelet.AWSAdmin{Endpoint: o.awsEndpoint}
		o.node.Volumes = admin
		if err := o.ensureInstance(ctx, client, admin); err != nil {
			return err
		}
		// The node also stands in for the EBS CSI driver in its zone.
		ebs, err := kubelet.NewEC2(ctx, o.awsEndpoint, strings.TrimRight(o.node.Zone, "abcdefghijklmnopqrstuvwxyz"))
		if err != nil {
			return err
		}
		o.node.EBS = ebs
		if o.egressCA != "" {
			o.node.WebIdentity = &kubelet.WebIdentity{Proxy: o.awsEndpoint, CAFile: o.egressCA}
		}
		// A node's pods get AWS credentials from the node (its instance role); the lab's
		// are given explicitly, since an endpoint override implies none.
		for _, kv := range awsdouble.CredentialsEnv() {
			k, v, _ := strings.Cut(kv, "=")
			o.node.Env = append(o.node.Env, corev1.EnvVar{Name: k, Value: v})
		}
	}
	n, err := kubelet.New(o.node)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- n.Run(ctx) }()
	select {
	case <-n.Ready():
		_, _ = fmt.Fprintf(out, "node %s ready in %s (zone %q, instance %q)\n", o.node.Name, cfg.Host, o.node.Zone, o.node.InstanceID)
	case err := <-errc:
		return err
	}
	return <-errc
}

func (o *options) complete() error {
	if o.node.Name == "" || o.node.Dir == "" {
		return errors.New("--name and --dir are required")
	}
	if o.egressCA != "" && o.awsEndpoint == "" {
		return errors.New("--aws-egress-ca needs --aws-endpoint (the double that is the pods' route to STS)")
	}
	if o.awsEndpoint != "" && o.node.Zone == "" {
		return errors.New("--aws-endpoint needs --zone: the node's instance lives in a zone")
	}
	if len(o.images) == 0 {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find the fedbr-lab binary for the default --image: %w", err)
		}
		o.images = []string{"fedbr=" + self, "*/fedbr=" + self}
	}
	for _, s := range o.images {
		r, err := kubelet.ParseImageRule(s)
		if err != nil {
			return err
		}
		if _, err := os.Stat(r.Entrypoint); err != nil {
			return fmt.Errorf("--image %s: %w", s, err)
		}
		o.node.Images = append(o.node.Images, r)
	}
	if len(o.capacity) > 0 {
		o.node.Capacity = corev1.ResourceList{}
		for k, v := range o.capacity {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return fmt.Errorf("--capacity %s=%s: %w", k, v, err)
			}
			o.node.Capacity[corev1.ResourceName(k)] = q
		}
	}
	dir, err := filepath.Abs(o.node.Dir)
	if err != nil {
		return err
	}
	o.node.Dir = dir
	return nil
}

// ensureInstance gives the node its AWS-double instance: the flag's, the one an earlier run
// recorded on the Node, or a new one in the zone.
func (o *options) ensureInstance(ctx context.Context, client kubernetes.Interface, admin kubelet.AWSAdmin) error {
	if o.node.InstanceID != "" {
		return nil
	}
	nd, err := client.CoreV1().Nodes().Get(ctx, o.node.Name, metav1.GetOptions{})
	switch {
	case err == nil && nd.Annotations[kubelet.InstanceIDAnnotation] != "":
		o.node.InstanceID = nd.Annotations[kubelet.InstanceIDAnnotation]
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("get node %s: %w", o.node.Name, err)
	}
	id, err := admin.CreateInstance(ctx, o.node.Zone, map[string]string{"Name": o.node.Name, "fedbr.io/lab-node": o.node.Name})
	if err != nil {
		return err
	}
	o.node.InstanceID = id
	return nil
}
