package volumebackup

import (
	"context"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/plane"
)

// listCounter is a Reader that counts the VolumeBackups each List returns.
type listCounter struct {
	client.Reader
	listed []int
}

func (l *listCounter) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := l.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	if bl, ok := list.(*fedv1alpha1.VolumeBackupList); ok {
		l.listed = append(l.listed, len(bl.Items))
	}
	return nil
}

// manyBackups is, of TidbCluster tc-shared in two planes, n finished backups whose pause was
// lifted, a failed one whose pause still holds, a running one (a) and one waiting for its pause
// (b); and a running backup of another TidbCluster.
func manyBackups(t testing.TB, n int) (client.Client, *fedv1alpha1.VolumeBackup, *fedv1alpha1.VolumeBackup) {
	s := runtime.NewScheme()
	if err := fedv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(s).WithIndex(&fedv1alpha1.VolumeBackup{}, ClusterIndex, clusterKeys)
	backup := func(name, tc string, phase fedv1alpha1.VolumeBackupPhase, gcPaused metav1.ConditionStatus) *fedv1alpha1.VolumeBackup {
		v := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tidb", UID: types.UID(name)}}
		for _, p := range []string{"az1", "az2"} {
			v.Spec.Clusters = append(v.Spec.Clusters, fedv1alpha1.VolumeBackupMemberCluster{K8sClusterName: p, TCName: tc, TCNamespace: "tidb"})
		}
		v.Status.Phase = phase
		switch phase {
		case fedv1alpha1.VolumeBackupComplete:
			v.Status.Conditions = []metav1.Condition{{Type: fedv1alpha1.VolumeBackupCompleteCondition, Status: metav1.ConditionTrue}}
		case fedv1alpha1.VolumeBackupFailed:
			v.Status.Conditions = []metav1.Condition{{Type: fedv1alpha1.VolumeBackupFailedCondition, Status: metav1.ConditionTrue}}
		}
		if gcPaused != "" {
			v.Status.Conditions = append(v.Status.Conditions, metav1.Condition{Type: fedv1alpha1.VolumeBackupGCPausedCondition, Status: gcPaused})
		}
		b.WithObjects(v)
		return v
	}
	for i := range n {
		backup(fmt.Sprintf("old-%d", i), "tc-shared", fedv1alpha1.VolumeBackupComplete, metav1.ConditionFalse)
	}
	backup("held", "tc-shared", fedv1alpha1.VolumeBackupFailed, metav1.ConditionTrue)
	backup("other", "tc-other", fedv1alpha1.VolumeBackupRunning, metav1.ConditionTrue)
	a := backup("a", "tc-shared", fedv1alpha1.VolumeBackupRunning, metav1.ConditionTrue)
	w := backup("b", "tc-shared", fedv1alpha1.VolumeBackupPending, "")
	return b.Build(), a, w
}

// TestGateReadsOnlyTheSameCluster: the pause gate (observe's others, and the backups a
// change wakes) reads through the ClusterIndex only the backups of the same TidbClusters that
// have not finished or still hold their pause, not every VolumeBackup of the control plane, nor
// every backup of the cluster: a schedule that has run for months keeps thousands, and every
// backup's status write asks for the others (issue 44).
func TestGateReadsOnlyTheSameCluster(t *testing.T) {
	c, a, waiting := manyBackups(t, 200)
	r := &listCounter{Reader: c}
	o, err := observe(context.Background(), r, &plane.Set{}, waiting)
	if err != nil {
		t.Fatal(err)
	}
	var others []string
	for _, b := range o.Others {
		others = append(others, b.Name)
	}
	slices.Sort(others)
	if !slices.Equal(others, []string{"a", "held"}) {
		t.Errorf("the gate's others %v, want the backups of tc-shared that may hold a pause: [a held]", others)
	}
	if got := waiters(context.Background(), r, a); len(got) != 1 || got[0].Name != "b" {
		t.Errorf("a change of a wakes %v, want b only", got)
	}
	for _, n := range r.listed {
		if n > 3 {
			t.Errorf("a List returned %d VolumeBackups (%v): the gate read finished backups, or every backup", n, r.listed)
			break
		}
	}
}
