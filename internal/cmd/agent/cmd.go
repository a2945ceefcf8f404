// Package agent is the `fedbr agent` command: the data-plane agent that carries out one
// Kubernetes cluster's part of federated backups and restores (package internal/agent).
package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/backupmember"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/metrics"
	"github.com/fedbr/fedbr/internal/agent/policy"
	"github.com/fedbr/fedbr/internal/agent/restoremember"
	"github.com/fedbr/fedbr/internal/agent/sweeper"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	"github.com/fedbr/fedbr/internal/agentlease"
	"github.com/fedbr/fedbr/internal/cloud/aws"
	"github.com/fedbr/fedbr/internal/metricsauth"
	"github.com/fedbr/fedbr/internal/podenv"
	"github.com/fedbr/fedbr/internal/restconfig"
)

type options struct {
	verbosity       int
	kubeconfig      string
	context         string
	clusterName     string
	namespaces      []string
	metrics         metricsauth.Flags
	probeAddr       string
	leaderElect     bool
	leaderElectNS   string
	jobTTL          time.Duration
	dryRun          bool
	env             job.Env
	maxConcurrent   int
	leaderElectName string
	sweepInterval   time.Duration
	orphanGrace     time.Duration
	// policyConfig is the policy as the flags give it; policy the validated one.
	policyConfig policy.Config
	policy       *policy.Policy
	// regionFrom is the variable env.Region was taken from when --region was not given.
	regionFrom string
}

// regionEnv are the variables the AWS SDK takes a region from, in its order; EKS injects
// AWS_REGION (and AWS_DEFAULT_REGION) into pods with IRSA or Pod Identity.
var regionEnv = []string{"AWS_REGION", "AWS_DEFAULT_REGION"}

// NewCmd returns `fedbr agent`.
func NewCmd() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "agent --k8s-cluster-name NAME --image IMAGE [--kubeconfig FILE --context CTX]",
		Short: "Run the data-plane agent: VolumeBackupMember and VolumeRestoreMember controllers",
		Long: `Run fedbr's agent in one data-plane Kubernetes cluster. It reconciles the
VolumeBackupMembers and VolumeRestoreMembers the manager creates for this cluster (those whose
spec.k8sClusterName is --k8s-cluster-name; others get a Warning event and are left alone): it
runs the ` + "`fedbr br`" + ` steps as Jobs in --image, follows their reports in the members' status by watch,
discovers and rebuilds TiKV volumes, and drives TiKV through the TidbCluster contract.

Every member is judged against the operator's policy first (the --allow-* and --allowed-*
flags; safe by default): a member outside it fails with the rule's name before any pod exists.

Without --kubeconfig it uses the pod's service account (also inside the lab's process pods),
else $KUBECONFIG. See docs/agent.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the data plane (default: in-cluster, else $KUBECONFIG)")
	f.StringVar(&o.context, "context", "", "kubeconfig context (default: current)")
	f.StringVar(&o.clusterName, "k8s-cluster-name", "", "this data plane's name in the manager's kubeconfig; members naming another are ignored (required)")
	f.StringVar(&o.env.Image, "image", "", "image of the step Jobs: the agent's own image, so Jobs run exactly this build (required; a template's toolImage overrides it)")
	f.StringVar(&o.env.Region, "region", "", "AWS region, passed to the steps as --region and used for the agent's own EC2 calls (default: $AWS_REGION, else $AWS_DEFAULT_REGION; the agent does not start without one)")
	f.StringVar(&o.env.AWSEndpoint, "aws-endpoint", "", "AWS endpoint override (the lab's AWS double), passed to the steps as --aws-endpoint")
	f.BoolVar(&o.env.SaveStepLogs, "save-step-logs", false, "have the steps that write under a backup's storage (snapshot, size, restore-volumes, restore-data) save their own log lines there when they end, as logs/<pod name>.log beside the backup's metadata, so they outlive the Job's TTL; a clean deletes them with the backup")
	f.DurationVar(&o.env.StepExitDelay, "step-exit-delay", job.DefaultStepExitDelay, "how long every step waits after writing its exit marker ("+job.ExitMarker+", an emptyDir) before it exits, so a mesh or log sidecar can finish first (0: none)")
	f.DurationVar(&o.jobTTL, "job-ttl", job.DefaultTTL, "how long finished step Jobs are kept (ttlSecondsAfterFinished)")
	f.StringSliceVar(&o.namespaces, "namespace", nil, "only reconcile members in these namespaces, comma-separated or repeated (default: all); "+
		"the agent then reads and writes namespaced objects only there, so its rights can be Roles in them (the chart's watchNamespaces)")
	o.metrics.Register(f)
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz probes (0 disables them)")
	f.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader, so that several agent replicas run one at a time")
	f.StringVar(&o.leaderElectNS, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's)")
	f.IntVar(&o.maxConcurrent, "max-concurrent-reconciles", 4, "members reconciled in parallel per kind")
	f.DurationVar(&o.sweepInterval, "orphan-sweep-interval", sweeper.DefaultInterval, "how often the leader sweeps orphans: snapshots and volumes the steps created but never recorded whose member is gone (0 disables the sweeper)")
	f.DurationVar(&o.orphanGrace, "orphan-grace", sweeper.DefaultGrace, "how old an orphan must be before it is deleted; keep it above the longest time a step may still run after its member is gone")
	addPolicyFlags(f, &o.policyConfig, &o.env)
	f.IntVar(&o.verbosity, "v", 0, "log verbosity: 1 adds one line per reconcile with the planned actions")
	f.BoolVar(&o.dryRun, "dry-run", false, "validate the flags and print the configuration without starting")
	return cmd
}

// addPolicyFlags binds the policy's flags (docs/agent.md, "Policy"). The defaults are the safe
// policy: same-named namespaces only, S3 storage under the prefix named like the owner's
// namespace, the agent's own image, the steps' own service account, no hostPath, no variables
// but harmless ones, only scratch, ConfigMap, Secret and claim volumes, no privileged warm-up.
func addPolicyFlags(f *pflag.FlagSet, c *policy.Config, env *job.Env) {
	f.BoolVar(&c.SameNamespace, "allow-same-namespace", true,
		"let a VolumeBackup or VolumeRestore act on the data-plane namespace named like its own control-plane namespace")
	f.StringArrayVar(&c.Namespaces, "allow-namespaces", nil,
		"CONTROL=DATA[,DATA…]: let VolumeBackups and VolumeRestores of the control-plane namespaces matching the glob CONTROL act on the data-plane namespaces matching a DATA glob (repeatable; *=* allows every namespace)")
	f.StringSliceVar(&c.Images, "allowed-images", nil,
		"glob patterns of images a template's toolImage or warmupImage may name besides --image (path.Match syntax: * does not match /)")
	f.BoolVar(&c.HostPath, "allow-host-path", false, "allow hostPath volumes (a local storage on a node's directory)")
	f.StringSliceVar(&c.ServiceAccounts, "allowed-service-accounts", nil,
		"glob patterns, NAME or NAMESPACE/NAME, of service accounts a template's serviceAccount may name besides the steps' own "+job.ServiceAccountName)
	f.BoolVar(&c.PrivilegedWarmup, "allow-privileged-warmup", false,
		"allow warm-ups that read block devices (fio; hybrid and fsr of a TiKV with volumes besides its data volume), which run privileged")
	f.StringSliceVar(&c.Env, "allowed-env", nil,
		"glob patterns of the variables a template's env may set besides "+strings.Join(policy.DefaultEnv, ", ")+
			"; a sensitive variable (AWS_*, HOME, proxies, CA files, GODEBUG, LD_*, FEDBR_*, KUBECONFIG, …) only by its exact name")
	f.StringSliceVar(&env.PodAnnotations, "pod-annotations", job.DefaultPodAnnotations,
		"annotation keys (exact, or a prefix ending in *) of a VolumeBackup's or VolumeRestore's that its step pods carry; the rest (sidecar injectors' among them) stay on the member (empty: none)")
	f.StringSliceVar(&env.PodLabels, "pod-labels", nil,
		"label keys (exact, or a prefix ending in *) of a VolumeBackup's or VolumeRestore's that its step Jobs and pods carry; the rest (istio.io/rev, sidecar.istio.io/inject, azure.workload.identity/use, … among them) stay on the member (default: none)")
	f.BoolVar(&c.UpstreamBackups, "allow-upstream-backups", false,
		"let restores read backups without fedbr's identity (upstream BR's), whose snapshots can be checked only for their owner and source volume, not for a backup tag")
	f.StringSliceVar(&c.Storage, "allowed-storage", nil,
		"S3 roots s3://BUCKET_GLOB[/PREFIX] a member's S3 storage must lie under, where the segment "+policy.NamespaceSegment+
			" of PREFIX is the member's control-plane namespace (default "+strings.Join(policy.DefaultStorage, ",")+
			": any bucket, under the prefix named like that namespace; a root given replaces it)")
	f.StringSliceVar(&c.VolumeTypes, "allowed-volume-types", nil,
		"volume types (downwardAPI, projected, csi, ephemeral, nfs, …) a template's volumes may have besides "+
			strings.Join(policy.DefaultVolumeTypes, ", ")+" (hostPath: --allow-host-path)")
}

func (o *options) validate() error {
	var errs []error
	if o.clusterName == "" {
		errs = append(errs, errors.New("--k8s-cluster-name is required: it is this data plane's context name in the manager's kubeconfig"))
	}
	if o.env.Image == "" {
		errs = append(errs, errors.New("--image is required: the step Jobs run `fedbr br` from it"))
	}
	if o.jobTTL < time.Minute {
		errs = append(errs, errors.New("--job-ttl must be at least 1m, so the agent sees a finished Job before it goes"))
	}
	if o.jobTTL > math.MaxInt32*time.Second {
		errs = append(errs, fmt.Errorf("--job-ttl %s: at most %s (ttlSecondsAfterFinished is an int32)", o.jobTTL, math.MaxInt32*time.Second))
	}
	if err := o.resolveRegion(); err != nil {
		errs = append(errs, err)
	}
	if o.env.AWSEndpoint != "" && !strings.HasPrefix(o.env.AWSEndpoint, "http://") && !strings.HasPrefix(o.env.AWSEndpoint, "https://") {
		errs = append(errs, fmt.Errorf("--aws-endpoint %q: want an http(s) URL", o.env.AWSEndpoint))
	}
	if o.env.StepExitDelay < 0 || o.env.StepExitDelay > time.Minute {
		errs = append(errs, fmt.Errorf("--step-exit-delay %s: want 0 to 1m", o.env.StepExitDelay))
	}
	for _, ns := range o.namespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--namespace %q: not a namespace name: %s", ns, strings.Join(msgs, "; ")))
		}
	}
	if o.maxConcurrent < 1 {
		errs = append(errs, errors.New("--max-concurrent-reconciles must be at least 1"))
	}
	if o.sweepInterval < 0 {
		errs = append(errs, errors.New("--orphan-sweep-interval must not be negative (0 disables the sweeper)"))
	}
	if o.orphanGrace < 0 {
		errs = append(errs, errors.New("--orphan-grace must not be negative"))
	}
	if o.env.Image != "" {
		o.policyConfig.AgentImage, o.policyConfig.StepServiceAccount = o.env.Image, job.ServiceAccountName
		pol, err := policy.New(o.policyConfig)
		if err != nil {
			errs = append(errs, fmt.Errorf("policy: %w", err))
		}
		o.policy = pol
	}
	o.env.TTL = o.jobTTL
	o.leaderElectName = agentlease.Name(o.clusterName)
	return errors.Join(errs...)
}

// resolveRegion makes sure the steps get a region: --region, else the agent's own AWS_REGION or
// AWS_DEFAULT_REGION, which the steps are then given as --region too (a step's pod has none of
// the agent's environment, and may have no region of its own). Without any, the agent does not
// start: every step would fail at its first AWS call instead, inside a backup or a restore.
func (o *options) resolveRegion() error {
	if o.env.Region = strings.TrimSpace(o.env.Region); o.env.Region != "" {
		return nil
	}
	for _, v := range regionEnv {
		if r := strings.TrimSpace(os.Getenv(v)); r != "" {
			o.env.Region, o.regionFrom = r, v
			return nil
		}
	}
	return errors.New("no AWS region: --region is not set (the agent chart's aws.region) and the agent's environment has neither AWS_REGION nor AWS_DEFAULT_REGION " +
		"(EKS sets them in pods with IRSA or Pod Identity); the steps would fail at their first AWS call: set aws.region")
}

func (o *options) run(cmd *cobra.Command) error {
	if err := o.validate(); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if o.dryRun {
		ns := "all namespaces"
		if len(o.namespaces) > 0 {
			ns = "namespaces " + strings.Join(o.namespaces, ", ")
		}
		sweep := "orphan sweeper off"
		if o.sweepInterval > 0 {
			sweep = fmt.Sprintf("orphan sweep every %s, grace %s", o.sweepInterval, o.orphanGrace)
		}
		annotations := "none"
		if len(o.env.PodAnnotations) > 0 {
			annotations = strings.Join(o.env.PodAnnotations, ", ")
		}
		labels := "none"
		if len(o.env.PodLabels) > 0 {
			labels = strings.Join(o.env.PodLabels, ", ")
		}
		region := strconv.Quote(o.env.Region)
		if o.regionFrom != "" {
			region += " (from " + o.regionFrom + ")"
		}
		_, err := fmt.Fprintf(out, "would run the agent for data plane %q in %s: Jobs in %s, region %s, endpoint %q, leader election %v, %s; policy: %s; pod annotations: %s; pod labels: %s\n",
			o.clusterName, ns, o.env.Image, region, o.env.AWSEndpoint, o.leaderElect, sweep, o.policy, annotations, labels)
		return err
	}
	cfg, err := o.restConfig()
	if err != nil {
		return err
	}
	restconfig.Finish(cfg, "agent")
	if err := setVerbosity(o.verbosity); err != nil {
		return err
	}
	ctrl.SetLogger(klog.NewKlogr())
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	mgr, err := o.manager(cfg)
	if err != nil {
		return err
	}
	if err := o.setup(ctx, mgr); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(out, "fedbr agent for data plane %q running against %s\n", o.clusterName, cfg.Host)
	return mgr.Start(ctx)
}

// restConfig is --kubeconfig/--context, else the pod's service account (found the lab's way
// too), else $KUBECONFIG.
func (o *options) restConfig() (*rest.Config, error) {
	if o.kubeconfig != "" {
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: o.kubeconfig}
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s context %q: %w", o.kubeconfig, o.context, err)
		}
		return cfg, nil
	}
	cfg, err := podenv.RESTConfig()
	if err == nil {
		return cfg, nil
	}
	if !errors.Is(err, podenv.ErrNotInPod) {
		return nil, err
	}
	cfg, err = crconfig.GetConfigWithContext(o.context)
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig, not in a pod, and no usable $KUBECONFIG: %w", err)
	}
	return cfg, nil
}

// CacheOptions are the agent's cache: only what it watches (its own Jobs, ConfigMaps, PVs and
// PVCs by label, TiKV and step pods, members and TidbClusters), in namespaces when given, and
// none of it with its managedFields: every step writes its member's status by server-side
// apply, so a member's managedFields grow with its steps (a restore's hundreds of warm-ups), and
// the agent never reads them.
func CacheOptions(namespaces []string) (cache.Options, error) {
	ours := labels.SelectorFromSet(labels.Set{job.LabelManagedBy: job.ManagedByValue})
	comp, err := labels.NewRequirement(tidbcluster.LabelComponent, selection.In,
		[]string{tidbcluster.ComponentTiKV, job.StepPause, job.StepSnapshot, job.StepClean, job.StepRestoreVolumes, job.StepRestoreData, job.StepVerify})
	if err != nil {
		return cache.Options{}, err
	}
	copts := cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: map[client.Object]cache.ByObject{
		&batchv1.Job{}:                  {Label: ours},
		&corev1.ConfigMap{}:             {Label: ours},
		&corev1.PersistentVolumeClaim{}: {Label: ours},
		&corev1.PersistentVolume{}:      {Label: ours},
		&corev1.Pod{}:                   {Label: labels.NewSelector().Add(*comp)},
	}}
	if len(namespaces) > 0 {
		copts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			copts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return copts, nil
}

// manager builds the controller manager. Its cache holds only what the agent watches: its
// own Jobs, ConfigMaps, PVs and PVCs (by label), TiKV and step pods, members and
// TidbClusters; backup discovery reads the rest directly.
func (o *options) manager(cfg *rest.Config) (ctrl.Manager, error) {
	s, err := NewScheme()
	if err != nil {
		return nil, err
	}
	copts, err := CacheOptions(o.namespaces)
	if err != nil {
		return nil, err
	}
	leNS := o.leaderElectNS
	if o.leaderElect && leNS == "" {
		if leNS, err = podenv.Namespace(); err != nil {
			return nil, fmt.Errorf("--leader-elect outside a pod needs --leader-election-namespace: %w", err)
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: s, Cache: copts,
		Metrics:                 o.metrics.Options(),
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        o.leaderElectName,
		LeaderElectionNamespace: leNS,
		// Release the Lease when the agent stops cleanly (it exits right after), so a new replica
		// takes over at once instead of after the lease duration.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return nil, fmt.Errorf("create the controller manager for %s: %w", cfg.Host, err)
	}
	if o.probeAddr != "0" {
		if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
			return nil, err
		}
		if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// setup registers both member controllers, the orphan sweeper and the metrics.
func (o *options) setup(ctx context.Context, mgr ctrl.Manager) error {
	m := metrics.New(backupmember.MetricsKind(), restoremember.MetricsKind())
	if err := m.Register(nil); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	rec := mgr.GetEventRecorder("fedbr-agent")
	provider, err := aws.New(ctx, aws.Config{Region: o.env.Region, Endpoint: o.env.AWSEndpoint})
	if err != nil {
		return fmt.Errorf("AWS provider (to confirm backups' snapshots, delete the volumes of failed restores and orphans): %w", err)
	}
	// The steps tag what they create with this cluster's id until they record it, whether or
	// not this agent sweeps, so a sweeper enabled later finds it.
	if o.env.ClusterID, err = sweeper.ClusterID(ctx, mgr.GetAPIReader()); err != nil {
		return fmt.Errorf("this cluster's identity: %w (the agent's ClusterRole grants get on namespace kube-system)", err)
	}
	if o.sweepInterval > 0 {
		s := &sweeper.Sweeper{Cloud: provider, Reader: mgr.GetAPIReader(), Recorder: rec, Metrics: m,
			Scope:    sweeper.Scope{Cluster: o.env.ClusterID, Namespaces: o.namespaces},
			Interval: o.sweepInterval, Grace: o.orphanGrace, Pod: sweeper.PodFromEnv(),
			Log: mgr.GetLogger().WithName("orphan-sweeper")}
		if err := mgr.Add(s); err != nil {
			return fmt.Errorf("add the orphan sweeper: %w", err)
		}
	}
	b := &backupmember.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec, Metrics: m,
		Env: o.env, ClusterName: o.clusterName, Policy: o.policy, Cloud: provider}
	if err := b.SetupWithManager(mgr, o.maxConcurrent); err != nil {
		return fmt.Errorf("set up the VolumeBackupMember controller: %w", err)
	}
	r := &restoremember.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec, Metrics: m, Env: o.env, ClusterName: o.clusterName,
		Cloud: provider, Policy: o.policy}
	if err := r.SetupWithManager(mgr, o.maxConcurrent); err != nil {
		return fmt.Errorf("set up the VolumeRestoreMember controller: %w", err)
	}
	return nil
}

// NewScheme returns the kinds the agent reads and writes.
func NewScheme() (*k8sruntime.Scheme, error) {
	s := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, dpv1alpha1.AddToScheme, pcv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// setVerbosity sets klog's -v, which the agent's logger (klogr) honours.
func setVerbosity(v int) error {
	if v < 0 {
		return fmt.Errorf("--v %d: want 0 or more", v)
	}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	return fs.Set("v", strconv.Itoa(v))
}
