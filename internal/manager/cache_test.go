package manager

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/plane"
)

// TestControlCacheStripsOnlyManagedFields: the control-plane cache keeps a VolumeBackup whole but
// for its managedFields (the controllers read and merge-patch the rest), in the namespace asked.
func TestControlCacheStripsOnlyManagedFields(t *testing.T) {
	b := backupSpec("whole", "dp1", "dp2")
	b.Labels, b.Annotations, b.Finalizers = map[string]string{"team": "db"}, map[string]string{"note": "x"}, []string{"f"}
	b.Status.Initializer, b.Status.Conditions = "dp1", []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "R", Message: "m"}}
	want := b.DeepCopy()
	b.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	o := controlCache("")
	got, err := o.DefaultTransform(b)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("cached VolumeBackup (-want +got):\n%s", d)
	}
	if o.DefaultNamespaces != nil {
		t.Errorf("namespaces %v, want all", o.DefaultNamespaces)
	}
	if ns := controlCache("team-a").DefaultNamespaces; len(ns) != 1 || ns["team-a"].LabelSelector != nil {
		t.Errorf("namespaces %v, want team-a", ns)
	}
}

// TestMemberStatusTooLargeFailsItsBackup: a member that reports a status.backupPath longer than
// the manager keeps (plane.MaxMemberBackupPath) fails its backup, the reason naming the field,
// instead of being kept whole in the manager's cache.
func TestMemberStatusTooLargeFailsItsBackup(t *testing.T) {
	l := startManager(t)
	ctx := context.Background()
	ensureNamespace(t, l.dp1.Client, "tidb")
	b := backupSpec("oversized", "dp1")
	b.Spec.Clusters[0].TCName = "oversized" // a TidbCluster of its own: no pause gate shared with other tests
	if err := l.control.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	eventually(t, "initializer member in dp1", func() error {
		if backupMember(t, l.dp1, "oversized") == nil {
			return fmt.Errorf("no member")
		}
		return nil
	})
	reportBackup(t, l.dp1, "oversized", time.Now(), func(s *dpv1alpha1.VolumeBackupMemberStatus) {
		s.BackupPath = strings.Repeat("p", plane.MaxMemberBackupPath+1)
	})
	want := fmt.Sprintf("member in dp1 failed: %s: status.backupPath is %d bytes, more than the %d the manager reads of it",
		plane.StatusTooLargeReason, plane.MaxMemberBackupPath+1, plane.MaxMemberBackupPath)
	eventually(t, "the backup failed naming status.backupPath", func() error {
		var got fedv1alpha1.VolumeBackup
		if err := l.control.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "oversized"}, &got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, fedv1alpha1.VolumeBackupFailedCondition)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != fedv1alpha1.MemberFailedReason || !strings.HasPrefix(c.Message, want) {
			return fmt.Errorf("Failed %+v", c)
		}
		if len(got.Status.Backups) != 1 || got.Status.Backups[0].BackupPath != "" || got.Status.Backups[0].Reason != plane.StatusTooLargeReason {
			return fmt.Errorf("backups %+v", got.Status.Backups)
		}
		return nil
	})
}
