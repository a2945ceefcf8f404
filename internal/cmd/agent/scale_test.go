package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/controller/federation"
	"github.com/fedbr/fedbr/internal/testenv"
)

// TestScale measures the agent after months of schedules (FEDBR_SCALE=1; `make
// bench-scale-controllers`): 1,000 complete backup members, each with its pause, snapshot (10
// volumes) and size reports, and 50 complete restore members in its data plane, the agent
// (re)started over them. It reports the agent's own heap (in use after a GC, above the test's
// before the start) and the process's RSS growth, how long until its controllers are idle, and
// each controller's reconciles. It asserts nothing of the figures (run it on a quiet machine).
// FEDBR_SCALE_MEMBERS changes the number of backup members.
func TestScale(t *testing.T) {
	if os.Getenv("FEDBR_SCALE") == "" {
		t.Skip("a measurement: FEDBR_SCALE=1 (make bench-scale-controllers)")
	}
	n, restores := 1000, 50
	if v, err := strconv.Atoi(os.Getenv("FEDBR_SCALE_MEMBERS")); err == nil && v > 0 {
		n = v
	}
	env, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()
	c := env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tidb"}}); err != nil {
		t.Fatal(err)
	}
	tc := &pcv1alpha1.TidbCluster{ObjectMeta: metav1.ObjectMeta{Name: "basic", Namespace: "tidb"},
		Spec: pcv1alpha1.TidbClusterSpec{TiKV: &pcv1alpha1.ComponentSpec{Replicas: 3}}}
	if err := c.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	now := time.Now().UTC().Truncate(time.Second)
	for i := range n {
		owner := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("b%04d", i), Namespace: "scale", UID: types.UID(fmt.Sprintf("uid-b%04d", i))}}
		m := &dpv1alpha1.VolumeBackupMember{ObjectMeta: federation.NewMeta(owner, fedv1alpha1.MemberName(owner.Name), "tidb", now),
			Spec: dpv1alpha1.VolumeBackupMemberSpec{VolumeBackup: owner.Name, K8sClusterName: "dp1", TCName: "basic", TCNamespace: "tidb",
				Phase: dpv1alpha1.BackupMemberTeardown, BackupTS: testenv.ScaleTS, Template: fedv1alpha1.VolumeBackupMemberSpec{
					StorageProvider: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "backups", Prefix: "scale/" + owner.Name}}}}}
		m.Finalizers = []string{"dataplane.fedbr.io/agent"}
		if err := c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		m.Status = testenv.CompleteBackupMemberStatus("s3://backups/scale/"+owner.Name+"-dp1", now)
		m.Status.ObservedGeneration = m.Generation
		if err := c.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range restores {
		owner := &fedv1alpha1.VolumeRestore{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("r%02d", i), Namespace: "scale", UID: types.UID(fmt.Sprintf("uid-r%02d", i))}}
		m := &dpv1alpha1.VolumeRestoreMember{ObjectMeta: federation.NewMeta(owner, fedv1alpha1.MemberName(owner.Name), "tidb", now),
			Spec: dpv1alpha1.VolumeRestoreMemberSpec{VolumeRestore: owner.Name, K8sClusterName: "dp1", TCName: "basic", TCNamespace: "tidb",
				Phase: dpv1alpha1.RestoreMemberRestoreFinish, DataMember: true, ResolvedTS: testenv.ScaleTS,
				Backup: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "backups", Prefix: "scale/b0000-dp1"}}}}
		m.Finalizers = []string{"dataplane.fedbr.io/agent"}
		if err := c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		m.Status = testenv.CompleteRestoreMemberStatus(true, now)
		m.Status.ObservedGeneration = m.Generation
		if err := c.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("populated %d backup members and %d restore members in %s", n, restores, time.Since(started).Round(time.Second))

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := testenv.WriteKubeconfig(kubeconfig, map[string]*testenv.Env{"dp1": env}); err != nil {
		t.Fatal(err)
	}
	heapBefore, rssBefore := testenv.HeapInUse(), testenv.RSS(t)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	startedAgent := time.Now()
	go func() {
		cmd := NewCmd()
		cmd.SetArgs([]string{"--kubeconfig", kubeconfig, "--context", "dp1", "--k8s-cluster-name", "dp1", "--image", "fedbr:scale",
			"--region", "us-west-2", "--orphan-sweep-interval", "0", "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
			"--leader-elect=false"})
		cmd.SetOut(&strings.Builder{})
		done <- cmd.ExecuteContext(runCtx)
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	idle := testenv.WaitIdle(t)
	heapAfter, rssAfter := testenv.HeapInUse(), testenv.RSS(t)
	var b strings.Builder
	fmt.Fprintf(&b, "agent over %d backup members and %d restore members in its plane:\n", n, restores)
	fmt.Fprintf(&b, "  idle %s after its start; heap in use +%.0f MiB, RSS +%.0f MiB (peak RSS of the test process %.0f MiB)\n",
		idle.Sub(startedAgent).Round(100*time.Millisecond), float64(heapAfter-heapBefore)/(1<<20), float64(rssAfter-rssBefore)/(1<<20), float64(testenv.PeakRSS(t))/(1<<20))
	b.WriteString(testenv.ReconcileTable(t))
	t.Log(b.String())
}
