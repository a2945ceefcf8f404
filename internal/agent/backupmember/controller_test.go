package backupmember

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/metrics"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	brreport "github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/meta"
	"github.com/fedbr/fedbr/internal/testenv"
)

var env *testenv.Env

// TestMain shares one API server among the integration tests; in -short mode only the pure
// tests run.
func TestMain(m *testing.M) {
	flag.Parse()
	ctrl.SetLogger(logr.Discard())
	if testing.Short() {
		os.Exit(m.Run())
	}
	e, err := testenv.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env = e
	code := m.Run()
	stopAgent() // the agent's watches would keep the API server from stopping
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the API server:", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

// clock is a test clock the test moves forward (clean retries back off on it).
type clock struct{ ns atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

var (
	startOnce sync.Once
	testClock = &clock{}
	stopAgent = func() {}
	// testMetrics are the agent's metrics: the phase it planned, written or held.
	testMetrics = metrics.New()
)

// startAgent runs the controller against the test API server once for the package.
func startAgent(t *testing.T) {
	t.Helper()
	if env == nil {
		t.Skip("needs a real API server; skipped in -short mode")
	}
	startOnce.Do(func() {
		testClock.ns.Store(time.Now().UnixNano())
		mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
		if err != nil {
			t.Fatal(err)
		}
		r := &Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("fedbr-agent"), Metrics: testMetrics,
			Env: job.Env{Image: "fedbr:test", AWSEndpoint: "http://127.0.0.1:4566", Region: "us-west-2", PodLabels: []string{"team"}}, ClusterName: "az1", Now: testClock.Now,
			Cloud: testSnapshots}
		if err := r.SetupWithManager(mgr, 2); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := mgr.Start(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "agent stopped:", err)
			}
		}()
		stopAgent = func() { cancel(); <-done }
	})
}

// snapshotsDouble stands in for AWS's DescribeSnapshots: the snapshots a test put there.
type snapshotsDouble struct {
	mu    sync.Mutex
	snaps map[string]cloud.Snapshot
}

func (d *snapshotsDouble) put(s cloud.Snapshot) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.snaps[s.ID] = s
}

func (d *snapshotsDouble) DescribeSnapshots(_ context.Context, ids []string) ([]cloud.Snapshot, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []cloud.Snapshot
	for _, id := range ids {
		if s, ok := d.snaps[id]; ok {
			out = append(out, s)
		}
	}
	return out, nil
}

var testSnapshots = &snapshotsDouble{snaps: map[string]cloud.Snapshot{}}

// eventually retries cond until it holds; the failure names what was last seen.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	testenv.Eventually(t, what, 60*time.Second, cond)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// seedCluster creates a TidbCluster with one TiKV pod on an EBS CSI volume, as the operator
// and the CSI driver would leave them.
func seedCluster(t *testing.T, ctx context.Context, ns string) { seedClusterOn(t, ctx, ns, "vol-"+ns) }

// seedClusterOn is seedCluster with the TiKV pod's volume volumeID.
func seedClusterOn(t *testing.T, ctx context.Context, ns, volumeID string) {
	c := env.Client
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	tc := &pcv1alpha1.TidbCluster{ObjectMeta: metav1.ObjectMeta{Name: "basic", Namespace: ns},
		Spec: pcv1alpha1.TidbClusterSpec{TiKV: &pcv1alpha1.ComponentSpec{Replicas: 1}, PD: &pcv1alpha1.ComponentSpec{Replicas: 1}}}
	must(t, c.Create(ctx, tc))
	tc.Status = pcv1alpha1.TidbClusterStatus{
		PD:   pcv1alpha1.PDStatus{Members: map[string]pcv1alpha1.PDMember{"basic-pd-0": {Name: "basic-pd-0", ClientURL: "http://127.0.0.1:2379"}}},
		TiKV: pcv1alpha1.TiKVStatus{Stores: map[string]pcv1alpha1.TiKVStore{"7": {ID: "7", PodName: "basic-tikv-0", State: "Up"}}},
	}
	must(t, c.Update(ctx, tc))
	node := "node-" + ns
	if err := c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-west-2a/i-0" + ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + ns},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: tidbcluster.EBSCSIDriver, VolumeHandle: volumeID}},
		}}
	must(t, c.Create(ctx, pv))
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "tikv-basic-tikv-0", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv.Name, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}}}
	must(t, c.Create(ctx, pvc))
	pvc.Status.Phase = corev1.ClaimBound
	must(t, c.Status().Update(ctx, pvc))
	labels := map[string]string{"app.kubernetes.io/instance": "basic", "app.kubernetes.io/component": "tikv"}
	for _, p := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "basic-tikv-0", Namespace: ns, Labels: labels},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "tikv", Image: "tikv",
				VolumeMounts: []corev1.VolumeMount{{Name: "tikv", MountPath: "/var/lib/tikv"}}}},
				Volumes: []corev1.Volume{{Name: "tikv", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}}}},
		// A PD pod with a volume of its own: never part of the backup.
		{ObjectMeta: metav1.ObjectMeta{Name: "basic-pd-0", Namespace: ns, Labels: map[string]string{"app.kubernetes.io/instance": "basic", "app.kubernetes.io/component": "pd"}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "pd", Image: "pd"}},
				Volumes: []corev1.Volume{{Name: "pd", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pd-basic-pd-0"}}}}}},
	} {
		must(t, c.Create(ctx, p))
	}
}

func newMember(ns string, phase dpv1alpha1.BackupMemberPhase, policy fedv1alpha1.CleanPolicyType) *dpv1alpha1.VolumeBackupMember {
	return &dpv1alpha1.VolumeBackupMember{
		ObjectMeta: metav1.ObjectMeta{Name: "fed-b1", Namespace: ns, Labels: map[string]string{"team": "db", dpv1alpha1.LabelOwnerNamespace: ns}},
		Spec: dpv1alpha1.VolumeBackupMemberSpec{VolumeBackup: "b1", K8sClusterName: "az1", TCName: "basic", TCNamespace: ns, Phase: phase,
			Template: fedv1alpha1.VolumeBackupMemberSpec{CleanPolicy: policy,
				StorageProvider: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "bk", Prefix: ns + "/p-az1"}}}},
	}
}

// getMember reads the member; nil when gone.
func getMember(t *testing.T, ctx context.Context, key types.NamespacedName) *dpv1alpha1.VolumeBackupMember {
	m := &dpv1alpha1.VolumeBackupMember{}
	if err := env.Client.Get(ctx, key, m); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	return m
}

// updateMember changes the member as the manager (or an SRE) would, retrying conflicts with
// the agent's own writes.
func updateMember(t *testing.T, ctx context.Context, key types.NamespacedName, mutate func(*dpv1alpha1.VolumeBackupMember)) {
	t.Helper()
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m := getMember(t, ctx, key)
		mutate(m)
		return env.Client.Update(ctx, m)
	}))
}

func condIs(m *dpv1alpha1.VolumeBackupMember, typ string, s metav1.ConditionStatus, reason string) (bool, string) {
	if m == nil {
		return false, "member gone"
	}
	c := apimeta.FindStatusCondition(m.Status.Conditions, typ)
	if c == nil {
		return false, fmt.Sprintf("no %s; conditions %+v", typ, m.Status.Conditions)
	}
	return c.Status == s && (reason == "" || c.Reason == reason), fmt.Sprintf("%+v", *c)
}

// writeReport writes steps' reports into the member's status.steps exactly as `fedbr br` does
// (data: each step's status document under its name, its result under <step>.result).
func writeReport(t *testing.T, ctx context.Context, ns, member string, data map[string]any) {
	t.Helper()
	byStep := map[string]map[string]string{}
	for k, v := range data {
		b, err := json.Marshal(v)
		must(t, err)
		step, _ := strings.CutSuffix(k, ".result")
		if byStep[step] == nil {
			byStep[step] = map[string]string{}
		}
		byStep[step][k] = string(b)
	}
	for step, keys := range byStep {
		sink, err := brreport.NewMemberStep(env.Config, dpv1alpha1.GroupVersion.WithKind(Kind), "volumebackupmembers", ns, member, step)
		must(t, err)
		must(t, sink.Apply(ctx, keys))
	}
}

func getJob(ctx context.Context, ns, name string) *batchv1.Job {
	j := &batchv1.Job{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, j); err != nil {
		return nil
	}
	return j
}

// failJob marks a Job failed as the Job controller would.
func failJob(t *testing.T, ctx context.Context, j *batchv1.Job) {
	now := metav1.Now()
	j.Status.StartTime = &now
	j.Status.Failed = 1
	j.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: job.ReasonBackoffLimitExceeded, LastTransitionTime: now, LastProbeTime: now},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: job.ReasonBackoffLimitExceeded, Message: "Job has reached the specified backoff limit", LastTransitionTime: now, LastProbeTime: now},
	}
	must(t, env.Client.Status().Update(ctx, j))
}

func args(j *batchv1.Job) []string { return j.Spec.Template.Spec.Containers[0].Args }

// TestBackupProtocol plays the manager and the br Jobs through a whole backup and its deletion.
func TestBackupProtocol(t *testing.T) {
	startAgent(t)
	ctx := context.Background()
	ns := "bk-proto"
	// The backup ts is taken now (the agent checks it against the member's creation and the
	// snapshots' start), and the AWS double holds the snapshot the step will report.
	backupTS := uint64(time.Now().UnixMilli()) << 18
	tsText := strconv.FormatUint(backupTS, 10)
	seedCluster(t, ctx, ns)
	c := env.Client
	m := newMember(ns, dpv1alpha1.BackupMemberInitialize, fedv1alpha1.CleanPolicyDelete)
	must(t, c.Create(ctx, m))
	key := client.ObjectKeyFromObject(m)

	// initialize: the snapshot step starts armed.
	eventually(t, "armed snapshot Job first", func() (bool, string) {
		return getJob(ctx, ns, job.Name("fed-b1", job.StepSnapshot)) != nil, "no snapshot Job"
	})
	writeReport(t, ctx, ns, "fed-b1", map[string]any{job.StepSnapshot: map[string]any{"phase": "Armed"}})
	eventually(t, "Armed", func() (bool, string) {
		return condIs(getMember(t, ctx, key), dpv1alpha1.BackupMemberArmedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotArmedReason)
	})
	// The pause Job starts armed too; it takes its go off the member's spec.startPause.
	var pause *batchv1.Job
	eventually(t, "armed pause Job", func() (bool, string) {
		pause = getJob(ctx, ns, job.Name("fed-b1", job.StepPause))
		return pause != nil, "no pause Job"
	})
	if !slices.Contains(args(pause), "--wait-start") {
		t.Errorf("pause Job args %v, want --wait-start", args(pause))
	}
	if argValue(args(pause), "--member") != "fed-b1" {
		t.Errorf("pause Job args %v, want --member fed-b1", args(pause))
	}
	updateMember(t, ctx, key, func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.StartPause = true })
	if !slices.Contains(getMember(t, ctx, key).Finalizers, Finalizer) {
		t.Fatal("no finalizer")
	}
	if a := args(pause); argValue(a, "--pd") != "http://127.0.0.1:2379" || *pause.Spec.BackoffLimit != 0 || pause.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("pause Job args %v", a)
	}
	sa := &corev1.ServiceAccount{}
	must(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: job.ServiceAccountName}, sa))

	// The pause is ready.
	gcPausedAt := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	writeReport(t, ctx, ns, "fed-b1", map[string]any{job.StepPause: map[string]any{"phase": "Ready", "backupTS": backupTS, "stores": 3, "gcPausedAt": gcPausedAt}})
	eventually(t, "Initialized", func() (bool, string) {
		got := getMember(t, ctx, key)
		ok, seen := condIs(got, dpv1alpha1.BackupMemberInitializedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberPauseReadyReason)
		return ok && got.Status.CommitTs == "", seen + " commitTs " + got.Status.CommitTs // set once Complete, from spec.backupTS
	})
	if c := apimeta.FindStatusCondition(getMember(t, ctx, key).Status.Conditions, dpv1alpha1.BackupMemberInitializedCondition); !c.LastTransitionTime.Time.Equal(gcPausedAt) {
		t.Errorf("Initialized at %v, want the pause's gcPausedAt %v", c.LastTransitionTime, gcPausedAt)
	}

	// The snapshot step already runs beside the pause, armed: it waits for the backup ts.
	var snap *batchv1.Job
	eventually(t, "armed snapshot Job", func() (bool, string) {
		snap = getJob(ctx, ns, job.Name("fed-b1", job.StepSnapshot))
		return snap != nil, "no snapshot Job"
	})
	uid := string(getMember(t, ctx, key).UID)
	if a := args(snap); !slices.Contains(a, "--wait-backup-ts") || argValue(a, "--backup-id") != uid || argValue(a, "--storage") != "s3://bk/"+ns+"/p-az1" ||
		argValue(a, "--aws-endpoint") != "http://127.0.0.1:4566" || snap.Labels["team"] != "db" {
		t.Errorf("snapshot Job args %v labels %v", a, snap.Labels)
	}

	// The manager moves the initializer to execute with the shared backup ts, which the armed
	// step reads off the member itself.
	updateMember(t, ctx, key, func(m *dpv1alpha1.VolumeBackupMember) {
		m.Spec.Phase, m.Spec.BackupTS = dpv1alpha1.BackupMemberExecute, tsText
	})
	inputs := &corev1.ConfigMap{}
	must(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: InputsConfigMapName("fed-b1")}, inputs))
	vf := inputs.Data[VolumesKey]
	if !strings.Contains(vf, `"vol-`+ns+`"`) || !strings.Contains(vf, `"store_id": 7`) || strings.Contains(vf, "pd-basic-pd-0") {
		t.Errorf("volume file: %s", vf)
	}
	if getJob(ctx, ns, job.Name("fed-b1", job.StepPause)).Spec.Suspend != nil && *getJob(ctx, ns, job.Name("fed-b1", job.StepPause)).Spec.Suspend {
		t.Error("the pause was stopped before resumeGC")
	}

	// Every snapshot started.
	writeReport(t, ctx, ns, "fed-b1", map[string]any{job.StepSnapshot: map[string]any{"phase": "Waiting", "done": 0, "total": 1, "backupTS": backupTS}})
	eventually(t, "SnapshotsCreated", func() (bool, string) {
		return condIs(getMember(t, ctx, key), dpv1alpha1.BackupMemberSnapshotsCreatedCondition, metav1.ConditionTrue, "")
	})

	// The manager asks to resume GC: the pause, watching the member, lifts and reports Stopped;
	// the agent does not stop its Job (one route: the spec).
	updateMember(t, ctx, key, func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.ResumeGC = true })
	eventually(t, "resumeGC observed", func() (bool, string) {
		got := getMember(t, ctx, key)
		return got.Status.ObservedGeneration == got.Generation, fmt.Sprintf("observed generation %d of %d", got.Status.ObservedGeneration, got.Generation)
	})
	if j := getJob(ctx, ns, job.Name("fed-b1", job.StepPause)); j == nil || j.Spec.Suspend != nil && *j.Spec.Suspend {
		t.Error("the agent stopped the pause on spec.resumeGC, which the pause watches itself")
	}
	liftedAt := gcPausedAt.Add(7 * time.Second)
	writeReport(t, ctx, ns, "fed-b1", map[string]any{job.StepPause: map[string]any{"phase": "Stopped", "backupTS": backupTS, "liftedAt": liftedAt}})
	eventually(t, "GCResumed", func() (bool, string) {
		return condIs(getMember(t, ctx, key), dpv1alpha1.BackupMemberGCResumedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberPauseLiftedReason)
	})
	if c := apimeta.FindStatusCondition(getMember(t, ctx, key).Status.Conditions, dpv1alpha1.BackupMemberGCResumedCondition); !c.LastTransitionTime.Time.Equal(liftedAt) {
		t.Errorf("GCResumed at %v, want liftedAt %v", c.LastTransitionTime, liftedAt)
	}

	// Snapshots completed: the agent finds snap-1 in AWS, of the TiKV volume, tagged for this
	// backup, and only then completes the member.
	testSnapshots.put(cloud.Snapshot{ID: "snap-1", VolumeID: "vol-" + ns, State: cloud.SnapshotCompleted, Owned: true,
		Started: time.Now().Add(time.Second), Tags: map[string]string{meta.TagBackup: uid}})
	writeReport(t, ctx, ns, "fed-b1", map[string]any{
		job.StepSnapshot: map[string]any{"phase": "Completed", "done": 1, "total": 1, "backupTS": backupTS},
		job.StepSnapshot + ".result": map[string]any{"backupID": uid, "resolvedTS": backupTS, "sizeGiB": 10,
			"snapshots": []map[string]any{{"storeID": 7, "volumeID": "vol-" + ns, "snapshotID": "snap-1", "sizeGiB": 10}}},
	})
	eventually(t, "Complete", func() (bool, string) {
		got := getMember(t, ctx, key)
		ok, seen := condIs(got, dpv1alpha1.BackupMemberCompleteCondition, metav1.ConditionTrue, "")
		return ok && got.Status.Phase == PhaseComplete && got.Status.CommitTs == tsText, seen + " commitTs " + got.Status.CommitTs
	})

	// Then, off the critical path, the size step; its result becomes the member's sizes (the
	// volumes' 10 GiB capacity never does).
	var size *batchv1.Job
	eventually(t, "size Job", func() (bool, string) {
		size = getJob(ctx, ns, job.Name("fed-b1", job.StepSize))
		return size != nil, "no size Job"
	})
	if a := args(size); argValue(a, "--level") != "all" || argValue(a, "--storage") != "s3://bk/"+ns+"/p-az1" {
		t.Errorf("size Job args %v", a)
	}
	if got := getMember(t, ctx, key).Status.BackupSize; got != 0 {
		t.Errorf("backupSize %d before the size step reported, want none", got)
	}
	writeReport(t, ctx, ns, "fed-b1", map[string]any{
		job.StepSize:             map[string]any{"phase": "Completed"},
		job.StepSize + ".result": map[string]any{"level": "all", "fullBytes": 3 << 20, "incrementalBytes": 1 << 20, "full": "3.1 MB", "incremental": "1.0 MB"},
	})
	eventually(t, "Sized", func() (bool, string) {
		got := getMember(t, ctx, key)
		ok, seen := condIs(got, dpv1alpha1.BackupMemberSizedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSizedReason)
		return ok && got.Status.BackupSize == 3<<20 && got.Status.IncrementalBackupSize == 1<<20 && got.Status.Phase == PhaseComplete,
			fmt.Sprintf("%s sizes %d/%d", seen, got.Status.BackupSize, got.Status.IncrementalBackupSize)
	})

	// The size step exits and its Job completes, as the Job controller records it (a running
	// size step would hold the clean back until its pod is gone: planDeletion).
	size = getJob(ctx, ns, job.Name("fed-b1", job.StepSize))
	now := metav1.Now()
	size.Status.StartTime, size.Status.CompletionTime, size.Status.Succeeded = &now, &now, 1
	size.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	must(t, c.Status().Update(ctx, size))

	// Deletion with cleanPolicy Delete: a failing clean is surfaced and retried.
	must(t, c.Delete(ctx, getMember(t, ctx, key)))
	var clean *batchv1.Job
	eventually(t, "clean Job", func() (bool, string) {
		clean = getJob(ctx, ns, CleanJobName("fed-b1", 1))
		return clean != nil, "no clean Job"
	})
	if a := args(clean); argValue(a, "--backup-id") != uid || argValue(a, "--backup-outcome") != "completed" {
		t.Errorf("clean args %v", a)
	}
	writeReport(t, ctx, ns, "fed-b1", map[string]any{job.StepClean: map[string]any{"phase": "Failed", "error": "UnauthorizedOperation: you may not"}})
	failJob(t, ctx, clean)
	eventually(t, "CleanFailed surfaced", func() (bool, string) {
		got := getMember(t, ctx, key)
		ok, seen := condIs(got, dpv1alpha1.BackupMemberCleanedCondition, metav1.ConditionFalse, dpv1alpha1.BackupMemberCleanFailedReason)
		return ok && got.Status.Phase == PhaseCleanFailed && strings.Contains(seen, "UnauthorizedOperation"), seen
	})
	eventually(t, "CleanFailed event", func() (bool, string) {
		evs := &eventsv1.EventList{}
		must(t, c.List(ctx, evs, client.InNamespace(ns)))
		for _, e := range evs.Items {
			if e.Reason == dpv1alpha1.BackupMemberCleanFailedReason && e.Type == corev1.EventTypeWarning {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events, none CleanFailed", len(evs.Items))
	})
	// The backoff passes; any event makes the agent retry.
	testClock.Advance(time.Hour)
	updateMember(t, ctx, key, func(m *dpv1alpha1.VolumeBackupMember) { m.Annotations = map[string]string{"poke": "1"} })
	eventually(t, "clean attempt 2", func() (bool, string) {
		clean = getJob(ctx, ns, CleanJobName("fed-b1", 2))
		return clean != nil, "no second clean Job"
	})
	writeReport(t, ctx, ns, "fed-b1", map[string]any{job.StepClean: map[string]any{"phase": "Completed"},
		job.StepClean + ".result": map[string]any{"result": "cleaned", "deleted": 1}})
	eventually(t, "member gone", func() (bool, string) {
		return getMember(t, ctx, key) == nil, "member still there"
	})
}

// pausingMember starts the agent and creates, in a new namespace ns with a TidbCluster, an
// initializer's member asked to pause; it returns the member's key once its pause Job exists.
func pausingMember(t *testing.T, ctx context.Context, ns string) (types.NamespacedName, *batchv1.Job) {
	t.Helper()
	startAgent(t)
	seedCluster(t, ctx, ns)
	m := newMember(ns, dpv1alpha1.BackupMemberInitialize, fedv1alpha1.CleanPolicyRetain)
	m.Spec.StartPause = true
	must(t, env.Client.Create(ctx, m))
	var pause *batchv1.Job
	eventually(t, "pause Job", func() (bool, string) {
		pause = getJob(ctx, ns, job.Name("fed-b1", job.StepPause))
		return pause != nil, "no pause Job"
	})
	return client.ObjectKeyFromObject(m), pause
}

// TestKilledPauseIsLifted: the pause Job fails after the pause reported its identity and
// Ready, without lifting (its pod killed). The agent starts the lift Job, keeps GCResumed False
// while the lift runs, and sets it True only once the lift reports PD holds nothing.
func TestKilledPauseIsLifted(t *testing.T) {
	ctx := context.Background()
	ns := "bk-lift"
	key, pause := pausingMember(t, ctx, ns)
	identity := map[string]any{"serviceSafePoint": "fedbr-killed", "pausedSchedulers": []string{"balance-region-scheduler"},
		"scheduleConfig": []map[string]string{{"key": "schedule.region-schedule-limit", "original": "2048", "paused": "0"}}}
	ready := map[string]any{"phase": "Ready", "backupTS": backupTS, "stores": 1, "gcPausedAt": testClock.Now().UTC()}
	for k, v := range identity {
		ready[k] = v
	}
	writeReport(t, ctx, ns, "fed-b1", map[string]any{job.StepPause: ready})
	eventually(t, "Initialized", func() (bool, string) {
		return condIs(getMember(t, ctx, key), dpv1alpha1.BackupMemberInitializedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberPauseReadyReason)
	})

	// The pause's pod is killed: its Job fails, the pause never reports liftedAt.
	failJob(t, ctx, pause)
	var lift *batchv1.Job
	eventually(t, "lift Job", func() (bool, string) {
		lift = getJob(ctx, ns, job.Name("fed-b1", job.StepLift))
		return lift != nil, "no lift Job"
	})
	if a := args(lift); argValue(a, "--member") != "fed-b1" || argValue(a, "--pd") != "http://127.0.0.1:2379" || *lift.Spec.BackoffLimit != liftBackoffLimit {
		t.Errorf("lift Job args %v backoff %d", a, *lift.Spec.BackoffLimit)
	}
	eventually(t, "GCResumed False while lifting", func() (bool, string) {
		return condIs(getMember(t, ctx, key), dpv1alpha1.BackupMemberGCResumedCondition, metav1.ConditionFalse, dpv1alpha1.BackupMemberLiftingReason)
	})

	liftedAt := time.Now().UTC().Truncate(time.Second)
	lifted := map[string]any{"phase": "Lifted", "liftedAt": liftedAt}
	for k, v := range identity {
		lifted[k] = v
	}
	writeReport(t, ctx, ns, "fed-b1", map[string]any{job.StepLift: lifted, job.StepLift + ".result": lifted})
	eventually(t, "GCResumed after the lift", func() (bool, string) {
		return condIs(getMember(t, ctx, key), dpv1alpha1.BackupMemberGCResumedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberLiftedReason)
	})
	if c := apimeta.FindStatusCondition(getMember(t, ctx, key).Status.Conditions, dpv1alpha1.BackupMemberGCResumedCondition); !c.LastTransitionTime.Time.Equal(liftedAt) {
		t.Errorf("GCResumed at %v, want the lift's liftedAt %v", c.LastTransitionTime, liftedAt)
	}
	jobs := &batchv1.JobList{}
	must(t, env.Client.List(ctx, jobs, client.InNamespace(ns), client.MatchingLabels{job.LabelStep: job.StepLift}))
	if len(jobs.Items) != 1 {
		t.Errorf("%d lift Jobs, want one", len(jobs.Items))
	}
}

// TestForceRemove: an SRE drops the finalizer of a member whose clean keeps failing.
func TestForceRemove(t *testing.T) {
	startAgent(t)
	ctx := context.Background()
	ns := "bk-force"
	seedCluster(t, ctx, ns)
	c := env.Client
	m := newMember(ns, dpv1alpha1.BackupMemberExecute, fedv1alpha1.CleanPolicyDelete)
	m.Spec.BackupTS = tsText
	must(t, c.Create(ctx, m))
	key := client.ObjectKeyFromObject(m)
	eventually(t, "snapshot Job", func() (bool, string) {
		return getJob(ctx, ns, job.Name("fed-b1", job.StepSnapshot)) != nil, "no snapshot Job"
	})
	writeReport(t, ctx, ns, "fed-b1", map[string]any{job.StepSnapshot: map[string]any{"phase": "Failed", "error": "snapshot snap-1 is in the error state"}})
	eventually(t, "Failed", func() (bool, string) {
		return condIs(getMember(t, ctx, key), dpv1alpha1.BackupMemberFailedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotFailedReason)
	})
	failJob(t, ctx, getJob(ctx, ns, job.Name("fed-b1", job.StepSnapshot)))
	must(t, c.Delete(ctx, getMember(t, ctx, key)))
	eventually(t, "clean Job", func() (bool, string) {
		j := getJob(ctx, ns, CleanJobName("fed-b1", 1))
		return j != nil && argValue(args(j), "--backup-outcome") == "failed", "no clean Job for a failed backup"
	})
	updateMember(t, ctx, key, func(m *dpv1alpha1.VolumeBackupMember) {
		m.Annotations = map[string]string{ForceRemoveAnnotation: "true"}
	})
	eventually(t, "member gone", func() (bool, string) { return getMember(t, ctx, key) == nil, "member still there" })
}

// TestOtherCluster: a member for another data plane is left alone.
func TestOtherCluster(t *testing.T) {
	startAgent(t)
	ctx := context.Background()
	ns := "bk-other"
	must(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	m := newMember(ns, dpv1alpha1.BackupMemberInitialize, fedv1alpha1.CleanPolicyRetain)
	m.Spec.K8sClusterName = "az9"
	must(t, env.Client.Create(ctx, m))
	eventually(t, "OtherCluster event", func() (bool, string) {
		evs := &eventsv1.EventList{}
		must(t, env.Client.List(ctx, evs, client.InNamespace(ns)))
		return len(evs.Items) > 0 && evs.Items[0].Reason == "OtherCluster", fmt.Sprintf("%d events", len(evs.Items))
	})
	if got := getMember(t, ctx, client.ObjectKeyFromObject(m)); len(got.Finalizers) != 0 || got.Status.Phase != "" {
		t.Errorf("member of another plane was touched: %+v", got)
	}
}

// TestFailedMemberStopsItsPause: a member the agent fails itself while its pause holds (the
// snapshot step reported a failure; the manager has asked for nothing yet) has its pause Job
// stopped (suspended, SIGTERM through its pod's deletion): the one case the agent stops the
// pause, since nothing in the member's spec asks the pause to lift.
func TestFailedMemberStopsItsPause(t *testing.T) {
	ctx := context.Background()
	ns := "bk-failstop"
	key, _ := pausingMember(t, ctx, ns)
	writeReport(t, ctx, ns, "fed-b1", map[string]any{
		job.StepPause:    map[string]any{"phase": "Ready", "backupTS": backupTS, "stores": 1, "gcPausedAt": testClock.Now().UTC()},
		job.StepSnapshot: map[string]any{"phase": "Failed", "error": "throttled"},
	})
	eventually(t, "Failed", func() (bool, string) {
		return condIs(getMember(t, ctx, key), dpv1alpha1.BackupMemberFailedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotFailedReason)
	})
	eventually(t, "pause stopped", func() (bool, string) {
		j := getJob(ctx, ns, job.Name("fed-b1", job.StepPause))
		return j != nil && j.Spec.Suspend != nil && *j.Spec.Suspend, "pause Job not suspended"
	})
}
