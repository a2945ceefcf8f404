// Package backup is `fedbr backup`: reading what a backup saved, from its storage.
package backup

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	"github.com/fedbr/fedbr/internal/cmd/br/session"
	"github.com/fedbr/fedbr/internal/meta"
)

// NewCmd returns `fedbr backup` with its subcommands.
func NewCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Read what a backup saved in its storage",
	}
	cmd.AddCommand(newManifestsCmd())
	return cmd
}

type manifestsOptions struct {
	session    session.Flags
	kinds      []string
	list       bool
	forRestore string
	tcName     string
}

func newManifestsCmd() *cobra.Command {
	o := &manifestsOptions{}
	cmd := &cobra.Command{
		Use:   "manifests --storage <backup's storage prefix>",
		Short: "Print the Kubernetes manifests a backup saved (its TidbCluster and the tidb-operator objects that reference it)",
		Long: `Print the manifests one data plane's backup saved next to its metadata, under
manifests/<namespace>/<Kind>/<name>.yaml: the TidbCluster and every TidbMonitor, TidbDashboard,
TidbInitializer and TidbNGMonitoring in its namespace that referenced it when the backup was
taken. They are printed as one multi-document YAML stream (the TidbCluster first), ready to edit
and apply for a restore; --list prints their keys only.

The manifests read are those the backupmeta lists (fedbr.manifests); a storage without a
backupmeta, or whose backupmeta lists none (a backup that failed before recording its
snapshots, or upstream's), is listed under manifests/ instead.

--for-restore NAMESPACE prints instead the TidbClusters as a restore into NAMESPACE needs them
(fedbr restore create --with-tidbclusters makes and sends them itself): in NAMESPACE, named
--tc (default: the saved name), with spec.recoveryMode true, spec.cluster moved into NAMESPACE
(and renamed with --tc), and without the source's status, uid, resourceVersion, managedFields,
owners, finalizers and last-applied annotation.

--storage is a member's backup path (status.backupPath of its VolumeBackupMember, or the
VolumeBackup's storage prefix and the data plane's name). Every manifest is checked as it is
read: a storage holding a malformed or oversized one, or a backupmeta whose list is malformed,
fails with "invalid metadata".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	f := cmd.Flags()
	o.session.Register(f)
	f.StringSliceVar(&o.kinds, "kind", nil, "print only these kinds (e.g. TidbCluster,TidbMonitor)")
	f.BoolVar(&o.list, "list", false, "print the manifests' keys, one a line, instead of their content")
	f.StringVar(&o.forRestore, "for-restore", "", "print the TidbClusters ready for a restore into this data-plane namespace (recovery mode, no source status or server fields)")
	f.StringVar(&o.tcName, "tc", "", "with --for-restore: the restored TidbClusters' name (default: the saved name)")
	return cmd
}

func (o *manifestsOptions) run(cmd *cobra.Command) error {
	if err := o.session.Validate(); err != nil {
		return err
	}
	if o.forRestore == "" && o.tcName != "" {
		return errors.New("--tc goes with --for-restore")
	}
	if o.forRestore != "" && (o.list || len(o.kinds) > 0) {
		return errors.New("--for-restore prints the TidbClusters only: it takes neither --list nor --kind")
	}
	ctx := cmd.Context()
	store, err := o.session.Store(ctx)
	if err != nil {
		return err
	}
	ms, err := store.Manifests(ctx)
	if err != nil {
		return err
	}
	if o.forRestore != "" {
		o.kinds = []string{tidbcluster.TidbClusterKind}
	}
	if len(o.kinds) > 0 {
		ms = slices.DeleteFunc(ms, func(m meta.Manifest) bool { return !slices.Contains(o.kinds, m.Kind) })
	}
	if len(ms) == 0 {
		return fmt.Errorf("no manifest in %s", o.session.Storage)
	}
	out := cmd.OutOrStdout()
	for i, m := range ms {
		if o.list {
			if _, err := fmt.Fprintln(out, m.Key); err != nil {
				return err
			}
			continue
		}
		if i > 0 {
			if _, err := fmt.Fprintln(out, "---"); err != nil {
				return err
			}
		}
		body := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(m.YAML)), "---"))
		if o.forRestore != "" {
			u, err := tidbcluster.ForRestore(m, o.forRestore, o.tcName)
			if err != nil {
				return err
			}
			b, err := yaml.Marshal(u.Object)
			if err != nil {
				return err
			}
			body = strings.TrimSpace(string(b))
		}
		if _, err := fmt.Fprintf(out, "# %s\n%s\n", m.Key, body); err != nil {
			return err
		}
	}
	return nil
}
