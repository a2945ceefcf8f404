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

// manyBackups is n finished backups of TidbClusters tc-0 … tc-(n-1) in two planes, and, of
// tc-shared, a running one (a), one waiting for its pause (b) and a finished one.
func manyBackups(t testing.TB, n int) (client.Client, *fedv1alpha1.VolumeBackup, *fedv1alpha1.VolumeBackup) {
	s := runtime.NewScheme()
	if err := fedv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(s).WithIndex(&fedv1alpha1.VolumeBackup{}, ClusterIndex, clusterKeys)
	backup := func(name, tc string, phase fedv1alpha1.VolumeBackupPhase) *fedv1alpha1.VolumeBackup {
		v := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tidb", UID: types.UID(name)}}
		for _, p := range []string{"az1", "az2"} {
			v.Spec.Clusters = append(v.Spec.Clusters, fedv1alpha1.VolumeBackupMemberCluster{K8sClusterName: p, TCName: tc, TCNamespace: "tidb"})
		}
		v.Status.Phase = phase
		if phase == fedv1alpha1.VolumeBackupComplete {
			v.Status.Conditions = []metav1.Condition{{Type: fedv1alpha1.VolumeBackupCompleteCondition, Status: metav1.ConditionTrue}}
		}
		b.WithObjects(v)
		return v
	}
	for i := range n {
		backup(fmt.Sprintf("old-%d", i), fmt.Sprintf("tc-%d", i), fedv1alpha1.VolumeBackupComplete)
	}
	backup("old-shared", "tc-shared", fedv1alpha1.VolumeBackupComplete)
	a := backup("a", "tc-shared", fedv1alpha1.VolumeBackupRunning)
	w := backup("b", "tc-shared", fedv1alpha1.VolumeBackupPending)
	return b.Build(), a, w
}

// TestGateReadsOnlyTheSameCluster: the pause gate (observe's others, and the backups a
// change wakes) reads the backups of the same TidbClusters through the ClusterIndex, not every
// VolumeBackup of the control plane: a schedule that has run for months keeps thousands.
func TestGateReadsOnlyTheSameCluster(t *testing.T) {
	c, a, waiting := manyBackups(t, 200)
	r := &listCounter{Reader: c}
	o, err := observe(context.Background(), r, &plane.Set{}, waiting, &written{})
	if err != nil {
		t.Fatal(err)
	}
	var others []string
	for _, b := range o.Others {
		others = append(others, b.Name)
	}
	slices.Sort(others)
	if !slices.Equal(others, []string{"a", "old-shared"}) {
		t.Errorf("the gate's others %v, want the backups of tc-shared: [a old-shared]", others)
	}
	if got := waiters(context.Background(), r, a); len(got) != 1 || got[0].Name != "b" {
		t.Errorf("a change of a wakes %v, want b only", got)
	}
	for _, n := range r.listed {
		if n > 3 {
			t.Errorf("a List returned %d VolumeBackups (%v): the gate read every backup, not the ClusterIndex's", n, r.listed)
			break
		}
	}
}
