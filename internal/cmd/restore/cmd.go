// Package restore is `fedbr restore create`: the VolumeRestore of a Complete VolumeBackup,
// written from the backup itself (every data plane's storage prefix as its member wrote it),
// so that an SRE restoring under pressure types a backup's name and a namespace, not a
// storage path per plane.
package restore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	"github.com/fedbr/fedbr/internal/cmd/br/session"
	"github.com/fedbr/fedbr/internal/cmd/describe"
	"github.com/fedbr/fedbr/internal/plane"
)

// NewCmd returns `fedbr restore` with its subcommands.
func NewCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Write VolumeRestores from VolumeBackups",
	}
	cmd.AddCommand(newCreateCmd())
	return cmd
}

// Options are what a VolumeRestore is built from besides its backup.
type Options struct {
	// Name is the VolumeRestore's name ("": the backup's).
	Name string
	// Into is the data-plane namespace of the TidbClusters to restore into, in every plane.
	Into string
	// TCName is the TidbClusters' name in every plane ("": each plane's backed-up one).
	TCName string
	// Warmup and WarmupStrategy are the template's.
	Warmup         fedv1alpha1.RestoreWarmupMode
	WarmupStrategy fedv1alpha1.RestoreWarmupStrategy
	// Verify is the template's: check the restored cluster once it serves.
	Verify bool
	// Scratch is the template's: the agents make the TidbClusters from the ones the backup
	// saved, and the restore's deletion removes them with everything it made.
	Scratch bool
}

// ErrNotComplete: only a Complete backup has a snapshot of every volume and the metadata of
// every plane.
var ErrNotComplete = errors.New("only a Complete VolumeBackup can be restored")

// Build is the VolumeRestore of b with o, in b's namespace: one cluster per cluster of the
// backup, each restoring from the storage its member wrote (MemberStorage) into the TidbCluster
// o names in o.Into. The restore lives in the backup's namespace, the one whose storage
// prefix the agents' policy lets it read.
func Build(b *fedv1alpha1.VolumeBackup, o Options) (*fedv1alpha1.VolumeRestore, error) {
	var errs []error
	if b.Status.Phase != fedv1alpha1.VolumeBackupComplete {
		errs = append(errs, fmt.Errorf("VolumeBackup %s/%s is %q: %w", b.Namespace, b.Name, b.Status.Phase, ErrNotComplete))
	}
	if o.Into == "" {
		errs = append(errs, errors.New("--into is required: the data-plane namespace to restore into (its TidbClusters in recovery mode)"))
	} else if msgs := validation.IsDNS1123Label(o.Into); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--into %q: %v", o.Into, msgs))
	}
	if o.TCName != "" {
		if msgs := validation.IsDNS1123Subdomain(o.TCName); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--tc %q: %v", o.TCName, msgs))
		}
	}
	if o.Name != "" {
		if msgs := validation.IsDNS1123Subdomain(o.Name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("name %q: %v", o.Name, msgs))
		}
	}
	if !slices.Contains([]fedv1alpha1.RestoreWarmupMode{fedv1alpha1.RestoreWarmupNone, fedv1alpha1.RestoreWarmupSync, fedv1alpha1.RestoreWarmupAsync}, o.Warmup) {
		errs = append(errs, fmt.Errorf("--warmup %q: want sync or async (or none: \"\")", o.Warmup))
	}
	strategies := []fedv1alpha1.RestoreWarmupStrategy{"", fedv1alpha1.RestoreWarmupStrategyFio, fedv1alpha1.RestoreWarmupStrategyHybrid,
		fedv1alpha1.RestoreWarmupStrategyFsr, fedv1alpha1.RestoreWarmupStrategyCheckWALOnly, fedv1alpha1.RestoreWarmupStrategyFs}
	if !slices.Contains(strategies, o.WarmupStrategy) {
		errs = append(errs, fmt.Errorf("--warmup-strategy %q: want fio, hybrid, fsr, check-wal-only or fs", o.WarmupStrategy))
	}
	if len(b.Spec.Clusters) == 0 {
		errs = append(errs, fmt.Errorf("VolumeBackup %s/%s names no cluster", b.Namespace, b.Name))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	name := o.Name
	if name == "" {
		name = b.Name
	}
	r := &fedv1alpha1.VolumeRestore{
		TypeMeta:   metav1.TypeMeta{APIVersion: fedv1alpha1.GroupVersion.String(), Kind: "VolumeRestore"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.Namespace},
	}
	r.Spec.Template.Warmup, r.Spec.Template.WarmupStrategy, r.Spec.Template.Verify, r.Spec.Template.Scratch = o.Warmup, o.WarmupStrategy, o.Verify, o.Scratch
	r.Spec.Clusters = b.RestoreClusters(o.Into, o.TCName)
	return r, nil
}

type createOptions struct {
	conn   describe.Control
	build  Options
	backup string
	dryRun bool
	output string
	// withTCs makes the TidbClusters too, from the manifests the backup saved, read from its
	// storage with this machine's AWS identity (region, endpoint) and created in each plane
	// through planesKubeconfig.
	withTCs          bool
	planesKubeconfig string
	region, endpoint string
}

func newCreateCmd() *cobra.Command {
	o := &createOptions{}
	var warmup, strategy string
	cmd := &cobra.Command{
		Use:   "create [NAME] --from-backup BACKUP --into NAMESPACE",
		Short: "Create the VolumeRestore of a Complete VolumeBackup, every data plane's storage filled in",
		Long: `create writes the VolumeRestore of the Complete VolumeBackup --from-backup, in the backup's
namespace of the control plane (-n), named NAME (default: the backup's name). It has one cluster
per data plane of the backup, each restoring from the storage prefix that plane's member wrote,
into the TidbCluster of the same name (or --tc) in namespace --into of that plane. Those
TidbClusters must exist in recovery mode before the restore can go on (docs/operations.md), unless
--scratch: then each plane's agent makes its TidbCluster from the one the backup saved, and
deleting the restore removes it with every claim and volume of the restore (a drill; add --verify
to have it checked and recorded as the backup's Verified).

--with-tidbclusters makes them too: from each plane's storage it reads the TidbCluster the backup
saved (with this machine's AWS credentials from the environment; --region, --aws-endpoint), turns
it into the one the restore needs (in --into, named --tc or as saved, spec.recoveryMode true,
spec.cluster moved along, without the source's status and server fields: fedbr backup manifests
--for-restore prints the same), and creates it in that plane through --planes-kubeconfig, whose
contexts are named as the data planes and may create TidbClusters in --into (your identity, not
the manager's, which may not). An existing TidbCluster of that name is never changed: the command
stops before the VolumeRestore. Then it creates the VolumeRestore.

-o yaml|json prints the VolumeRestore (-o yaml with --with-tidbclusters: every TidbCluster too,
each after a "# data plane NAME" line) instead of creating anything; --dry-run has the API servers
check them (admission included) without creating them.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.build.Name = args[0]
			}
			o.build.Warmup, o.build.WarmupStrategy = fedv1alpha1.RestoreWarmupMode(warmup), fedv1alpha1.RestoreWarmupStrategy(strategy)
			return o.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	o.conn.AddFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&o.backup, "from-backup", "", "the Complete VolumeBackup to restore, in -n's namespace (required)")
	f.StringVar(&o.build.Into, "into", "", "the data-plane namespace of the TidbClusters to restore into, in every plane (required)")
	f.StringVar(&o.build.TCName, "tc", "", "the TidbClusters' name in every plane (default: each plane's backed-up TidbCluster's name)")
	f.StringVar(&warmup, "warmup", "", "template.warmup: sync or async (default none)")
	f.StringVar(&strategy, "warmup-strategy", "", "template.warmupStrategy: fio, hybrid, fsr, check-wal-only or fs (default hybrid when --warmup is set)")
	f.BoolVar(&o.build.Verify, "verify", false, "template.verify: once TiKV serves everywhere, check the restored cluster from PD (stores Up, regions whole and led, TSO past the restored ts); the restore's Checked condition holds the outcome")
	f.BoolVar(&o.build.Scratch, "scratch", false, "template.scratch: each plane's agent makes the TidbCluster from the one the backup saved (recovery mode, in --into, which must hold none of that name), and deleting the restore removes it with its claims and volumes: a restore drill (with --verify)")
	f.BoolVar(&o.dryRun, "dry-run", false, "have the API server check the VolumeRestore without creating it")
	f.StringVarP(&o.output, "output", "o", "", "yaml or json: print the VolumeRestore instead of creating it")
	f.BoolVar(&o.withTCs, "with-tidbclusters", false, "also create each plane's TidbCluster in recovery mode from the manifests the backup saved")
	f.StringVar(&o.planesKubeconfig, "planes-kubeconfig", "", "with --with-tidbclusters: kubeconfig with one context per data plane, named as its k8sClusterName, that may create TidbClusters in --into")
	f.StringVar(&o.region, "region", "", "with --with-tidbclusters: the S3 region when the backup's storage names none (default: from the AWS environment)")
	f.StringVar(&o.endpoint, "aws-endpoint", "", "with --with-tidbclusters: an S3 endpoint override (the lab's AWS double)")
	return cmd
}

func (o *createOptions) run(ctx context.Context, w io.Writer) error {
	switch o.output {
	case "", "yaml", "json":
	default:
		return fmt.Errorf("--output %q: want yaml or json", o.output)
	}
	if o.backup == "" {
		return errors.New("--from-backup is required: the Complete VolumeBackup to restore")
	}
	c, ns, err := o.conn.Client()
	if err != nil {
		return err
	}
	var b fedv1alpha1.VolumeBackup
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: o.backup}, &b); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("VolumeBackup %s not found in namespace %s", o.backup, ns)
		}
		return fmt.Errorf("read VolumeBackup %s/%s: %w", ns, o.backup, err)
	}
	r, err := Build(&b, o.build)
	if err != nil {
		return err
	}
	var tcs []planeTC
	if o.withTCs {
		if o.output == "json" {
			return errors.New("--with-tidbclusters prints one YAML document per object, each TidbCluster after a comment naming its plane: use -o yaml")
		}
		if o.output == "" && o.planesKubeconfig == "" {
			return errors.New("--with-tidbclusters creates the TidbClusters through --planes-kubeconfig (contexts named as the data planes, allowed to create TidbClusters in --into); give it, or -o yaml to print them")
		}
		if tcs, err = o.tidbClusters(ctx, &b, r); err != nil {
			return err
		}
		if o.build.Scratch {
			return errors.New("--with-tidbclusters and --scratch both make the TidbClusters: --scratch has the agents make them, with the restore's identity, and remove them with the restore")
		}
	} else if o.planesKubeconfig != "" || o.region != "" || o.endpoint != "" {
		return errors.New("--planes-kubeconfig, --region and --aws-endpoint go with --with-tidbclusters")
	}
	if o.output != "" {
		if err := printObject(w, r, o.output); err != nil {
			return err
		}
		for _, tc := range tcs {
			if _, err := fmt.Fprintf(w, "---\n# data plane %s\n", tc.plane); err != nil {
				return err
			}
			if err := printObject(w, tc.obj, o.output); err != nil {
				return err
			}
		}
		return nil
	}
	var opts []client.CreateOption
	if o.dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if len(tcs) > 0 {
		if err := o.createTidbClusters(ctx, w, tcs, opts); err != nil {
			return err
		}
	}
	if err := c.Create(ctx, r, opts...); err != nil {
		return fmt.Errorf("create VolumeRestore %s/%s: %w", r.Namespace, r.Name, err)
	}
	verb := "created"
	if o.dryRun {
		verb = "checked by the API server (--dry-run), not created"
	}
	_, err = fmt.Fprintf(w, "VolumeRestore %s/%s %s: %d data planes into namespace %s; watch it with fedbr describe restore %s -n %s --watch\n",
		r.Namespace, r.Name, verb, len(r.Spec.Clusters), o.build.Into, r.Name, r.Namespace)
	return err
}

// printObject writes o as yaml or json, as an SRE would write it: without the empty status and
// creation time an unsent object has.
func printObject(w io.Writer, o runtime.Object, format string) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return err
	}
	delete(obj, "status")
	unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
	var out []byte
	if format == "json" {
		out, err = json.MarshalIndent(obj, "", "  ")
		out = append(out, '\n')
	} else {
		out, err = yaml.Marshal(obj)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// planeTC is the TidbCluster a restore needs in one data plane.
type planeTC struct {
	plane string
	obj   *unstructured.Unstructured
}

// tidbClusters reads, for each cluster of r, the TidbCluster the backup saved in that plane's
// storage and turns it into the one r restores into (tidbcluster.ForRestore).
func (o *createOptions) tidbClusters(ctx context.Context, b *fedv1alpha1.VolumeBackup, r *fedv1alpha1.VolumeRestore) ([]planeTC, error) {
	var out []planeTC
	for i, c := range b.Spec.Clusters {
		st, err := job.StorageFor(b.Spec.Template.MemberStorage(c.K8sClusterName))
		if err != nil {
			return nil, fmt.Errorf("data plane %s: %w", c.K8sClusterName, err)
		}
		if !strings.HasPrefix(st.Flag, "s3://") {
			return nil, fmt.Errorf("data plane %s: --with-tidbclusters reads the saved manifests from S3; this backup's storage is in the plane's pods (print them there with fedbr backup manifests --for-restore)", c.K8sClusterName)
		}
		sess := session.Flags{Storage: st.Flag, Region: o.region, Endpoint: o.endpoint}
		store, err := sess.Store(ctx)
		if err != nil {
			return nil, fmt.Errorf("data plane %s: open %s: %w", c.K8sClusterName, st.Flag, err)
		}
		ms, err := store.Manifests(ctx)
		if err != nil {
			return nil, fmt.Errorf("data plane %s: read the manifests in %s: %w", c.K8sClusterName, st.Flag, err)
		}
		m, err := tidbcluster.SavedTidbCluster(ms, c.TCNamespace, c.TCName)
		if err != nil {
			return nil, fmt.Errorf("data plane %s (%s): %w", c.K8sClusterName, st.Flag, err)
		}
		u, err := tidbcluster.ForRestore(m, r.Spec.Clusters[i].TCNamespace, r.Spec.Clusters[i].TCName)
		if err != nil {
			return nil, fmt.Errorf("data plane %s: %w", c.K8sClusterName, err)
		}
		out = append(out, planeTC{plane: c.K8sClusterName, obj: u})
	}
	return out, nil
}

// ErrTidbClusterExists: --with-tidbclusters never changes a TidbCluster that is there already.
var ErrTidbClusterExists = errors.New("a TidbCluster of that name exists already: fedbr changes no existing TidbCluster (delete it, or restore with --tc another name)")

// createTidbClusters creates each plane's TidbCluster through the context of --planes-kubeconfig
// named as the plane, built as the manager builds its planes (no credential plugin is run). It
// first checks in every plane that none exists, so that a refused one leaves nothing created.
func (o *createOptions) createTidbClusters(ctx context.Context, w io.Writer, tcs []planeTC, opts []client.CreateOption) error {
	raw, err := clientcmd.LoadFromFile(o.planesKubeconfig)
	if err != nil {
		return fmt.Errorf("--planes-kubeconfig: %w", err)
	}
	clients := map[string]client.Client{}
	for _, tc := range tcs {
		if raw.Contexts[tc.plane] == nil {
			return fmt.Errorf("--planes-kubeconfig %s has no context %q (one per data plane, named as its k8sClusterName)", o.planesKubeconfig, tc.plane)
		}
		rc, err := plane.Config(raw, tc.plane, "restore-create")
		if err != nil {
			return fmt.Errorf("data plane %s: %w", tc.plane, err)
		}
		rc.Timeout = o.conn.Timeout
		cl, err := client.New(rc, client.Options{})
		if err != nil {
			return fmt.Errorf("data plane %s: %w", tc.plane, err)
		}
		clients[tc.plane] = cl
		existing := &unstructured.Unstructured{}
		existing.SetGroupVersionKind(tc.obj.GroupVersionKind())
		err = cl.Get(ctx, client.ObjectKeyFromObject(tc.obj), existing)
		switch {
		case err == nil:
			return fmt.Errorf("data plane %s: TidbCluster %s/%s: %w", tc.plane, tc.obj.GetNamespace(), tc.obj.GetName(), ErrTidbClusterExists)
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("data plane %s: read TidbCluster %s/%s: %w", tc.plane, tc.obj.GetNamespace(), tc.obj.GetName(), err)
		}
	}
	for _, tc := range tcs {
		if err := clients[tc.plane].Create(ctx, tc.obj.DeepCopy(), opts...); err != nil {
			return fmt.Errorf("data plane %s: create TidbCluster %s/%s: %w", tc.plane, tc.obj.GetNamespace(), tc.obj.GetName(), err)
		}
		verb := "created"
		if o.dryRun {
			verb = "checked (--dry-run), not created"
		}
		if _, err := fmt.Fprintf(w, "data plane %s: TidbCluster %s/%s in recovery mode %s\n", tc.plane, tc.obj.GetNamespace(), tc.obj.GetName(), verb); err != nil {
			return err
		}
	}
	return nil
}
