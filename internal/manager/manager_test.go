package manager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	ctrl "sigs.k8s.io/controller-runtime"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/controller/volumebackupschedule"
	"github.com/fedbr/fedbr/internal/metrics"
	"github.com/fedbr/fedbr/internal/metricsauth"
	"github.com/fedbr/fedbr/internal/testenv"
)

// lab is a control plane and two data planes, each a real API server, with the manager running.
type lab struct {
	control, dp1, dp2 *testenv.Env
	kubeconfig        string
}

var shared *lab

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	code := testenv.RunMain(m, func(control *testenv.Env) {
		dp1, err := testenv.New()
		if err != nil {
			panic(err)
		}
		dp2, err := testenv.New()
		if err != nil {
			_ = dp1.Stop()
			panic(err)
		}
		shared = &lab{control: control, dp1: dp1, dp2: dp2}
	})
	if shared != nil { // the data planes' API servers outlive RunMain's control plane
		for _, e := range []*testenv.Env{shared.dp1, shared.dp2} {
			if err := e.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "stopping a data plane's API server:", err)
				code = max(code, 1)
			}
		}
	}
	os.Exit(code)
}

// startManager runs the manager over dp1 and dp2 until the test ends.
func startManager(t *testing.T) *lab {
	return startManagerOver(t, map[string]*testenv.Env{"dp1": shared.dp1, "dp2": shared.dp2})
}

func startManagerOver(t *testing.T, planes map[string]*testenv.Env) *lab {
	return startManagerOn(t, planes, nil)
}

// startManagerOn is startManagerOver with the kubeconfig changed by edit before the manager
// reads it.
func startManagerOn(t *testing.T, planes map[string]*testenv.Env, edit func(*clientcmdapi.Config)) *lab {
	t.Helper()
	return runManager(t, planes, edit, testr.New(t))
}

// runManager is startManagerOn logging to log.
func runManager(t *testing.T, planes map[string]*testenv.Env, edit func(*clientcmdapi.Config), log logr.Logger) *lab {
	t.Helper()
	l := shared
	l.kubeconfig = filepath.Join(t.TempDir(), "planes")
	if err := testenv.WriteKubeconfig(l.kubeconfig, planes); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		cfg, err := clientcmd.LoadFromFile(l.kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		edit(cfg)
		if err := clientcmd.WriteToFile(*cfg, l.kubeconfig); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Control: l.control.Config, Kubeconfig: l.kubeconfig, Metrics: metricsauth.Flags{Addr: "0"}, HealthAddr: "0",
			ProbeInterval: 200 * time.Millisecond, ReloadCheck: 200 * time.Millisecond, Log: log})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return l
}

func ensureNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := client.IgnoreAlreadyExists(c.Create(context.Background(), ns)); err != nil {
		t.Fatal(err)
	}
}

// eventually polls f until it returns nil or the deadline passes.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func backupMember(t *testing.T, e *testenv.Env, name string) *dpv1alpha1.VolumeBackupMember {
	t.Helper()
	var m dpv1alpha1.VolumeBackupMember
	if err := e.Client.Get(context.Background(), types.NamespacedName{Namespace: "tidb", Name: fedv1alpha1.MemberName(name)}, &m); err != nil {
		return nil
	}
	return &m
}

// report sets conditions (True, at the given times) and fields on a member's status, as an
// agent would.
func reportBackup(t *testing.T, e *testenv.Env, name string, at time.Time, mutate func(*dpv1alpha1.VolumeBackupMemberStatus), conds ...string) {
	t.Helper()
	eventually(t, "report on "+name, func() error {
		m := backupMember(t, e, name)
		if m == nil {
			return fmt.Errorf("no member")
		}
		if mutate != nil {
			mutate(&m.Status)
		}
		for _, c := range conds {
			meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.NewTime(at)})
			reportStep(&m.Status, c, at)
		}
		return e.Client.Status().Update(context.Background(), m)
	})
}

// reportStep plays the step under the agent's condition c: the pause's or the snapshot step's
// own report in status.steps, which the manager reads (the commit ts is the status's).
func reportStep(st *dpv1alpha1.VolumeBackupMemberStatus, c string, at time.Time) {
	ts, _ := strconv.ParseUint(st.CommitTs, 10, 64)
	upsert := func(name string, f func(*dpv1alpha1.StepReport)) {
		for i := range st.Steps {
			if st.Steps[i].Name == name {
				f(&st.Steps[i])
				return
			}
		}
		s := dpv1alpha1.StepReport{Name: name}
		f(&s)
		st.Steps = append(st.Steps, s)
	}
	mt := metav1.NewMicroTime(at)
	switch c {
	case dpv1alpha1.BackupMemberArmedCondition:
		upsert(dpv1alpha1.StepSnapshot, func(s *dpv1alpha1.StepReport) { s.Phase = "Armed" })
	case dpv1alpha1.BackupMemberInitializedCondition:
		upsert(dpv1alpha1.StepPause, func(s *dpv1alpha1.StepReport) {
			s.Phase, s.BackupTS, s.GCPausedAt = dpv1alpha1.PausePhaseReady, ts, &mt
		})
	case dpv1alpha1.BackupMemberGCResumedCondition:
		upsert(dpv1alpha1.StepPause, func(s *dpv1alpha1.StepReport) { s.Phase, s.LiftedAt = dpv1alpha1.PausePhaseStopped, &mt })
	case dpv1alpha1.BackupMemberSnapshotsCreatedCondition:
		upsert(dpv1alpha1.StepSnapshot, func(s *dpv1alpha1.StepReport) { s.Phase, s.StartedAt = "Started", &mt })
	case dpv1alpha1.BackupMemberCompleteCondition:
		upsert(dpv1alpha1.StepSnapshot, func(s *dpv1alpha1.StepReport) {
			s.Phase, s.CompletedAt, s.BackupTS = "Completed", &mt, ts
			s.Result = &runtime.RawExtension{Raw: []byte(`{"resolvedTS":` + st.CommitTs + `}`)}
		})
	}
}

func backupSpec(name string, clusters ...string) *fedv1alpha1.VolumeBackup {
	b := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	for _, c := range clusters {
		b.Spec.Clusters = append(b.Spec.Clusters, fedv1alpha1.VolumeBackupMemberCluster{K8sClusterName: c, TCName: "basic", TCNamespace: "tidb"})
	}
	b.Spec.Template.StorageProvider = fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "backups", Prefix: name}}
	return b
}

func TestBackupWalksTheProtocolWithAgentsPlayedByTheTest(t *testing.T) {
	l := startManager(t)
	ctx := context.Background()
	for _, e := range []*testenv.Env{l.dp1, l.dp2} {
		ensureNamespace(t, e.Client, "tidb")
	}
	if err := l.control.Client.Create(ctx, backupSpec("nightly", "dp1", "dp2")); err != nil {
		t.Fatal(err)
	}

	eventually(t, "initializer member in dp1", func() error {
		m := backupMember(t, l.dp1, "nightly")
		if m == nil || m.Spec.Phase != dpv1alpha1.BackupMemberInitialize {
			return fmt.Errorf("member %+v", m)
		}
		if m.Spec.Template.S3 == nil || m.Spec.Template.S3.Prefix != "nightly-dp1" {
			return fmt.Errorf("member storage %+v, want prefix nightly-dp1", m.Spec.Template.S3)
		}
		if m.Labels[dpv1alpha1.LabelOwnerName] != "nightly" || m.Labels[dpv1alpha1.LabelOwnerNamespace] != "default" {
			return fmt.Errorf("labels %v", m.Labels)
		}
		return nil
	})
	eventually(t, "dp2's member created armed: execute, no backup ts before the pause is ready", func() error {
		m := backupMember(t, l.dp2, "nightly")
		if m == nil || m.Spec.Phase != dpv1alpha1.BackupMemberExecute || m.Spec.BackupTS != "" {
			return fmt.Errorf("member %+v", m)
		}
		return nil
	})

	t0 := time.Now().Truncate(time.Second)
	// The pause waits for every snapshot step to be armed.
	reportBackup(t, l.dp1, "nightly", t0, nil, dpv1alpha1.BackupMemberArmedCondition)
	eventually(t, "the backup waits for dp2 alone to be armed", func() error {
		var b fedv1alpha1.VolumeBackup
		if err := l.control.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "nightly"}, &b); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(b.Status.Conditions, fedv1alpha1.VolumeBackupReadyCondition); c == nil ||
			c.Reason != fedv1alpha1.VolumeBackupArmingReason || !strings.HasSuffix(c.Message, "waiting for [dp2]") {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
	if m := backupMember(t, l.dp1, "nightly"); m == nil || m.Spec.StartPause {
		t.Fatalf("the pause was started with dp2 not armed: %+v", m)
	}
	reportBackup(t, l.dp2, "nightly", t0, nil, dpv1alpha1.BackupMemberArmedCondition)
	eventually(t, "the initializer starts its pause once every member is armed", func() error {
		if m := backupMember(t, l.dp1, "nightly"); m == nil || !m.Spec.StartPause {
			return fmt.Errorf("member %+v", m)
		}
		return nil
	})
	reportBackup(t, l.dp1, "nightly", t0, func(s *dpv1alpha1.VolumeBackupMemberStatus) { s.CommitTs = "1000" }, dpv1alpha1.BackupMemberInitializedCondition)
	start := time.Now()
	eventually(t, "both members execute at the initializer's ts", func() error {
		for _, e := range []*testenv.Env{l.dp1, l.dp2} {
			m := backupMember(t, e, "nightly")
			if m == nil || m.Spec.Phase != dpv1alpha1.BackupMemberExecute || m.Spec.BackupTS != "1000" {
				return fmt.Errorf("member %+v", m)
			}
		}
		return nil
	})
	t.Logf("members executing %s after the pause was reported ready", time.Since(start).Round(time.Millisecond))

	for _, e := range []*testenv.Env{l.dp1, l.dp2} {
		reportBackup(t, e, "nightly", t0, nil, dpv1alpha1.BackupMemberSnapshotsCreatedCondition)
	}
	eventually(t, "the initializer is asked to resume GC", func() error {
		if m := backupMember(t, l.dp1, "nightly"); m == nil || !m.Spec.ResumeGC {
			return fmt.Errorf("member %+v", m)
		}
		return nil
	})
	reportBackup(t, l.dp1, "nightly", t0.Add(2*time.Second), nil, dpv1alpha1.BackupMemberGCResumedCondition)
	for i, e := range []*testenv.Env{l.dp1, l.dp2} {
		reportBackup(t, e, "nightly", t0, func(s *dpv1alpha1.VolumeBackupMemberStatus) {
			s.CommitTs, s.BackupSize = "1000", int64(1000*(i+1))
		}, dpv1alpha1.BackupMemberCompleteCondition)
	}

	var b fedv1alpha1.VolumeBackup
	eventually(t, "backup complete", func() error {
		if err := l.control.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "nightly"}, &b); err != nil {
			return err
		}
		if b.Status.Phase != fedv1alpha1.VolumeBackupComplete {
			return fmt.Errorf("phase %s", b.Status.Phase)
		}
		return nil
	})
	if b.Status.CommitTs != "1000" || b.Status.BackupSize != 3000 || b.Status.GCPauseSeconds != "2.000" || b.Status.Initializer != "dp1" {
		t.Errorf("status: commitTs %s size %d gcPause %s initializer %s", b.Status.CommitTs, b.Status.BackupSize, b.Status.GCPauseSeconds, b.Status.Initializer)
	}
	eventually(t, "members torn down", func() error {
		for _, e := range []*testenv.Env{l.dp1, l.dp2} {
			if m := backupMember(t, e, "nightly"); m == nil || m.Spec.Phase != dpv1alpha1.BackupMemberTeardown {
				return fmt.Errorf("member %+v", m)
			}
		}
		return nil
	})

	if err := l.control.Client.Delete(ctx, &b); err != nil {
		t.Fatal(err)
	}
	eventually(t, "members and backup deleted", func() error {
		for _, e := range []*testenv.Env{l.dp1, l.dp2} {
			if backupMember(t, e, "nightly") != nil {
				return fmt.Errorf("a member remains")
			}
		}
		err := l.control.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "nightly"}, &b)
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		if err == nil {
			return fmt.Errorf("backup still there, finalizers %v", b.Finalizers)
		}
		return nil
	})
}

// TestSecondBackupOfTheClusterWaitsForTheFirstsPause: a second backup of the same TidbClusters
// creates no member while the first may pause the cluster, says which backup it waits for, and
// starts as soon as the first's pause is lifted (woken by the first's change, not by a timer:
// its own wake-up is pauseWaitTimeout away).
func TestSecondBackupOfTheClusterWaitsForTheFirstsPause(t *testing.T) {
	l := startManager(t)
	ctx := context.Background()
	for _, e := range []*testenv.Env{l.dp1, l.dp2} {
		ensureNamespace(t, e.Client, "tidb")
	}
	// A TidbCluster of its own, so no other test's backup of "basic" takes part.
	gated := func(b *fedv1alpha1.VolumeBackup) *fedv1alpha1.VolumeBackup {
		for i := range b.Spec.Clusters {
			b.Spec.Clusters[i].TCName = "gated"
		}
		return b
	}
	if err := l.control.Client.Create(ctx, gated(backupSpec("first", "dp1", "dp2"))); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first backup's initializer member", func() error {
		if backupMember(t, l.dp1, "first") == nil {
			return fmt.Errorf("no member")
		}
		return nil
	})
	if err := l.control.Client.Create(ctx, gated(backupSpec("second", "dp2", "dp1"))); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the second backup waits, naming the first", func() error {
		var b fedv1alpha1.VolumeBackup
		if err := l.control.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "second"}, &b); err != nil {
			return err
		}
		c := meta.FindStatusCondition(b.Status.Conditions, fedv1alpha1.VolumeBackupReadyCondition)
		if c == nil || c.Reason != "WaitingForBackup" || !strings.Contains(c.Message, "default/first") {
			return fmt.Errorf("ready %+v", c)
		}
		return nil
	})
	for _, e := range []*testenv.Env{l.dp1, l.dp2} {
		if backupMember(t, e, "second") != nil {
			t.Fatal("the waiting backup created a member")
		}
	}

	t0 := time.Now().Truncate(time.Second)
	for _, e := range []*testenv.Env{l.dp1, l.dp2} {
		reportBackup(t, e, "first", t0, nil, dpv1alpha1.BackupMemberArmedCondition)
	}
	reportBackup(t, l.dp1, "first", t0, func(s *dpv1alpha1.VolumeBackupMemberStatus) { s.CommitTs = "1000" }, dpv1alpha1.BackupMemberInitializedCondition)
	for _, e := range []*testenv.Env{l.dp1, l.dp2} {
		reportBackup(t, e, "first", t0, nil, dpv1alpha1.BackupMemberSnapshotsCreatedCondition)
	}
	eventually(t, "the first backup's initializer asked to resume GC", func() error {
		if m := backupMember(t, l.dp1, "first"); m == nil || !m.Spec.ResumeGC {
			return fmt.Errorf("member %+v", m)
		}
		return nil
	})
	if backupMember(t, l.dp2, "second") != nil {
		t.Fatal("the second backup started while the first held the pause")
	}
	reportBackup(t, l.dp1, "first", t0.Add(time.Second), nil, dpv1alpha1.BackupMemberGCResumedCondition)
	eventually(t, "the second backup starts once the first's pause is lifted", func() error {
		if m := backupMember(t, l.dp2, "second"); m == nil || m.Spec.Phase != dpv1alpha1.BackupMemberInitialize {
			return fmt.Errorf("member %+v", m)
		}
		return nil
	})
}

func TestUnknownPlaneFailsTheBackupWithAReason(t *testing.T) {
	l := startManager(t)
	ctx := context.Background()
	if err := l.control.Client.Create(ctx, backupSpec("typo", "dp1", "dp9")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "backup failed", func() error {
		var b fedv1alpha1.VolumeBackup
		if err := l.control.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "typo"}, &b); err != nil {
			return err
		}
		c := meta.FindStatusCondition(b.Status.Conditions, fedv1alpha1.VolumeBackupFailedCondition)
		if c == nil || c.Reason != "UnknownCluster" {
			return fmt.Errorf("failed condition %+v", c)
		}
		return nil
	})
	if backupMember(t, l.dp1, "typo") != nil {
		t.Error("a member was created for a backup that names an unknown plane")
	}
}

func restoreMember(e *testenv.Env, name string) *dpv1alpha1.VolumeRestoreMember {
	var m dpv1alpha1.VolumeRestoreMember
	if err := e.Client.Get(context.Background(), types.NamespacedName{Namespace: "tidb", Name: fedv1alpha1.MemberName(name)}, &m); err != nil {
		return nil
	}
	return &m
}

func reportRestore(t *testing.T, e *testenv.Env, name, ts string, conds ...string) {
	t.Helper()
	eventually(t, "report on "+name, func() error {
		m := restoreMember(e, name)
		if m == nil {
			return fmt.Errorf("no member")
		}
		for _, c := range conds {
			meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, Reason: "Test"})
		}
		if ts != "" {
			m.Status.CommitTs = ts
		}
		if slices.Contains(conds, dpv1alpha1.RestoreMemberDataCompleteCondition) {
			m.Status.RestoredTS = m.Spec.ResolvedTS // restore-data's echo of the ts it was given
		}
		return e.Client.Status().Update(context.Background(), m)
	})
}

func waitRestorePhase(t *testing.T, e *testenv.Env, name string, want dpv1alpha1.RestoreMemberPhase) {
	t.Helper()
	eventually(t, fmt.Sprintf("member %s in %s", name, want), func() error {
		if m := restoreMember(e, name); m == nil || m.Spec.Phase != want {
			return fmt.Errorf("member %+v", m)
		}
		return nil
	})
}

func TestRestoreRunsDataOnTheSmallestTSAndFinishesEverywhere(t *testing.T) {
	l := startManager(t)
	ctx := context.Background()
	for _, e := range []*testenv.Env{l.dp1, l.dp2} {
		ensureNamespace(t, e.Client, "tidb")
	}
	r := &fedv1alpha1.VolumeRestore{ObjectMeta: metav1.ObjectMeta{Name: "back", Namespace: "default"}}
	for _, c := range []string{"dp1", "dp2"} {
		r.Spec.Clusters = append(r.Spec.Clusters, fedv1alpha1.VolumeRestoreMemberCluster{K8sClusterName: c, TCName: "basic", TCNamespace: "tidb",
			Backup: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "backups", Prefix: "nightly-" + c}}})
	}
	if err := l.control.Client.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	waitRestorePhase(t, l.dp1, "back", dpv1alpha1.RestoreMemberRestoreVolume)
	waitRestorePhase(t, l.dp2, "back", dpv1alpha1.RestoreMemberRestoreVolume)
	if m := restoreMember(l.dp2, "back"); m.Spec.Backup.S3 == nil || m.Spec.Backup.S3.Prefix != "nightly-dp2" {
		t.Errorf("dp2 member's backup %+v", m.Spec.Backup)
	}
	reportRestore(t, l.dp1, "back", "500", dpv1alpha1.RestoreMemberVolumeCompleteCondition, dpv1alpha1.RestoreMemberTikvCompleteCondition)
	reportRestore(t, l.dp2, "back", "400", dpv1alpha1.RestoreMemberVolumeCompleteCondition, dpv1alpha1.RestoreMemberTikvCompleteCondition)
	waitRestorePhase(t, l.dp2, "back", dpv1alpha1.RestoreMemberRestoreData)
	if m := restoreMember(l.dp1, "back"); m.Spec.Phase != dpv1alpha1.RestoreMemberRestoreVolume {
		t.Fatalf("dp1 moved to %s; only the smallest-ts member restores data", m.Spec.Phase)
	}
	if m := restoreMember(l.dp2, "back"); m.Spec.ResolvedTS != "400" {
		t.Fatalf("the data member's spec.resolvedTS %q: the go to restore data carries the decided 400", m.Spec.ResolvedTS)
	}
	reportRestore(t, l.dp2, "back", "", dpv1alpha1.RestoreMemberDataCompleteCondition)
	waitRestorePhase(t, l.dp1, "back", dpv1alpha1.RestoreMemberRestoreFinish)
	waitRestorePhase(t, l.dp2, "back", dpv1alpha1.RestoreMemberRestoreFinish)
	reportRestore(t, l.dp1, "back", "", dpv1alpha1.RestoreMemberCompleteCondition)
	reportRestore(t, l.dp2, "back", "", dpv1alpha1.RestoreMemberCompleteCondition)
	eventually(t, "restore complete", func() error {
		var got fedv1alpha1.VolumeRestore
		if err := l.control.Client.Get(ctx, client.ObjectKeyFromObject(r), &got); err != nil {
			return err
		}
		if got.Status.Phase != fedv1alpha1.VolumeRestoreComplete || got.Status.CommitTs != "400" {
			return fmt.Errorf("phase %s commitTs %s", got.Status.Phase, got.Status.CommitTs)
		}
		return nil
	})
}

// TestBrokenContextMarksOnlyThatPlaneUnreachable: a kubeconfig whose dp2 context cannot be
// loaded (certificate data that is no certificate) does not stop the manager: dp2 is reported
// unreachable — the metric, and ClusterUnreachable naming it on a backup that uses it — while a
// backup of dp1 alone goes on.
func TestBrokenContextMarksOnlyThatPlaneUnreachable(t *testing.T) {
	metrics.PlaneReachable.Reset()
	l := startManagerOn(t, map[string]*testenv.Env{"dp1": shared.dp1, "dp2": shared.dp2}, func(c *clientcmdapi.Config) {
		c.Clusters["dp2"].CertificateAuthorityData = []byte("not a certificate")
	})
	ctx := context.Background()
	ensureNamespace(t, l.dp1.Client, "tidb")
	if err := l.control.Client.Create(ctx, backupSpec("both-planes", "dp1", "dp2")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ClusterUnreachable naming dp2", func() error {
		var b fedv1alpha1.VolumeBackup
		if err := l.control.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "both-planes"}, &b); err != nil {
			return err
		}
		for _, c := range b.Status.Conditions {
			if c.Reason == fedv1alpha1.ClusterUnreachableReason && strings.Contains(c.Message, "dp2") {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", b.Status.Conditions)
	})
	if v := testutil.ToFloat64(metrics.PlaneReachable.WithLabelValues("dp2")); v != 0 {
		t.Errorf("fedbr_dataplane_reachable{plane=dp2} = %v, want 0", v)
	}
	alone := backupSpec("dp1-only", "dp1")
	alone.Spec.Clusters[0].TCName = "other" // another TiDB cluster: no pause gate shared with the first
	if err := l.control.Client.Create(ctx, alone); err != nil {
		t.Fatal(err)
	}
	eventually(t, "initializer member in dp1", func() error {
		if m := backupMember(t, l.dp1, "dp1-only"); m == nil || m.Spec.Phase != dpv1alpha1.BackupMemberInitialize {
			return fmt.Errorf("member %+v", m)
		}
		return nil
	})
}

func TestKubeconfigChangeAddsAPlaneWithoutRestart(t *testing.T) {
	metrics.PlaneReachable.Reset() // earlier tests' managers saw dp2
	l := startManagerOver(t, map[string]*testenv.Env{"dp1": shared.dp1})
	ctx := context.Background()
	eventually(t, "dp1 reachable", func() error {
		if v := testutil.ToFloat64(metrics.PlaneReachable.WithLabelValues("dp1")); v != 1 {
			return fmt.Errorf("fedbr_dataplane_reachable{plane=dp1} = %v", v)
		}
		return nil
	})
	if v := testutil.ToFloat64(metrics.PlaneReachable.WithLabelValues("dp2")); v != 0 {
		t.Fatalf("dp2 reachable before it is in the kubeconfig: %v", v)
	}
	ensureNamespace(t, l.dp2.Client, "tidb")
	if err := testenv.WriteKubeconfig(l.kubeconfig, map[string]*testenv.Env{"dp1": l.dp1, "dp2": l.dp2}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "dp2 reachable after the reload", func() error {
		if v := testutil.ToFloat64(metrics.PlaneReachable.WithLabelValues("dp2")); v != 1 {
			return fmt.Errorf("fedbr_dataplane_reachable{plane=dp2} = %v", v)
		}
		return nil
	})
	// A TidbCluster of its own: an earlier test's backup of "basic" in dp2 (both-planes) is not
	// failed as naming an unknown plane if the reload comes first, and would hold the pause gate.
	reloaded := backupSpec("after-reload", "dp2")
	reloaded.Spec.Clusters[0].TCName = "reloaded"
	if err := l.control.Client.Create(ctx, reloaded); err != nil {
		t.Fatal(err)
	}
	eventually(t, "initializer member in dp2", func() error {
		if m := backupMember(t, l.dp2, "after-reload"); m == nil || m.Spec.Phase != dpv1alpha1.BackupMemberInitialize {
			return fmt.Errorf("member %+v", m)
		}
		return nil
	})
}

func TestScheduleCreatesOnTheTickSkipsWhileRunningAndRetains(t *testing.T) {
	ctx := context.Background()
	c := shared.control.Client
	one := int32(1)
	s := &fedv1alpha1.VolumeBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "hourly", Namespace: "default", Labels: map[string]string{"team": "db"}},
		Spec: fedv1alpha1.VolumeBackupScheduleSpec{Schedule: "0 * * * *", MaxBackups: &one, BackupTemplate: backupSpec("x", "dp1").Spec}}
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	clock := s.CreationTimestamp.Time
	r := &volumebackupschedule.Reconciler{Client: c, Recorder: events.NewFakeRecorder(100), Now: func() time.Time { return clock }}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(s)}
	scheduled := func() []fedv1alpha1.VolumeBackup {
		var list fedv1alpha1.VolumeBackupList
		if err := c.List(ctx, &list, client.InNamespace("default"), client.MatchingLabels{volumebackupschedule.ScheduleLabel: "hourly"}); err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	byName := func(name string) *fedv1alpha1.VolumeBackup {
		t.Helper()
		for _, b := range scheduled() {
			if b.Name == name {
				return &b
			}
		}
		return nil
	}
	tick := func(d time.Duration) {
		t.Helper()
		clock = clock.Add(d)
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	var completions int64
	complete := func(b fedv1alpha1.VolumeBackup) {
		t.Helper()
		completions++
		start, done := metav1.NewTime(clock.Add(-time.Duration(completions)*time.Minute).Truncate(time.Second)), metav1.NewTime(clock.Truncate(time.Second))
		b.Status.TimeStarted, b.Status.TimeCompleted, b.Status.BackupSize = &start, &done, 1000*completions
		b.Status.Phase = fedv1alpha1.VolumeBackupComplete
		b.Status.Conditions = []metav1.Condition{{Type: fedv1alpha1.VolumeBackupCompleteCondition, Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now()}}
		if err := c.Status().Update(ctx, &b); err != nil {
			t.Fatal(err)
		}
	}
	// A finalizer of the test's holds each backup's deletion, as its members' clean would.
	const hold = "test.fedbr.io/hold"
	release := func(name string) {
		t.Helper()
		b := byName(name)
		b.Finalizers = nil
		if err := c.Update(ctx, b); err != nil {
			t.Fatal(err)
		}
	}

	tick(61 * time.Minute)
	got := scheduled()
	if len(got) != 1 || got[0].Annotations[volumebackupschedule.ScheduledAnnotation] == "" || len(got[0].OwnerReferences) != 0 {
		t.Fatalf("after the first tick: %+v", got)
	}
	first := got[0]
	tick1, err := time.Parse(time.RFC3339, first.Annotations[volumebackupschedule.ScheduledAnnotation])
	if err != nil {
		t.Fatal(err)
	}
	wantPrefix := "x/-" + volumebackupschedule.TickString(tick1)
	if first.Spec.Template.S3 == nil || first.Spec.Template.S3.Prefix != wantPrefix || first.Labels["team"] != "db" {
		t.Fatalf("first backup: prefix %+v labels %v, want prefix %s and the schedule's labels", first.Spec.Template.S3, first.Labels, wantPrefix)
	}
	// The schedule has retention and its template no cleanPolicy: the stored backup says Delete,
	// so retention's deletion cleans its snapshots; the schedule says nothing is left behind.
	if first.Spec.Template.CleanPolicy != fedv1alpha1.CleanPolicyDelete {
		t.Fatalf("first backup's stored cleanPolicy = %q, want Delete", first.Spec.Template.CleanPolicy)
	}
	first.Finalizers = []string{hold}
	if err := c.Update(ctx, &first); err != nil {
		t.Fatal(err)
	}
	first = *byName(first.Name)

	tick(time.Hour) // the first is still running: skipped
	if got := scheduled(); len(got) != 1 {
		t.Fatalf("a tick while the previous backup runs created another: %d backups", len(got))
	}

	complete(first)
	tick(time.Hour) // a new one; retention (maxBackups 1) keeps the newest complete one: still the first
	got = scheduled()
	if len(got) != 2 {
		t.Fatalf("after the third tick: %d backups", len(got))
	}
	var st fedv1alpha1.VolumeBackupSchedule
	if err := c.Get(ctx, req.NamespacedName, &st); err != nil {
		t.Fatal(err)
	}
	second := st.Status.LastBackup
	if second == "" || second == first.Name {
		t.Fatalf("lastBackup = %q", second)
	}
	if b := byName(second); b.Spec.Template.S3.Prefix == first.Spec.Template.S3.Prefix {
		t.Fatalf("two ticks share the prefix %s", first.Spec.Template.S3.Prefix)
	}
	b := byName(second)
	b.Finalizers = []string{hold}
	if err := c.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	complete(*byName(second))

	tick(time.Hour) // the second completed: the first is deleted (held by the finalizer), a third is created
	if b := byName(first.Name); b == nil || b.DeletionTimestamp == nil {
		t.Fatalf("the first backup was not deleted: %+v", b)
	}
	if err := c.Get(ctx, req.NamespacedName, &st); err != nil {
		t.Fatal(err)
	}
	third := st.Status.LastBackup
	complete(*byName(third))

	tick(time.Minute) // the second is now expired too, but the first's deletion is still going
	if b := byName(second); b == nil || b.DeletionTimestamp != nil {
		t.Fatalf("a second deletion started while the first was going: %+v", b)
	}
	if err := c.Get(ctx, req.NamespacedName, &st); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(st.Status.Conditions, fedv1alpha1.VolumeBackupScheduleRetentionCondition); c == nil ||
		c.Reason != fedv1alpha1.VolumeBackupScheduleDeletingReason || !strings.Contains(c.Message, first.Name) {
		t.Fatalf("Retention = %+v, want it waiting for %s", c, first.Name)
	}
	if c := meta.FindStatusCondition(st.Status.Conditions, fedv1alpha1.VolumeBackupScheduleRetentionKeepsSnapshotsCondition); c == nil ||
		c.Status != metav1.ConditionFalse || c.Reason != fedv1alpha1.VolumeBackupScheduleCleanPolicyDeleteReason {
		t.Fatalf("RetentionKeepsSnapshots = %+v, want False %s", c, fedv1alpha1.VolumeBackupScheduleCleanPolicyDeleteReason)
	}

	release(first.Name)
	tick(time.Minute) // the first is gone: the second goes next
	if b := byName(second); b == nil || b.DeletionTimestamp == nil {
		t.Fatalf("the second backup was not deleted once the first was gone: %+v", b)
	}
	release(second)
	if b := byName(third); b == nil || b.DeletionTimestamp != nil {
		t.Fatalf("the newest complete backup is gone: %+v", b)
	}

	// The schedule's metrics describe its newest complete backup, the third (completed 3rd),
	// and its latest closed window, which starts at the second-latest hourly tick before the
	// clock (the third tick, or the fourth when the minutes ticked since crossed an hour).
	thirdDone := byName(third).Status.TimeCompleted.Unix()
	for _, m := range []struct {
		name string
		got  float64
		want float64
	}{
		{"last success", testutil.ToFloat64(metrics.ScheduleLastSuccess.WithLabelValues("default", "hourly")), float64(thirdDone)},
		{"last duration", testutil.ToFloat64(metrics.ScheduleLastDuration.WithLabelValues("default", "hourly")), 180},
		{"last size", testutil.ToFloat64(metrics.ScheduleLastSize.WithLabelValues("default", "hourly")), 3000},
		{"window start", testutil.ToFloat64(metrics.ScheduleWindowStart.WithLabelValues("default", "hourly")), float64(clock.Truncate(time.Hour).Add(-time.Hour).Unix())},
	} {
		if m.got != m.want {
			t.Errorf("%s = %v, want %v", m.name, m.got, m.want)
		}
	}
	if err := c.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	tick(time.Minute)
	for name, m := range map[string]*prometheus.GaugeVec{"last-success": metrics.ScheduleLastSuccess, "window": metrics.ScheduleWindowStart} {
		if n := testutil.CollectAndCount(m); n != 0 {
			t.Errorf("%d %s series after the schedule was deleted", n, name)
		}
	}
}
