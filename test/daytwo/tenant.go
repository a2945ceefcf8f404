package daytwo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/lab/demo"
	"github.com/fedbr/fedbr/internal/lab/env"
	"github.com/fedbr/fedbr/internal/meta"
)

// otherTenant is the namespace of the cross-tenant scenario's tenant, in the control plane
// and in every data plane: the agents' default policy maps it to itself only, and its storage
// root is its own name.
const otherTenant = "mallory"

// foreignSnapshot is what restore-volumes says of a snapshot tagged with a namespace the
// member's owner may not act on (meta.ErrForeignSnapshot), as the restore's condition carries it.
var foreignSnapshot = strings.TrimPrefix(meta.ErrForeignSnapshot.Error(), meta.ErrNotOwned.Error()+": ")

// crossTenant: another tenant, with its own namespaces, tries to restore the lab's backup
// into its own TidbClusters, through every field it controls. Naming the backup's storage is
// refused by the agents' policy before any volume (StorageNotAllowed); a copy of the backup's
// metadata under the tenant's own prefix (what it may write) is refused by restore-volumes,
// whose snapshots carry another namespace, before any volume. No volume is made from the
// backup's snapshots for the tenant, and the backup then restores exactly where its own
// namespace may restore.
func (d *run) crossTenant(ctx context.Context, name string) (string, error) {
	b, err := d.Backup(ctx)
	if err != nil {
		return "", err
	}
	if err := d.WaitTransfersAfter(ctx, b); err != nil {
		return "", err
	}
	control := d.Kube()[d.Lab().Control]
	if err := env.EnsureNamespace(ctx, control, otherTenant, "restricted"); err != nil {
		return "", err
	}
	tcs, err := env.RecoveryTidbClusters(d.Lab(), d.Options().RestoreTCName, otherTenant, d.Options().TiKVPerPlane, d.Options().RaftVolumes)
	if err != nil {
		return "", err
	}
	if err := d.CreateTCs(ctx, otherTenant, tcs); err != nil {
		return "", err
	}
	before, err := d.awsStats(ctx)
	if err != nil {
		return "", err
	}
	// The tenant's copy of the backup's metadata, under its own prefix.
	copied := map[string]fedv1alpha1.StorageProvider{}
	for _, dp := range d.Lab().DataPlanes {
		src := b.Spec.Template.MemberStorage(dp.Cluster)
		dst := src.WithPrefix(func(string) string { return otherTenant + "/" + name + "-copy-" + dp.Cluster })
		root := filepath.Join(d.Lab().AWS.Dir, "s3", demo.Bucket, "objects")
		if err := copyTree(filepath.Join(root, filepath.FromSlash(src.S3.Prefix)), filepath.Join(root, filepath.FromSlash(dst.S3.Prefix))); err != nil {
			return "", fmt.Errorf("copy the metadata of %s: %w", dp.Cluster, err)
		}
		copied[dp.Cluster] = dst
	}
	attempts := []struct {
		name    string
		storage func(plane string) fedv1alpha1.StorageProvider
		want    string
	}{
		{name + "-prefix", b.Spec.Template.MemberStorage, dpv1alpha1.StorageNotAllowedReason},
		{name + "-copy", func(plane string) fedv1alpha1.StorageProvider { return copied[plane] }, foreignSnapshot},
	}
	var outcomes []string
	for _, a := range attempts {
		r := &fedv1alpha1.VolumeRestore{ObjectMeta: metav1.ObjectMeta{Name: a.name, Namespace: otherTenant}}
		for _, dp := range d.Lab().DataPlanes {
			r.Spec.Clusters = append(r.Spec.Clusters, fedv1alpha1.VolumeRestoreMemberCluster{K8sClusterName: dp.Cluster, TCName: d.Options().RestoreTCName,
				TCNamespace: otherTenant, Backup: a.storage(dp.Cluster)})
		}
		if err := control.Create(ctx, r); err != nil {
			return "", fmt.Errorf("create VolumeRestore %s/%s: %w", otherTenant, a.name, err)
		}
		var msg string
		err := d.Poll(ctx, "VolumeRestore "+a.name, func() (bool, string, error) {
			if err := control.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
				return false, "", err
			}
			switch r.Status.Phase {
			case fedv1alpha1.VolumeRestoreComplete:
				return false, "", fmt.Errorf("tenant %s restored another namespace's backup through %s", otherTenant, a.name)
			case fedv1alpha1.VolumeRestoreFailed:
				msg = demo.ConditionMessage(r.Status.Conditions, fedv1alpha1.VolumeRestoreFailedCondition)
				return true, "", nil
			}
			return false, "restore " + string(r.Status.Phase), nil
		})
		if err != nil {
			return "", err
		}
		if !strings.Contains(msg, a.want) {
			return "", fmt.Errorf("VolumeRestore %s/%s failed with %q; want %s", otherTenant, a.name, msg, a.want)
		}
		outcomes = append(outcomes, a.name+": "+a.want)
		if err := d.DeleteAndWait(ctx, control, r); err != nil {
			return "", err
		}
	}
	if err := d.noVolumesSince(ctx, before, fmt.Sprintf("tenant %s's refused restores", otherTenant)); err != nil {
		return "", err
	}
	if err := d.DeleteRestored(ctx, otherTenant); err != nil {
		return "", err
	}
	if err := client.IgnoreNotFound(control.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: otherTenant}})); err != nil {
		return "", err
	}
	// The backup is untouched: it restores exactly, from its own namespace.
	if err := d.restoreExactly(ctx, b, name+"-restored"); err != nil {
		return "", err
	}
	return fmt.Sprintf("refused before any volume (%s); the backup then restored exactly", strings.Join(outcomes, "; ")), nil
}

// copyTree copies the files under src to dst, as the tenant's PutObject calls would.
func copyTree(src, dst string) error {
	n := 0
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
			return err
		}
		n++
		return os.WriteFile(filepath.Join(dst, rel), data, 0o600)
	})
	if err == nil && n == 0 {
		err = errors.New("no object under " + src)
	}
	return err
}
