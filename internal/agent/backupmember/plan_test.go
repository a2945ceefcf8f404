package backupmember

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	brreport "github.com/fedbr/fedbr/internal/br/report"
	brsnapshot "github.com/fedbr/fedbr/internal/br/snapshot"
	"github.com/fedbr/fedbr/internal/testenv"
)

var (
	t0        = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	pausedAt  = t0.Add(2 * time.Second)
	liftedAt  = t0.Add(9 * time.Second)
	testEnv   = job.Env{Image: "fedbr:test", Region: "us-west-2", AWSEndpoint: "http://127.0.0.1:4566", ClusterID: "kube-system-uid", PodLabels: []string{"team"}}
	backupTS  = uint64(470802380936708097)
	tsText    = "470802380936708097"
	pauseName = job.Name("fed-b1", job.StepPause)
	snapName  = job.Name("fed-b1", job.StepSnapshot)
	sizeName  = job.Name("fed-b1", job.StepSize)
)

// startPause is the manager's go for the initializer's pause (every member armed).
func startPause(m *dpv1alpha1.VolumeBackupMember) { m.Spec.StartPause = true }

func member(phase dpv1alpha1.BackupMemberPhase, mut ...func(*dpv1alpha1.VolumeBackupMember)) *dpv1alpha1.VolumeBackupMember {
	m := &dpv1alpha1.VolumeBackupMember{
		ObjectMeta: metav1.ObjectMeta{Name: "fed-b1", Namespace: "tidb", UID: "uid-1", Generation: 3,
			Labels: map[string]string{"team": "db"}, Annotations: map[string]string{"iam.amazonaws.com/role": "br"}},
		Spec: dpv1alpha1.VolumeBackupMemberSpec{
			VolumeBackup: "b1", K8sClusterName: "az1", TCName: "basic", TCNamespace: "tidb", Phase: phase,
			Template: fedv1alpha1.VolumeBackupMemberSpec{
				StorageProvider: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "bk", Prefix: "nightly-az1"}},
			},
		},
	}
	for _, f := range mut {
		f(m)
	}
	return m
}

func withCond(t string, s metav1.ConditionStatus, reason string) func(*dpv1alpha1.VolumeBackupMember) {
	return func(m *dpv1alpha1.VolumeBackupMember) {
		apimeta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, LastTransitionTime: metav1.NewTime(t0)})
	}
}

func deleting(policy fedv1alpha1.CleanPolicyType) func(*dpv1alpha1.VolumeBackupMember) {
	return func(m *dpv1alpha1.VolumeBackupMember) {
		m.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
		m.Finalizers = []string{Finalizer}
		m.Spec.Template.CleanPolicy = policy
	}
}

func tc() *pcv1alpha1.TidbCluster {
	return &pcv1alpha1.TidbCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "basic", Namespace: "tidb"},
		Spec:       pcv1alpha1.TidbClusterSpec{TiKV: &pcv1alpha1.ComponentSpec{Replicas: 1}, PD: &pcv1alpha1.ComponentSpec{Replicas: 1}},
		Status: pcv1alpha1.TidbClusterStatus{
			PD:   pcv1alpha1.PDStatus{Members: map[string]pcv1alpha1.PDMember{"basic-pd-0": {Name: "basic-pd-0", ClientURL: "http://pd0:2379"}}},
			TiKV: pcv1alpha1.TiKVStatus{Stores: map[string]pcv1alpha1.TiKVStore{"1": {ID: "1", PodName: "basic-tikv-0", State: "Up"}}},
		},
	}
}

// whole is tc as the API server would return it, unstructured.
func whole(tc *pcv1alpha1.TidbCluster) *unstructured.Unstructured {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tc)
	if err != nil {
		panic(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(pcv1alpha1.GroupVersion.WithKind("TidbCluster"))
	return u
}

// cluster is one TiKV pod on an EBS CSI volume.
func cluster() *Cluster {
	c := &Cluster{TC: tc(), Object: whole(tc()), PVCs: map[string]*corev1.PersistentVolumeClaim{}, PVs: map[string]*corev1.PersistentVolume{}, Nodes: map[string]*corev1.Node{}}
	c.Pods = []corev1.Pod{{
		ObjectMeta: metav1.ObjectMeta{Name: "basic-tikv-0", Namespace: "tidb"},
		Spec: corev1.PodSpec{NodeName: "n1",
			Containers: []corev1.Container{{Name: "tikv", VolumeMounts: []corev1.VolumeMount{{Name: "tikv", MountPath: "/var/lib/tikv"}}}},
			Volumes: []corev1.Volume{{Name: "tikv", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "tikv-basic-tikv-0"}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}},
	}}
	c.PVCs["tikv-basic-tikv-0"] = &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "tikv-basic-tikv-0", Namespace: "tidb"},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	c.PVs["pv-1"] = &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: tidbcluster.EBSCSIDriver, VolumeHandle: "vol-1"}}},
	}
	c.Nodes["n1"] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-west-2a/i-0abc"}}
	return c
}

// report is what the steps reported, given as each step's status document (key <step>) and
// result (key <step>.result), as the steps write them.
func report(data map[string]string) job.Report {
	steps, err := brreport.Entries(data)
	if err != nil {
		panic(err)
	}
	return job.ReportOf(steps)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func active(name string) job.State {
	return job.State{Name: name, Phase: job.Active, Active: 1, Started: t0}
}
func failed(name, reason string) job.State {
	return job.State{Name: name, Phase: job.Failed, Reason: reason, Message: "boom", Started: t0, Finished: t0.Add(time.Minute)}
}
func succeeded(name string) job.State {
	return job.State{Name: name, Phase: job.Succeeded, Started: t0, Finished: t0.Add(time.Minute)}
}

func obs(m *dpv1alpha1.VolumeBackupMember, mut ...func(*Observed)) Observed {
	o := Observed{Member: m, TC: tc(), Env: testEnv, Pause: job.StateOf(nil), Snapshot: job.StateOf(nil), Size: job.StateOf(nil), Clean: job.StateOf(nil),
		Lift: job.StateOf(nil), Report: job.ReportOf(nil)}
	for _, f := range mut {
		f(&o)
	}
	return o
}

type want struct {
	actions   []ActionKind
	release   bool
	true      []string
	notTrue   []string
	reason    map[string]string
	phase     string
	requeue   bool
	check     func(*testing.T, Result)
	commitTs  string
	failMatch string
}

func kinds(actions []Action) []ActionKind {
	var k []ActionKind
	for _, a := range actions {
		k = append(k, a.Kind)
	}
	return k
}

func jobOf(t *testing.T, r Result, step string) *Action {
	t.Helper()
	for i, a := range r.Actions {
		if a.Kind == CreateJob && a.Job.Labels[job.LabelStep] == step {
			return &r.Actions[i]
		}
	}
	t.Fatalf("no %s Job created; actions %v", step, r.Actions)
	return nil
}

func argValue(args []string, flag string) string {
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}

func TestPlan(t *testing.T) {
	pauseReady := report(map[string]string{job.StepPause: mustJSON(map[string]any{"phase": "Ready", "backupTS": backupTS, "stores": 3, "gcPausedAt": pausedAt})})
	ready := withCond(dpv1alpha1.BackupMemberInitializedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberPauseReadyReason)
	execute := func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.BackupTS = tsText }
	summary := brsnapshot.Result{BackupID: "uid-1", ResolvedTS: backupTS, SizeGiB: 30}
	summary.Snapshots = append(summary.Snapshots, brsnapshot.Snapshot{StoreID: 1, VolumeID: "vol-1", SnapshotID: "snap-1", SizeGiB: 30})
	snapDone := map[string]string{job.StepSnapshot: mustJSON(map[string]any{"phase": "Completed", "done": 1, "total": 1, "backupTS": backupTS}),
		job.StepSnapshot + ".result": mustJSON(summary)}

	for _, tt := range []struct {
		name string
		o    Observed
		want want
	}{
		{
			name: "initialize starts the pause after the steps' service account",
			o:    obs(member(dpv1alpha1.BackupMemberInitialize, startPause)),
			want: want{actions: []ActionKind{EnsureServiceAccount, CreateJob}, phase: PhasePending, // until the pause reports itself
				check: func(t *testing.T, r Result) {
					j := jobOf(t, r, job.StepPause).Job
					args := j.Spec.Template.Spec.Containers[0].Args
					if !slices.Equal(args[:2], []string{"br", "pause"}) || argValue(args, "--pd") != "http://pd0:2379" || argValue(args, "--member") != "fed-b1" {
						t.Errorf("pause args %v", args)
					}
					if *j.Spec.BackoffLimit != 0 || *j.Spec.ActiveDeadlineSeconds != 600 || j.Name != pauseName {
						t.Errorf("pause Job %s backoff %d deadline %d", j.Name, *j.Spec.BackoffLimit, *j.Spec.ActiveDeadlineSeconds)
					}
					if j.Spec.Template.Spec.ServiceAccountName != job.ServiceAccountName || j.Spec.Template.Spec.Containers[0].Image != "fedbr:test" {
						t.Errorf("pause Job service account %q image %q", j.Spec.Template.Spec.ServiceAccountName, j.Spec.Template.Spec.Containers[0].Image)
					}
					if j.Labels["team"] != "db" || j.Spec.Template.Annotations["iam.amazonaws.com/role"] != "br" {
						t.Errorf("labels/annotations not propagated: %v %v", j.Labels, j.Spec.Template.Annotations)
					}
				}},
		},
		{
			// The pause waits for the manager's go: a pod start (its own, or another plane's
			// snapshot step) must never sit inside the GC pause window.
			name: "initialize without startPause starts the pause armed, without the go",
			o:    obs(member(dpv1alpha1.BackupMemberInitialize), func(o *Observed) { o.Snapshot = active(snapName) }),
			want: want{actions: []ActionKind{EnsureServiceAccount, CreateJob}, phase: PhasePending,
				notTrue: []string{dpv1alpha1.BackupMemberArmedCondition}, check: func(t *testing.T, r Result) {
					if a := jobOf(t, r, job.StepPause).Job.Spec.Template.Spec.Containers[0].Args; !slices.Contains(a, "--wait-start") {
						t.Errorf("pause args %v, want --wait-start", a)
					}
				}},
		},
		{
			// Both steps arm the backup, so they are planned together, their prerequisites once
			// and first: the controller creates the two Jobs at once.
			name: "a new initializer starts its pause and its armed snapshot together",
			o:    obs(member(dpv1alpha1.BackupMemberInitialize), func(o *Observed) { o.Cluster = cluster() }),
			want: want{actions: []ActionKind{EnsureServiceAccount, EnsureConfigMap, CreateJob, CreateJob}, phase: PhasePending,
				check: func(t *testing.T, r Result) {
					jobOf(t, r, job.StepPause)
					jobOf(t, r, job.StepSnapshot)
				}},
		},
		{
			// A TidbCluster with tlsCluster: both steps that dial PD and TiKV mount its cluster
			// client secret and take --ca, --cert and --key from it.
			name: "a TLS cluster's pause and snapshot get its cluster client secret",
			o: obs(member(dpv1alpha1.BackupMemberInitialize), func(o *Observed) {
				o.Cluster = cluster()
				o.TC.Spec.TLSCluster = &pcv1alpha1.TLSCluster{Enabled: true}
			}),
			want: want{actions: []ActionKind{EnsureServiceAccount, EnsureConfigMap, CreateJob, CreateJob}, phase: PhasePending,
				check: func(t *testing.T, r Result) {
					for _, step := range []string{job.StepPause, job.StepSnapshot} {
						ps := jobOf(t, r, step).Job.Spec.Template.Spec
						args := ps.Containers[0].Args
						if argValue(args, "--ca") != "var/lib/fedbr/cluster-client-tls/ca.crt" || argValue(args, "--key") != "var/lib/fedbr/cluster-client-tls/tls.key" {
							t.Errorf("%s args %v, want --ca, --cert and --key in the secret", step, args)
						}
						if !slices.ContainsFunc(ps.Volumes, func(v corev1.Volume) bool {
							return v.Secret != nil && v.Secret.SecretName == "basic-cluster-client-secret"
						}) {
							t.Errorf("%s volumes %+v, want basic-cluster-client-secret", step, ps.Volumes)
						}
					}
				}},
		},
		{
			name: "startPause with the armed pause running: the pause reads it off the member, the agent does nothing",
			o: obs(member(dpv1alpha1.BackupMemberInitialize, startPause), func(o *Observed) {
				o.Pause = active(pauseName)
				o.Report = report(map[string]string{job.StepPause: `{"phase":"Starting"}`})
			}),
			want: want{actions: nil, phase: PhaseInitializing},
		},
		{
			name: "the snapshot step reports Armed: so does the member, for the manager's go",
			o: obs(member(dpv1alpha1.BackupMemberInitialize), func(o *Observed) {
				o.Snapshot = active(snapName)
				o.Pause = active(pauseName)
				o.Report = report(map[string]string{job.StepSnapshot: mustJSON(map[string]any{"phase": "Armed"})})
			}),
			want: want{actions: nil, phase: PhaseArmed, true: []string{dpv1alpha1.BackupMemberArmedCondition},
				reason: map[string]string{dpv1alpha1.BackupMemberArmedCondition: dpv1alpha1.BackupMemberSnapshotArmedReason}},
		},
		{
			name: "a snapshot step that failed at once is not armed",
			o: obs(member(dpv1alpha1.BackupMemberInitialize), func(o *Observed) {
				o.Snapshot = active(snapName)
				o.Report = report(map[string]string{job.StepSnapshot: `{"phase":"Failed","error":"no such volume"}`})
			}),
			want: want{notTrue: []string{dpv1alpha1.BackupMemberArmedCondition}, true: []string{dpv1alpha1.BackupMemberFailedCondition}},
		},
		{
			name: "pause deadline and tool image come from the template",
			o: obs(member(dpv1alpha1.BackupMemberInitialize, startPause, func(m *dpv1alpha1.VolumeBackupMember) {
				m.Spec.Template.VolumeBackupInitJobMaxActiveSeconds = ptr.To[int32](90)
				m.Spec.Template.ToolImage = "custom:1"
				m.Spec.Template.ServiceAccount = "mine"
			})),
			want: want{actions: []ActionKind{CreateJob}, check: func(t *testing.T, r Result) {
				j := jobOf(t, r, job.StepPause).Job
				if *j.Spec.ActiveDeadlineSeconds != 90 || j.Spec.Template.Spec.Containers[0].Image != "custom:1" || j.Spec.Template.Spec.ServiceAccountName != "mine" {
					t.Errorf("pause Job deadline %d image %s sa %s", *j.Spec.ActiveDeadlineSeconds, j.Spec.Template.Spec.Containers[0].Image, j.Spec.Template.Spec.ServiceAccountName)
				}
			}},
		},
		{
			name: "a TidbCluster without PD of its own uses spec.pdAddresses",
			o: obs(member(dpv1alpha1.BackupMemberInitialize, startPause), func(o *Observed) {
				o.TC.Status.PD.Members = nil
				o.TC.Spec.PDAddresses = []string{"http://remote-pd:2379"}
			}),
			want: want{check: func(t *testing.T, r Result) {
				if a := jobOf(t, r, job.StepPause).Job.Spec.Template.Spec.Containers[0].Args; argValue(a, "--pd") != "http://remote-pd:2379" {
					t.Errorf("args %v", a)
				}
			}},
		},
		{
			name: "TidbCluster missing fails the member",
			o:    obs(member(dpv1alpha1.BackupMemberInitialize, startPause), func(o *Observed) { o.TC = nil }),
			want: want{true: []string{dpv1alpha1.BackupMemberFailedCondition}, reason: map[string]string{dpv1alpha1.BackupMemberFailedCondition: dpv1alpha1.TidbClusterNotFoundReason}, phase: PhaseFailed},
		},
		{
			name: "no PD address fails the member",
			o:    obs(member(dpv1alpha1.BackupMemberInitialize, startPause), func(o *Observed) { o.TC.Status.PD.Members = nil }),
			want: want{true: []string{dpv1alpha1.BackupMemberFailedCondition}, reason: map[string]string{dpv1alpha1.BackupMemberFailedCondition: dpv1alpha1.NoPDAddressReason}},
		},
		{
			name: "pause running and not ready yet: wait",
			o: obs(member(dpv1alpha1.BackupMemberInitialize, startPause), func(o *Observed) {
				o.Pause = active(pauseName)
				o.Report = report(map[string]string{job.StepPause: `{"phase":"Starting"}`})
			}),
			want: want{actions: nil, notTrue: []string{dpv1alpha1.BackupMemberInitializedCondition}, phase: PhaseInitializing},
		},
		{
			name: "pause Ready: Initialized at gcPausedAt with the backup ts",
			o: obs(member(dpv1alpha1.BackupMemberInitialize, startPause), func(o *Observed) {
				o.Pause = active(pauseName)
				o.Report = pauseReady
			}),
			want: want{true: []string{dpv1alpha1.BackupMemberInitializedCondition}, phase: PhasePaused,
				check: func(t *testing.T, r Result) {
					c := apimeta.FindStatusCondition(r.Status.Conditions, dpv1alpha1.BackupMemberInitializedCondition)
					if !c.LastTransitionTime.Time.Equal(pausedAt) || c.ObservedGeneration != 3 || r.Status.ObservedGeneration != 3 {
						t.Errorf("Initialized at %v gen %d", c.LastTransitionTime, c.ObservedGeneration)
					}
				}},
		},
		{
			name: "pause reports Failed: member fails",
			o: obs(member(dpv1alpha1.BackupMemberInitialize, startPause), func(o *Observed) {
				o.Pause = active(pauseName)
				o.Report = report(map[string]string{job.StepPause: `{"phase":"Failed","error":"GC safepoint passed the backup ts"}`})
			}),
			want: want{true: []string{dpv1alpha1.BackupMemberFailedCondition}, reason: map[string]string{dpv1alpha1.BackupMemberFailedCondition: dpv1alpha1.BackupMemberPauseFailedReason},
				failMatch: "GC safepoint passed", actions: []ActionKind{StopJob}},
		},
		{
			name: "pause Job past its deadline fails the member",
			o: obs(member(dpv1alpha1.BackupMemberInitialize, ready), func(o *Observed) {
				o.Pause = failed(pauseName, job.ReasonDeadlineExceeded)
				o.Report = pauseReady
			}),
			want: want{reason: map[string]string{dpv1alpha1.BackupMemberFailedCondition: dpv1alpha1.DeadlineExceededReason}, failMatch: "volumeBackupInitJobMaxActiveSeconds"},
		},
		{
			name: "pause Job failed without a report",
			o:    obs(member(dpv1alpha1.BackupMemberInitialize, startPause), func(o *Observed) { o.Pause = failed(pauseName, job.ReasonBackoffLimitExceeded) }),
			want: want{reason: map[string]string{dpv1alpha1.BackupMemberFailedCondition: dpv1alpha1.BackupMemberPauseJobFailedReason}, failMatch: "BackoffLimitExceeded"},
		},
		{
			name: "pause pod deleted after readiness, nothing asked it to stop: the member fails although GC resumed",
			o: obs(member(dpv1alpha1.BackupMemberInitialize, ready), func(o *Observed) {
				o.Pause = active(pauseName)
				o.Report = report(map[string]string{job.StepPause: mustJSON(map[string]any{"phase": "Stopped", "backupTS": backupTS, "gcPausedAt": pausedAt, "liftedAt": liftedAt})})
			}),
			want: want{true: []string{dpv1alpha1.BackupMemberFailedCondition, dpv1alpha1.BackupMemberGCResumedCondition},
				reason: map[string]string{dpv1alpha1.BackupMemberFailedCondition: dpv1alpha1.BackupMemberPauseEndedUnaskedReason}, failMatch: "deleted or evicted",
				actions: []ActionKind{StopJob}},
		},
		{
			name: "pause stopping on SIGTERM, nothing asked it to stop: the member fails at once",
			o: obs(member(dpv1alpha1.BackupMemberExecute, ready, execute), func(o *Observed) {
				o.Pause = active(pauseName)
				o.Report = report(map[string]string{job.StepPause: mustJSON(map[string]any{"phase": "Stopping", "backupTS": backupTS, "gcPausedAt": pausedAt})})
			}),
			want: want{reason: map[string]string{dpv1alpha1.BackupMemberFailedCondition: dpv1alpha1.BackupMemberPauseEndedUnaskedReason}, actions: []ActionKind{StopJob}},
		},
		{
			name: "pause Job completed without the manager asking: the member fails",
			o: obs(member(dpv1alpha1.BackupMemberInitialize, ready), func(o *Observed) {
				o.Pause = succeeded(pauseName)
				o.Report = pauseReady
			}),
			want: want{reason: map[string]string{dpv1alpha1.BackupMemberFailedCondition: dpv1alpha1.BackupMemberPauseEndedUnaskedReason}, failMatch: "Job completed"},
		},
		{
			name: "pause stopped after the manager asked (resumeGC): GC resumed, no failure",
			o: obs(member(dpv1alpha1.BackupMemberExecute, ready, execute, func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.ResumeGC = true }), func(o *Observed) {
				o.Pause = succeeded(pauseName)
				o.Report = report(map[string]string{job.StepPause: mustJSON(map[string]any{"phase": "Stopped", "backupTS": backupTS, "gcPausedAt": pausedAt, "liftedAt": liftedAt})})
				o.Snapshot = active(snapName)
			}),
			want: want{true: []string{dpv1alpha1.BackupMemberGCResumedCondition}, notTrue: []string{dpv1alpha1.BackupMemberFailedCondition}},
		},
		{
			name: "initializer in execute keeps the pause and starts its snapshot",
			o: obs(member(dpv1alpha1.BackupMemberExecute, ready, execute), func(o *Observed) {
				o.Pause = active(pauseName)
				o.Report = pauseReady
				o.Cluster = cluster()
			}),
			want: want{actions: []ActionKind{EnsureServiceAccount, EnsureConfigMap, CreateJob}, phase: PhasePaused, // Snapshotting once the snapshot step reports
				check: func(t *testing.T, r Result) {
					a := jobOf(t, r, job.StepSnapshot).Job
					args := a.Spec.Template.Spec.Containers[0].Args
					for flag, v := range map[string]string{"--backup-ts": tsText, "--backup-id": "uid-1", "--storage": "s3://bk/nightly-az1", "--cluster": "az1",
						"--region": "us-west-2", "--aws-endpoint": "http://127.0.0.1:4566", "--volumes": "etc/fedbr/backup/volumes.json", "--member": "fed-b1",
						"--owner": "kube-system-uid/tidb"} {
						if got := argValue(args, flag); got != v {
							t.Errorf("%s = %q, want %q (args %v)", flag, got, v, args)
						}
					}
					if r.Status.BackupPath != "s3://bk/nightly-az1" {
						t.Errorf("backupPath %q", r.Status.BackupPath)
					}
					if !slices.Contains(r.Status.TiKVVolumes, "vol-1") {
						t.Errorf("tikvVolumes %v, want the volumes handed the step (vol-1)", r.Status.TiKVVolumes)
					}
					inputs := r.Actions[1].ConfigMap
					rec := inputs.Data[VolumesKey]
					if !strings.Contains(rec, `"vol-1"`) || !strings.Contains(rec, `"i-0abc"`) || !strings.Contains(rec, `"storage.data-dir"`) {
						t.Errorf("volume file %s", rec)
					}
				}},
		},
		{
			name: "with --save-step-logs the snapshot step saves its log",
			o: obs(member(dpv1alpha1.BackupMemberExecute, ready, execute), func(o *Observed) {
				o.Pause = active(pauseName)
				o.Report = pauseReady
				o.Cluster = cluster()
				o.Env.SaveStepLogs = true
			}),
			want: want{actions: []ActionKind{EnsureServiceAccount, EnsureConfigMap, CreateJob}, phase: PhasePaused,
				check: func(t *testing.T, r Result) {
					if args := jobOf(t, r, job.StepSnapshot).Job.Spec.Template.Spec.Containers[0].Args; args[len(args)-1] != "--save-log" {
						t.Errorf("snapshot args %v, want --save-log last", args)
					}
				}},
		},
		{
			name: "execute before the backup ts: the snapshot step starts armed, waiting for the ts",
			o:    obs(member(dpv1alpha1.BackupMemberExecute), func(o *Observed) { o.Cluster = cluster() }),
			want: want{actions: []ActionKind{EnsureServiceAccount, EnsureConfigMap, CreateJob},
				check: func(t *testing.T, r Result) {
					args := jobOf(t, r, job.StepSnapshot).Job.Spec.Template.Spec.Containers[0].Args
					if !slices.Contains(args, "--wait-backup-ts") || slices.Contains(args, "--backup-ts") {
						t.Errorf("armed snapshot args %v", args)
					}
				}},
		},
		{
			name: "the initializer arms its snapshot beside its pause once the cluster is observed",
			o: obs(member(dpv1alpha1.BackupMemberInitialize, startPause), func(o *Observed) {
				o.Cluster, o.Pause = cluster(), active(pauseName)
				o.Report = report(map[string]string{job.StepPause: `{"phase":"Starting"}`})
			}),
			want: want{actions: []ActionKind{EnsureServiceAccount, EnsureConfigMap, CreateJob}, phase: PhaseInitializing,
				check: func(t *testing.T, r Result) {
					if args := jobOf(t, r, job.StepSnapshot).Job.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--wait-backup-ts") {
						t.Errorf("armed snapshot args %v", args)
					}
				}},
		},
		{
			name: "a backup ts arrives: the armed step reads it off the member, the agent does nothing",
			o: obs(member(dpv1alpha1.BackupMemberExecute, execute), func(o *Observed) {
				o.Cluster = cluster()
				o.Snapshot = active(snapName)
				o.Report = report(map[string]string{job.StepSnapshot: mustJSON(map[string]any{"phase": "Armed"})})
			}),
			want: want{actions: nil},
		},
		{
			name: "execute with a malformed backup ts fails clearly",
			o:    obs(member(dpv1alpha1.BackupMemberExecute, func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.BackupTS = "x" }), func(o *Observed) { o.Cluster = cluster() }),
			want: want{reason: map[string]string{dpv1alpha1.BackupMemberFailedCondition: dpv1alpha1.BackupMemberNoBackupTSReason}, failMatch: "spec.backupTS"},
		},
		{
			name: "execute on a volume that is not EBS fails discovery",
			o: obs(member(dpv1alpha1.BackupMemberExecute, execute), func(o *Observed) {
				o.Cluster = cluster()
				o.Cluster.PVs["pv-1"].Spec.CSI.Driver = "hostpath.csi.k8s.io"
			}),
			want: want{reason: map[string]string{dpv1alpha1.BackupMemberFailedCondition: dpv1alpha1.BackupMemberVolumeDiscoveryFailedReason}, failMatch: "hostpath.csi.k8s.io"},
		},
		{
			name: "execute with the wrong TiKV count fails discovery",
			o: obs(member(dpv1alpha1.BackupMemberExecute, execute), func(o *Observed) {
				o.Cluster = cluster()
				o.Cluster.TC.Spec.TiKV.Replicas = 3
			}),
			want: want{reason: map[string]string{dpv1alpha1.BackupMemberFailedCondition: dpv1alpha1.BackupMemberVolumeDiscoveryFailedReason}, failMatch: "wants 3 TiKV pods"},
		},
		{
			name: "gcs storage is refused",
			o: obs(member(dpv1alpha1.BackupMemberExecute, execute, func(m *dpv1alpha1.VolumeBackupMember) {
				m.Spec.Template.StorageProvider = fedv1alpha1.StorageProvider{Gcs: &fedv1alpha1.GcsStorageProvider{ProjectId: "p"}}
			}), func(o *Observed) { o.Cluster = cluster() }),
			want: want{reason: map[string]string{dpv1alpha1.BackupMemberFailedCondition: dpv1alpha1.InvalidStorageReason}},
		},
		{
			name: "snapshots started: SnapshotsCreated with the total",
			o: obs(member(dpv1alpha1.BackupMemberExecute, execute), func(o *Observed) {
				o.Snapshot = active(snapName)
				o.Report = report(map[string]string{job.StepSnapshot: `{"phase":"Waiting","done":1,"total":3,"backupTS":470802380936708097}`})
			}),
			want: want{true: []string{dpv1alpha1.BackupMemberSnapshotsCreatedCondition}, notTrue: []string{dpv1alpha1.BackupMemberCompleteCondition},
				phase: PhaseSnapshotsCreated, check: func(t *testing.T, r Result) {
					if r.Status.SnapshotsTotal != 3 || r.Status.SnapshotsCompleted != 1 {
						t.Errorf("total %d completed %d", r.Status.SnapshotsTotal, r.Status.SnapshotsCompleted)
					}
				}},
		},
		{
			name: "resumeGC: the pause lifts on the spec it watches, the agent does not stop it",
			o: obs(member(dpv1alpha1.BackupMemberExecute, ready, execute, func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.ResumeGC = true }), func(o *Observed) {
				o.Pause = active(pauseName)
				o.Snapshot = active(snapName)
				o.Report = pauseReady
			}),
			want: want{actions: nil, notTrue: []string{dpv1alpha1.BackupMemberGCResumedCondition}},
		},
		{
			name: "pause Stopped: GCResumed at liftedAt",
			o: obs(member(dpv1alpha1.BackupMemberExecute, ready, execute, func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.ResumeGC = true }), func(o *Observed) {
				o.Pause = active(pauseName)
				o.Pause.Suspended = true
				o.Snapshot = active(snapName)
				o.Report = report(map[string]string{job.StepPause: mustJSON(map[string]any{"phase": "Stopped", "backupTS": backupTS, "liftedAt": liftedAt})})
			}),
			want: want{actions: nil, true: []string{dpv1alpha1.BackupMemberGCResumedCondition, dpv1alpha1.BackupMemberInitializedCondition},
				check: func(t *testing.T, r Result) {
					if c := apimeta.FindStatusCondition(r.Status.Conditions, dpv1alpha1.BackupMemberGCResumedCondition); !c.LastTransitionTime.Time.Equal(liftedAt) {
						t.Errorf("GCResumed at %v, want %v", c.LastTransitionTime, liftedAt)
					}
				}},
		},
		{
			name: "a pause that fails while stopping still counts as resumed",
			o: obs(member(dpv1alpha1.BackupMemberTeardown, ready, execute), func(o *Observed) {
				o.Pause = failed(pauseName, "Error")
				o.Report = report(map[string]string{job.StepPause: `{"phase":"Failed","backupTS":470802380936708097,"error":"resume schedulers: timeout"}`})
			}),
			want: want{true: []string{dpv1alpha1.BackupMemberGCResumedCondition}, notTrue: []string{dpv1alpha1.BackupMemberFailedCondition},
				reason: map[string]string{dpv1alpha1.BackupMemberGCResumedCondition: dpv1alpha1.BackupMemberPauseEndedReason}},
		},
		{
			// Complete is written without waiting for a Job: the manager completes the backup on it.
			name: "snapshots completed and confirmed: Complete with commit ts, the size step not yet (never the volumes' capacity as size)",
			o: obs(member(dpv1alpha1.BackupMemberExecute, execute), func(o *Observed) {
				o.Snapshot = succeeded(snapName)
				o.Report = report(snapDone)
				o.Confirm = confirmation()
			}),
			want: want{actions: nil,
				true: []string{dpv1alpha1.BackupMemberCompleteCondition, dpv1alpha1.BackupMemberSnapshotsCreatedCondition}, phase: PhaseComplete, commitTs: tsText,
				check: func(t *testing.T, r Result) {
					if r.Status.BackupSize != 0 || r.Status.SnapshotsCompleted != 1 || r.Status.TimeCompleted == nil {
						t.Errorf("status %+v", r.Status)
					}
					if c := apimeta.FindStatusCondition(r.Status.Conditions, dpv1alpha1.BackupMemberSizedCondition); c != nil {
						t.Errorf("Sized = %+v before Complete was recorded", c)
					}
				}},
		},
		{
			name: "Complete recorded: the size step starts",
			o: obs(member(dpv1alpha1.BackupMemberExecute, execute, withCond(dpv1alpha1.BackupMemberCompleteCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotsCompletedReason)),
				func(o *Observed) {
					o.Snapshot = succeeded(snapName)
					o.Report = report(snapDone)
				}),
			want: want{actions: []ActionKind{EnsureServiceAccount, CreateJob}, phase: PhaseComplete,
				reason: map[string]string{dpv1alpha1.BackupMemberSizedCondition: dpv1alpha1.BackupMemberSizingReason},
				check: func(t *testing.T, r Result) {
					args := jobOf(t, r, job.StepSize).Job.Spec.Template.Spec.Containers[0].Args
					if !slices.Equal(args[:2], []string{"br", "size"}) || argValue(args, "--level") != "all" ||
						argValue(args, "--storage") != "s3://bk/nightly-az1" || argValue(args, "--member") != "fed-b1" {
						t.Errorf("size args %v", args)
					}
				}},
		},
		{
			// The report is the step's, writable by whoever can act as its service account: a
			// Completed report naming snapshots AWS does not have fails the member.
			name: "snapshots completed but not found in AWS: SnapshotsNotConfirmed, never Complete",
			o: obs(member(dpv1alpha1.BackupMemberExecute, execute), func(o *Observed) {
				o.Snapshot = succeeded(snapName)
				o.Report = report(snapDone)
				o.Confirm = &Confirmation{Volumes: []string{"vol-1"}}
			}),
			want: want{notTrue: []string{dpv1alpha1.BackupMemberCompleteCondition}, phase: PhaseFailed,
				reason:    map[string]string{dpv1alpha1.BackupMemberFailedCondition: dpv1alpha1.BackupMemberSnapshotsNotConfirmedReason},
				failMatch: `snapshot "snap-1": not found in AWS`},
		},
		{
			name: "snapshots completed, AWS unreachable: not Complete, Failed=False CloudUnreachable, retried",
			o: obs(member(dpv1alpha1.BackupMemberExecute, execute), func(o *Observed) {
				o.Snapshot = succeeded(snapName)
				o.Report = report(snapDone)
				o.Confirm = &Confirmation{Volumes: []string{"vol-1"}, CloudErr: errors.New("connection refused")}
			}),
			want: want{notTrue: []string{dpv1alpha1.BackupMemberCompleteCondition, dpv1alpha1.BackupMemberFailedCondition}, requeue: true,
				reason:    map[string]string{dpv1alpha1.BackupMemberFailedCondition: dpv1alpha1.BackupMemberCloudUnreachableReason},
				failMatch: "connection refused"},
		},
		{
			name: "snapshots completed, the TiKV volumes not discoverable now: not Complete, retried",
			o: obs(member(dpv1alpha1.BackupMemberExecute, execute), func(o *Observed) {
				o.Snapshot = succeeded(snapName)
				o.Report = report(snapDone)
				o.Confirm = &Confirmation{DiscoveryErr: errors.New("claim tikv-basic-tikv-0 not found")}
			}),
			want: want{notTrue: []string{dpv1alpha1.BackupMemberCompleteCondition, dpv1alpha1.BackupMemberFailedCondition}, requeue: true,
				reason:    map[string]string{dpv1alpha1.BackupMemberFailedCondition: dpv1alpha1.BackupMemberVolumeDiscoveryFailedReason},
				failMatch: "tikv-basic-tikv-0"},
		},
		{
			name: "a confirmation after a retry leaves no Failed=False behind",
			o: obs(member(dpv1alpha1.BackupMemberExecute, execute,
				withCond(dpv1alpha1.BackupMemberFailedCondition, metav1.ConditionFalse, dpv1alpha1.BackupMemberCloudUnreachableReason)), func(o *Observed) {
				o.Snapshot = succeeded(snapName)
				o.Report = report(snapDone)
				o.Confirm = confirmation()
			}),
			want: want{actions: nil, true: []string{dpv1alpha1.BackupMemberCompleteCondition}, phase: PhaseComplete, commitTs: tsText,
				check: func(t *testing.T, r Result) {
					if c := apimeta.FindStatusCondition(r.Status.Conditions, dpv1alpha1.BackupMemberFailedCondition); c != nil {
						t.Errorf("Failed = %+v, want none", c)
					}
				}},
		},
		{
			name: "snapshot reports Failed: member fails and the initializer's pause is lifted at once",
			o: obs(member(dpv1alpha1.BackupMemberExecute, ready, execute), func(o *Observed) {
				o.Pause = active(pauseName)
				o.Snapshot = failed(snapName, job.ReasonBackoffLimitExceeded)
				o.Report = report(map[string]string{job.StepSnapshot: `{"phase":"Failed","error":"snapshot snap-2 is in the error state"}`})
			}),
			want: want{actions: []ActionKind{StopJob}, reason: map[string]string{dpv1alpha1.BackupMemberFailedCondition: dpv1alpha1.BackupMemberSnapshotFailedReason}, failMatch: "error state"},
		},
		{
			name: "snapshot Job succeeded without a summary is an invalid report",
			o:    obs(member(dpv1alpha1.BackupMemberExecute, execute), func(o *Observed) { o.Snapshot = succeeded(snapName) }),
			want: want{reason: map[string]string{dpv1alpha1.BackupMemberFailedCondition: dpv1alpha1.InvalidReportReason}},
		},
		{
			name: "a finished snapshot Job removed by its TTL is not started again",
			o: obs(member(dpv1alpha1.BackupMemberExecute, execute, withCond(dpv1alpha1.BackupMemberCompleteCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotsCompletedReason),
				withCond(dpv1alpha1.BackupMemberSizedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSizedReason)),
				func(o *Observed) { o.Report = report(snapDone) }),
			want: want{actions: nil, phase: PhaseComplete},
		},
		{
			name: "teardown before completion stops the snapshot step; the pause lifts on the spec",
			o: obs(member(dpv1alpha1.BackupMemberTeardown, ready, execute), func(o *Observed) {
				o.Pause = active(pauseName)
				o.Snapshot = active(snapName)
			}),
			want: want{actions: []ActionKind{DeleteJob}, reason: map[string]string{dpv1alpha1.BackupMemberFailedCondition: dpv1alpha1.BackupMemberTornDownReason}},
		},
		{
			// The manager tore the member down (another member failed) after the step reported
			// its snapshots completed, before this agent confirmed them or saw the step's Job
			// finish: the step is exiting and must not be stopped (it would delete the
			// snapshots it completed).
			name: "teardown on the step's completion report does not stop the step",
			o: obs(member(dpv1alpha1.BackupMemberTeardown, execute, func(m *dpv1alpha1.VolumeBackupMember) {
				at := metav1.NewMicroTime(t0)
				m.Status.Steps = []dpv1alpha1.StepReport{{Name: job.StepSnapshot, Phase: job.PhaseCompleted, BackupTS: backupTS,
					StartedAt: &at, CompletedAt: &at, Result: &runtime.RawExtension{Raw: []byte(`{"resolvedTS":1}`)}}}
			}), func(o *Observed) { o.Snapshot = active(snapName) }),
			want: want{actions: nil, notTrue: []string{dpv1alpha1.BackupMemberFailedCondition}},
		},
		{
			name: "teardown after completion changes nothing (the size step keeps running)",
			o: obs(member(dpv1alpha1.BackupMemberTeardown, execute, withCond(dpv1alpha1.BackupMemberCompleteCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotsCompletedReason)),
				func(o *Observed) {
					o.Snapshot, o.Size = succeeded(snapName), active(sizeName)
					o.Report = report(snapDone)
				}),
			want: want{actions: nil, phase: PhaseComplete, notTrue: []string{dpv1alpha1.BackupMemberFailedCondition},
				reason: map[string]string{dpv1alpha1.BackupMemberSizedCondition: dpv1alpha1.BackupMemberSizingReason}},
		},
	} {
		t.Run(tt.name, func(t *testing.T) { check(t, planned(t, tt.o), tt.want) })
	}
}

// TestPlanSize covers the size step after completion: every calcSizeLevel, its result, its
// failures (never the backup's), and that it runs once; and a failed member's size, what its
// snapshot step measured before deleting its snapshots.
func TestPlanSize(t *testing.T) {
	complete := withCond(dpv1alpha1.BackupMemberCompleteCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotsCompletedReason)
	level := func(l fedv1alpha1.CalcSizeLevel) func(*dpv1alpha1.VolumeBackupMember) {
		return func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.Template.CalcSizeLevel = l }
	}
	sized := report(map[string]string{job.StepSize: `{"phase":"Completed"}`,
		job.StepSize + ".result": `{"level":"all","volumes":[{"storeID":1}],"fullBytes":3000,"incrementalBytes":1000,"full":"3.0 kB","incremental":"1.0 kB","elapsedSeconds":1.5}`})
	sizes := func(full, incremental int64) func(*testing.T, Result) {
		return func(t *testing.T, r Result) {
			if r.Status.BackupSize != full || r.Status.IncrementalBackupSize != incremental {
				t.Errorf("sizes %d/%d, want %d/%d", r.Status.BackupSize, r.Status.IncrementalBackupSize, full, incremental)
			}
		}
	}
	levelArg := func(want string) func(*testing.T, Result) {
		return func(t *testing.T, r Result) {
			if got := argValue(jobOf(t, r, job.StepSize).Job.Spec.Template.Spec.Containers[0].Args, "--level"); got != want {
				t.Errorf("--level %q, want %q", got, want)
			}
		}
	}
	start := []ActionKind{EnsureServiceAccount, CreateJob}
	sizing := map[string]string{dpv1alpha1.BackupMemberSizedCondition: dpv1alpha1.BackupMemberSizingReason}
	execute := func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.BackupTS = tsText; m.Status.SnapshotsTotal = 6 }
	failedSized := `{"phase":"Failed","error":"wait for snapshots: snapshot snap-6 failed","total":6,"sized":5,"sizedBytes":5242880}`
	noSizedCondition := func(t *testing.T, r Result) {
		t.Helper()
		if apimeta.FindStatusCondition(r.Status.Conditions, dpv1alpha1.BackupMemberSizedCondition) != nil {
			t.Error("the member got a Sized condition")
		}
	}
	for _, tt := range []struct {
		name string
		o    Observed
		want want
	}{
		{name: "calcSizeLevel full lists no changed blocks", o: obs(member(dpv1alpha1.BackupMemberTeardown, complete, level(fedv1alpha1.CalcSizeFull))),
			want: want{actions: start, reason: sizing, check: levelArg("full")}},
		{name: "calcSizeLevel incremental runs level all (the full size comes free)", o: obs(member(dpv1alpha1.BackupMemberTeardown, complete, level(fedv1alpha1.CalcSizeIncremental))),
			want: want{actions: start, reason: sizing, check: levelArg("all")}},
		{name: "calcSizeLevel none: no Job, said so", o: obs(member(dpv1alpha1.BackupMemberTeardown, complete, level(fedv1alpha1.CalcSizeNone))),
			want: want{reason: map[string]string{dpv1alpha1.BackupMemberSizedCondition: dpv1alpha1.BackupMemberSizeNotWantedReason}, check: sizes(0, 0)}},
		{name: "the size step runs: nothing to do", o: obs(member(dpv1alpha1.BackupMemberTeardown, complete), func(o *Observed) { o.Size = active(sizeName) }),
			want: want{reason: sizing}},
		{name: "result: both sizes, Sized", o: obs(member(dpv1alpha1.BackupMemberTeardown, complete), func(o *Observed) { o.Size = succeeded(sizeName); o.Report = sized }),
			want: want{true: []string{dpv1alpha1.BackupMemberSizedCondition, dpv1alpha1.BackupMemberCompleteCondition}, phase: PhaseComplete, check: sizes(3000, 1000)}},
		{name: "result at level full: the full size only", o: obs(member(dpv1alpha1.BackupMemberTeardown, complete, level(fedv1alpha1.CalcSizeFull)), func(o *Observed) { o.Report = sized }),
			want: want{true: []string{dpv1alpha1.BackupMemberSizedCondition}, check: sizes(3000, 0)}},
		{name: "result at level incremental: the incremental size only", o: obs(member(dpv1alpha1.BackupMemberTeardown, complete, level(fedv1alpha1.CalcSizeIncremental)), func(o *Observed) { o.Report = sized }),
			want: want{true: []string{dpv1alpha1.BackupMemberSizedCondition}, check: sizes(0, 1000)}},
		{name: "the size step reports Failed: Sized=False, the member stays Complete",
			o: obs(member(dpv1alpha1.BackupMemberTeardown, complete), func(o *Observed) {
				o.Size = failed(sizeName, job.ReasonBackoffLimitExceeded)
				o.Report = report(map[string]string{job.StepSize: `{"phase":"Failed","error":"size snapshot snap-1: throttled"}`})
			}),
			want: want{reason: map[string]string{dpv1alpha1.BackupMemberSizedCondition: dpv1alpha1.BackupMemberSizeFailedReason}, true: []string{dpv1alpha1.BackupMemberCompleteCondition},
				notTrue: []string{dpv1alpha1.BackupMemberFailedCondition}, phase: PhaseComplete,
				check: func(t *testing.T, r Result) {
					if c := apimeta.FindStatusCondition(r.Status.Conditions, dpv1alpha1.BackupMemberSizedCondition); !strings.Contains(c.Message, "throttled") {
						t.Errorf("Sized message %q does not say why", c.Message)
					}
				}},
		},
		{name: "the size Job failed without a report", o: obs(member(dpv1alpha1.BackupMemberTeardown, complete), func(o *Observed) { o.Size = failed(sizeName, job.ReasonDeadlineExceeded) }),
			want: want{reason: map[string]string{dpv1alpha1.BackupMemberSizedCondition: dpv1alpha1.BackupMemberSizeFailedReason}, notTrue: []string{dpv1alpha1.BackupMemberFailedCondition}}},
		{name: "the size Job succeeded without a result", o: obs(member(dpv1alpha1.BackupMemberTeardown, complete), func(o *Observed) { o.Size = succeeded(sizeName) }),
			want: want{reason: map[string]string{dpv1alpha1.BackupMemberSizedCondition: dpv1alpha1.BackupMemberSizeFailedReason}}},
		{name: "a failed sizing is not retried once its Job is gone",
			o:    obs(member(dpv1alpha1.BackupMemberTeardown, complete, withCond(dpv1alpha1.BackupMemberSizedCondition, metav1.ConditionFalse, dpv1alpha1.BackupMemberSizeFailedReason))),
			want: want{reason: map[string]string{dpv1alpha1.BackupMemberSizedCondition: dpv1alpha1.BackupMemberSizeFailedReason}}},
		{name: "a failed member is not sized by a size Job",
			o:    obs(member(dpv1alpha1.BackupMemberTeardown, complete, withCond(dpv1alpha1.BackupMemberFailedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotFailedReason))),
			want: want{check: noSizedCondition}},

		// A failed member reports what its snapshot step measured before deleting its snapshots.
		{name: "the snapshot step failed after sizing what completed: Sized=True SizedBeforeCleanup, backupSize, the failure's reason kept",
			o: obs(member(dpv1alpha1.BackupMemberExecute, execute), func(o *Observed) {
				o.Snapshot = failed(snapName, job.ReasonBackoffLimitExceeded)
				o.Report = report(map[string]string{job.StepSnapshot: failedSized})
			}),
			want: want{actions: nil, phase: PhaseFailed, true: []string{dpv1alpha1.BackupMemberFailedCondition, dpv1alpha1.BackupMemberSizedCondition},
				reason: map[string]string{dpv1alpha1.BackupMemberFailedCondition: dpv1alpha1.BackupMemberSnapshotFailedReason,
					dpv1alpha1.BackupMemberSizedCondition: dpv1alpha1.BackupMemberSizedBeforeCleanupReason},
				check: func(t *testing.T, r Result) {
					sizes(5242880, 0)(t, r)
					c := apimeta.FindStatusCondition(r.Status.Conditions, dpv1alpha1.BackupMemberSizedCondition)
					if want := "full 5.0 MiB over the 5 snapshots that had completed (of 6)"; !strings.Contains(c.Message, want) {
						t.Errorf("Sized message %q lacks %q", c.Message, want)
					}
					if f := apimeta.FindStatusCondition(r.Status.Conditions, dpv1alpha1.BackupMemberFailedCondition); !strings.Contains(f.Message, "snap-6 failed") {
						t.Errorf("Failed message %q lost the failure", f.Message)
					}
				}}},
		{name: "at level incremental the failed member's full size is not reported",
			o: obs(member(dpv1alpha1.BackupMemberExecute, execute, level(fedv1alpha1.CalcSizeIncremental)), func(o *Observed) {
				o.Snapshot = failed(snapName, job.ReasonBackoffLimitExceeded)
				o.Report = report(map[string]string{job.StepSnapshot: failedSized})
			}),
			want: want{phase: PhaseFailed, true: []string{dpv1alpha1.BackupMemberFailedCondition}, check: func(t *testing.T, r Result) { noSizedCondition(t, r); sizes(0, 0)(t, r) }}},
		{name: "calcSizeLevel none: the failed member's measure is not reported",
			o: obs(member(dpv1alpha1.BackupMemberExecute, execute, level(fedv1alpha1.CalcSizeNone)), func(o *Observed) {
				o.Snapshot = failed(snapName, job.ReasonBackoffLimitExceeded)
				o.Report = report(map[string]string{job.StepSnapshot: failedSized})
			}),
			want: want{phase: PhaseFailed, check: func(t *testing.T, r Result) { noSizedCondition(t, r); sizes(0, 0)(t, r) }}},
		{name: "the snapshot step failed before any snapshot completed: no size",
			o: obs(member(dpv1alpha1.BackupMemberExecute, execute), func(o *Observed) {
				o.Snapshot = failed(snapName, job.ReasonBackoffLimitExceeded)
				o.Report = report(map[string]string{job.StepSnapshot: `{"phase":"Failed","error":"the pause no longer holds","total":6}`})
			}),
			want: want{phase: PhaseFailed, reason: map[string]string{dpv1alpha1.BackupMemberFailedCondition: dpv1alpha1.BackupMemberSnapshotFailedReason},
				check: func(t *testing.T, r Result) { noSizedCondition(t, r); sizes(0, 0)(t, r) }}},
		{name: "the failed member's size is set once and kept",
			o: obs(member(dpv1alpha1.BackupMemberTeardown, execute, withCond(dpv1alpha1.BackupMemberFailedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotFailedReason),
				withCond(dpv1alpha1.BackupMemberSizedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSizedBeforeCleanupReason),
				func(m *dpv1alpha1.VolumeBackupMember) { m.Status.BackupSize = 5242880 }), func(o *Observed) {
				o.Report = report(map[string]string{job.StepSnapshot: failedSized})
			}),
			want: want{actions: nil, phase: PhaseFailed, check: sizes(5242880, 0)}},
	} {
		t.Run(tt.name, func(t *testing.T) { check(t, planned(t, tt.o), tt.want) })
	}
}

func TestPlanDeletion(t *testing.T) {
	started := func(m *dpv1alpha1.VolumeBackupMember) { m.Status.BackupPath = "s3://bk/nightly-az1" }
	complete := withCond(dpv1alpha1.BackupMemberCompleteCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotsCompletedReason)
	failedCond := withCond(dpv1alpha1.BackupMemberFailedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotFailedReason)
	clean1 := CleanJobName("fed-b1", 1)
	for _, tt := range []struct {
		name string
		o    Observed
		want want
	}{
		{
			name: "Retain drops the finalizer at once",
			o:    obs(member(dpv1alpha1.BackupMemberTeardown, deleting(fedv1alpha1.CleanPolicyRetain), started, complete)),
			want: want{release: true, reason: map[string]string{dpv1alpha1.BackupMemberCleanedCondition: dpv1alpha1.BackupMemberRetainedReason}},
		},
		{
			name: "a pause still running sees the deletion itself",
			o: obs(member(dpv1alpha1.BackupMemberInitialize, deleting(fedv1alpha1.CleanPolicyRetain)), func(o *Observed) {
				o.Pause = active(pauseName)
			}),
			want: want{actions: nil, release: true},
		},
		{
			// It may write under the backup's storage as it exits (its saved log): the clean
			// starts once its pod is gone, so nothing of it outlives the clean.
			name: "a size step still running is stopped, and the clean waits for it",
			o: obs(member(dpv1alpha1.BackupMemberTeardown, deleting(fedv1alpha1.CleanPolicyDelete), started, complete), func(o *Observed) {
				o.Size = active(sizeName)
			}),
			want: want{actions: []ActionKind{DeleteJob}, phase: PhaseCleaning, failMatch: "waiting for the size step to stop before cleaning",
				reason: map[string]string{dpv1alpha1.BackupMemberCleanedCondition: dpv1alpha1.BackupMemberCleaningReason},
				check: func(t *testing.T, r Result) {
					if r.Actions[0].Name != sizeName {
						t.Errorf("deleted %q, want the size Job", r.Actions[0].Name)
					}
				}},
		},
		{
			name: "a size step being stopped: the clean still waits",
			o: obs(member(dpv1alpha1.BackupMemberTeardown, deleting(fedv1alpha1.CleanPolicyDelete), started, complete), func(o *Observed) {
				o.Size = active(sizeName)
				o.Size.Deleting = true
			}),
			want: want{actions: nil, phase: PhaseCleaning, failMatch: "waiting for the size step to stop before cleaning"},
		},
		{
			name: "a size step stopped: the clean starts",
			o: obs(member(dpv1alpha1.BackupMemberTeardown, deleting(fedv1alpha1.CleanPolicyDelete), started, complete), func(o *Observed) {
				o.Size = failed(sizeName, job.ReasonBackoffLimitExceeded)
			}),
			want: want{actions: []ActionKind{EnsureServiceAccount, CreateJob}, phase: PhaseCleaning},
		},
		{
			name: "OnFailure keeps a complete backup",
			o:    obs(member(dpv1alpha1.BackupMemberTeardown, deleting(fedv1alpha1.CleanPolicyOnFailure), started, complete)),
			want: want{release: true},
		},
		{
			name: "OnFailure cleans a failed backup",
			o:    obs(member(dpv1alpha1.BackupMemberTeardown, deleting(fedv1alpha1.CleanPolicyOnFailure), started, failedCond)),
			want: want{actions: []ActionKind{EnsureServiceAccount, CreateJob}, check: func(t *testing.T, r Result) {
				args := jobOf(t, r, job.StepClean).Job.Spec.Template.Spec.Containers[0].Args
				if argValue(args, "--backup-outcome") != "failed" {
					t.Errorf("args %v", args)
				}
			}},
		},
		{
			name: "Delete runs clean attempt 1 with the backup id",
			o:    obs(member(dpv1alpha1.BackupMemberTeardown, deleting(fedv1alpha1.CleanPolicyDelete), started, complete)),
			want: want{actions: []ActionKind{EnsureServiceAccount, CreateJob}, phase: PhaseCleaning,
				reason: map[string]string{dpv1alpha1.BackupMemberCleanedCondition: dpv1alpha1.BackupMemberCleaningReason},
				check: func(t *testing.T, r Result) {
					j := jobOf(t, r, job.StepClean).Job
					args := j.Spec.Template.Spec.Containers[0].Args
					if j.Name != clean1 || argValue(args, "--backup-id") != "uid-1" || argValue(args, "--backup-outcome") != "completed" ||
						argValue(args, "--delete-ratio") != "1" || argValue(args, "--storage") != "s3://bk/nightly-az1" {
						t.Errorf("clean Job %s args %v", j.Name, args)
					}
					if len(j.OwnerReferences) != 0 {
						t.Errorf("clean Job must survive a foreground deletion: owners %v", j.OwnerReferences)
					}
				}},
		},
		{
			name: "a member that never snapshotted has nothing to clean",
			o:    obs(member(dpv1alpha1.BackupMemberInitialize, deleting(fedv1alpha1.CleanPolicyDelete))),
			want: want{release: true, true: []string{dpv1alpha1.BackupMemberCleanedCondition}},
		},
		{
			name: "a running snapshot is stopped before cleaning",
			o: obs(member(dpv1alpha1.BackupMemberExecute, deleting(fedv1alpha1.CleanPolicyDelete), started), func(o *Observed) {
				o.Snapshot = active(snapName)
			}),
			want: want{actions: []ActionKind{DeleteJob}},
		},
		{
			name: "a complete backup's snapshot Job still exiting is not stopped",
			o: obs(member(dpv1alpha1.BackupMemberTeardown, deleting(fedv1alpha1.CleanPolicyDelete), started, complete), func(o *Observed) {
				o.Snapshot = active(snapName)
			}),
			want: want{actions: []ActionKind{EnsureServiceAccount, CreateJob}},
		},
		{
			name: "clean running: wait",
			o: obs(member(dpv1alpha1.BackupMemberTeardown, deleting(fedv1alpha1.CleanPolicyDelete), started, complete), func(o *Observed) {
				o.Clean, o.CleanAttempt = active(clean1), 1
			}),
			want: want{actions: nil, phase: PhaseCleaning},
		},
		{
			name: "clean failed: surfaced, retried after the backoff",
			o: obs(member(dpv1alpha1.BackupMemberTeardown, deleting(fedv1alpha1.CleanPolicyDelete), started, complete), func(o *Observed) {
				o.Clean, o.CleanAttempt = failed(clean1, job.ReasonBackoffLimitExceeded), 1
				o.Clean.Finished = t0.Add(-3 * time.Second)
				o.Report = report(map[string]string{job.StepClean: `{"phase":"Failed","error":"UnauthorizedOperation: not allowed"}`})
			}),
			want: want{actions: nil, phase: PhaseCleanFailed, requeue: true, failMatch: "UnauthorizedOperation",
				reason: map[string]string{dpv1alpha1.BackupMemberCleanedCondition: dpv1alpha1.BackupMemberCleanFailedReason}},
		},
		{
			name: "clean failed and the backoff passed: attempt 2 after resetting the report",
			o: obs(member(dpv1alpha1.BackupMemberTeardown, deleting(fedv1alpha1.CleanPolicyDelete), started, complete), func(o *Observed) {
				o.Clean, o.CleanAttempt = failed(clean1, job.ReasonBackoffLimitExceeded), 1
				o.Clean.Finished = t0.Add(-time.Hour)
				o.Report = report(map[string]string{job.StepClean: `{"phase":"Failed","error":"x"}`})
			}),
			want: want{actions: []ActionKind{EnsureServiceAccount, ResetStep, CreateJob}, check: func(t *testing.T, r Result) {
				if j := jobOf(t, r, job.StepClean).Job; j.Name != CleanJobName("fed-b1", 2) {
					t.Errorf("clean Job %s", j.Name)
				}
			}},
		},
		{
			name: "the attempts outlive their Jobs: with 3 counted and none left, the next is attempt 4",
			o: obs(member(dpv1alpha1.BackupMemberTeardown, deleting(fedv1alpha1.CleanPolicyDelete), started, complete,
				func(m *dpv1alpha1.VolumeBackupMember) { m.Status.CleanAttempts = 3 })),
			want: want{actions: []ActionKind{EnsureServiceAccount, CreateJob}, check: func(t *testing.T, r Result) {
				if j := jobOf(t, r, job.StepClean).Job; j.Name != CleanJobName("fed-b1", 4) {
					t.Errorf("clean Job %s", j.Name)
				}
			}},
		},
		{
			name: "the last allowed attempt failed: the clean stops and says why and how to go on",
			o: obs(member(dpv1alpha1.BackupMemberTeardown, deleting(fedv1alpha1.CleanPolicyDelete), started, complete), func(o *Observed) {
				o.Clean, o.CleanAttempt = failed(CleanJobName("fed-b1", DefaultMaxCleanAttempts), job.ReasonBackoffLimitExceeded), DefaultMaxCleanAttempts
				o.Clean.Finished = t0.Add(-time.Hour) // the backoff is long over
				o.Report = report(map[string]string{job.StepClean: `{"phase":"Failed","error":"UnauthorizedOperation: not allowed"}`})
			}),
			want: want{actions: []ActionKind{}, phase: PhaseCleanFailed, failMatch: "UnauthorizedOperation",
				reason: map[string]string{dpv1alpha1.BackupMemberCleanedCondition: dpv1alpha1.BackupMemberCleanGaveUpReason},
				check: func(t *testing.T, r Result) {
					c := apimeta.FindStatusCondition(r.Status.Conditions, dpv1alpha1.BackupMemberCleanedCondition)
					if !strings.Contains(c.Message, "failed 10 times") || !strings.Contains(c.Message, MaxCleanAttemptsAnnotation+"=20") ||
						!strings.Contains(c.Message, ForceRemoveAnnotation) || r.Status.CleanAttempts != 10 {
						t.Errorf("Cleaned = %+v, attempts %d", c, r.Status.CleanAttempts)
					}
				}},
		},
		{
			name: "given up and the failed Job gone at its TTL: still not retried, the reason kept",
			o: obs(member(dpv1alpha1.BackupMemberTeardown, deleting(fedv1alpha1.CleanPolicyDelete), started, complete, func(m *dpv1alpha1.VolumeBackupMember) {
				m.Status.CleanAttempts = DefaultMaxCleanAttempts
				apimeta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: dpv1alpha1.BackupMemberCleanedCondition, Status: metav1.ConditionFalse,
					Reason: dpv1alpha1.BackupMemberCleanGaveUpReason, Message: "clean failed 10 times (the bound is 10), the last: UnauthorizedOperation"})
			})),
			want: want{actions: []ActionKind{}, phase: PhaseCleanFailed, failMatch: "the last: UnauthorizedOperation",
				reason: map[string]string{dpv1alpha1.BackupMemberCleanedCondition: dpv1alpha1.BackupMemberCleanGaveUpReason}},
		},
		{
			name: "given up, then the bound raised by annotation: attempt 11",
			o: obs(member(dpv1alpha1.BackupMemberTeardown, deleting(fedv1alpha1.CleanPolicyDelete), started, complete, func(m *dpv1alpha1.VolumeBackupMember) {
				m.Status.CleanAttempts = DefaultMaxCleanAttempts
				m.Annotations[MaxCleanAttemptsAnnotation] = "12"
			}), func(o *Observed) {
				o.Clean, o.CleanAttempt = failed(CleanJobName("fed-b1", DefaultMaxCleanAttempts), job.ReasonBackoffLimitExceeded), DefaultMaxCleanAttempts
				o.Clean.Finished = t0.Add(-time.Hour)
			}),
			want: want{actions: []ActionKind{EnsureServiceAccount, CreateJob}, check: func(t *testing.T, r Result) {
				if j := jobOf(t, r, job.StepClean).Job; j.Name != CleanJobName("fed-b1", 11) {
					t.Errorf("clean Job %s", j.Name)
				}
			}},
		},
		{
			name: "clean succeeded: Cleaned and the finalizer goes",
			o: obs(member(dpv1alpha1.BackupMemberTeardown, deleting(fedv1alpha1.CleanPolicyDelete), started, complete), func(o *Observed) {
				o.Clean, o.CleanAttempt = succeeded(clean1), 1
			}),
			want: want{release: true, true: []string{dpv1alpha1.BackupMemberCleanedCondition}},
		},
		{
			name: "force-remove drops the finalizer whatever the clean says",
			o: obs(member(dpv1alpha1.BackupMemberTeardown, deleting(fedv1alpha1.CleanPolicyDelete), started, complete, func(m *dpv1alpha1.VolumeBackupMember) {
				m.Annotations[ForceRemoveAnnotation] = "true"
			}), func(o *Observed) { o.Clean, o.CleanAttempt = failed(clean1, "x"), 1 }),
			want: want{release: true, reason: map[string]string{dpv1alpha1.BackupMemberCleanedCondition: dpv1alpha1.BackupMemberForceRemovedReason}},
		},
	} {
		t.Run(tt.name, func(t *testing.T) { check(t, planned(t, tt.o), tt.want) })
	}
}

// TestPlanDeletionCleanPolicy is the clean decision of a deleted VolumeBackup's members over
// three planes: each row gives every plane's own outcome, whether the VolumeBackup as a whole
// failed (spec.backupFailed, which the manager sets on every member of a failed backup) and the
// cleanPolicy, and wants the planes whose member runs a clean. OnFailure cleans every plane of
// a failed backup, its completed snapshots too (they belong to a backup that cannot be
// restored), and nothing of a complete one.
func TestPlanDeletionCleanPolicy(t *testing.T) {
	started := func(m *dpv1alpha1.VolumeBackupMember) { m.Status.BackupPath = "s3://bk/nightly" }
	complete := withCond(dpv1alpha1.BackupMemberCompleteCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotsCompletedReason)
	failed := withCond(dpv1alpha1.BackupMemberFailedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotFailedReason)
	backupFailed := func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.BackupFailed = true }
	planes := []string{"az1", "az2", "az3"}
	for _, tt := range []struct {
		name         string
		policy       fedv1alpha1.CleanPolicyType
		failedPlanes []string // the others completed their snapshots
		backupFailed bool
		cleaned      []string
	}{
		{name: "OnFailure, one plane failed, two complete: all three cleaned",
			policy: fedv1alpha1.CleanPolicyOnFailure, failedPlanes: []string{"az2"}, backupFailed: true, cleaned: planes},
		{name: "OnFailure, all complete: none cleaned",
			policy: fedv1alpha1.CleanPolicyOnFailure},
		{name: "Retain, one plane failed: none cleaned",
			policy: fedv1alpha1.CleanPolicyRetain, failedPlanes: []string{"az2"}, backupFailed: true},
		{name: "Delete, all complete: all three cleaned",
			policy: fedv1alpha1.CleanPolicyDelete, cleaned: planes},
		{name: "Delete, one plane failed: all three cleaned",
			policy: fedv1alpha1.CleanPolicyDelete, failedPlanes: []string{"az2"}, backupFailed: true, cleaned: planes},
		{name: "OnFailure, members not told the backup failed (deleted on their own): the failed one cleaned",
			policy: fedv1alpha1.CleanPolicyOnFailure, failedPlanes: []string{"az2"}, cleaned: []string{"az2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var cleaned []string
			for _, plane := range planes {
				mut := []func(*dpv1alpha1.VolumeBackupMember){deleting(tt.policy), started, complete,
					func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.K8sClusterName = plane }}
				if slices.Contains(tt.failedPlanes, plane) {
					mut[2] = failed
				}
				if tt.backupFailed {
					mut = append(mut, backupFailed)
				}
				r := planned(t, obs(member(dpv1alpha1.BackupMemberTeardown, mut...)))
				i := slices.IndexFunc(r.Actions, func(a Action) bool { return a.Kind == CreateJob && a.Job.Labels[job.LabelStep] == job.StepClean })
				if i < 0 {
					if !r.RemoveFinalizer {
						t.Errorf("%s: no clean and the finalizer stays: %v", plane, kinds(r.Actions))
					}
					continue
				}
				cleaned = append(cleaned, plane)
				// The clean reads the member's own outcome: a member whose snapshots completed
				// has its backupmeta, and a clean that does not find it must fail.
				want := "completed"
				if slices.Contains(tt.failedPlanes, plane) {
					want = "failed"
				}
				if got := argValue(r.Actions[i].Job.Spec.Template.Spec.Containers[0].Args, "--backup-outcome"); got != want {
					t.Errorf("%s: --backup-outcome %s, want %s", plane, got, want)
				}
			}
			if !slices.Equal(cleaned, tt.cleaned) {
				t.Errorf("cleaned %v, want %v", cleaned, tt.cleaned)
			}
		})
	}
}

func check(t *testing.T, r Result, w want) {
	t.Helper()
	if r.RemoveFinalizer != w.release {
		t.Errorf("RemoveFinalizer %v, want %v", r.RemoveFinalizer, w.release)
	}
	if w.actions != nil || w.check == nil {
		if got := kinds(r.Actions); !slices.Equal(got, w.actions) {
			t.Errorf("actions %v, want %v", got, w.actions)
		}
	}
	for _, c := range w.true {
		if !apimeta.IsStatusConditionTrue(r.Status.Conditions, c) {
			t.Errorf("condition %s not True: %+v", c, r.Status.Conditions)
		}
	}
	for _, c := range w.notTrue {
		if apimeta.IsStatusConditionTrue(r.Status.Conditions, c) {
			t.Errorf("condition %s True: %+v", c, r.Status.Conditions)
		}
	}
	for c, reason := range w.reason {
		if got := apimeta.FindStatusCondition(r.Status.Conditions, c); got == nil || got.Reason != reason {
			t.Errorf("condition %s = %+v, want reason %s", c, got, reason)
		}
	}
	if w.failMatch != "" {
		found := false
		for _, c := range r.Status.Conditions {
			found = found || strings.Contains(c.Message, w.failMatch)
		}
		if !found {
			t.Errorf("no condition message contains %q: %+v", w.failMatch, r.Status.Conditions)
		}
	}
	if w.phase != "" && r.Status.Phase != w.phase {
		t.Errorf("phase %s, want %s", r.Status.Phase, w.phase)
	}
	if r.Status.CommitTs != w.commitTs {
		t.Errorf("commitTs %s, want %s", r.Status.CommitTs, w.commitTs)
	}
	if w.requeue != (r.RequeueAfter > 0) {
		t.Errorf("requeueAfter %v, want requeue %v", r.RequeueAfter, w.requeue)
	}
	if w.check != nil {
		w.check(t, r)
	}
}

func TestIndependentRun(t *testing.T) {
	ensureCM, ensureSA := Action{Kind: EnsureConfigMap}, Action{Kind: EnsureServiceAccount}
	create, stop := Action{Kind: CreateJob}, Action{Kind: StopJob}
	for _, tc := range []struct {
		name string
		as   []Action
		want int
	}{
		{"nothing", nil, 0},
		{"prerequisites, then Jobs", []Action{ensureCM, ensureSA, ensureCM, create, create}, 3},
		{"Jobs", []Action{create, create, stop}, 2},
		{"one Job", []Action{create, stop}, 1},
		{"another action first", []Action{stop, create, create}, 0},
		{"a Job never joins the prerequisites it needs", []Action{ensureSA, create}, 1},
	} {
		if got := independentRun(tc.as); got != tc.want {
			t.Errorf("%s: independentRun = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestCleanExpectsTheVolumesOfCallsInFlight: the clean is told the volumes handed the snapshot
// step (--expect-volumes) exactly when that step may have sent CreateSnapshots calls it never
// read the answers of: it had its backup ts, never reported every snapshot started, and did not
// fail settled.
func TestCleanExpectsTheVolumesOfCallsInFlight(t *testing.T) {
	base := func(m *dpv1alpha1.VolumeBackupMember) {
		m.Status.BackupPath = "s3://bk/nightly-az1"
		m.Status.TiKVVolumes = []string{"vol-1", "vol-2"}
		m.Spec.BackupTS = tsText
	}
	stoppedStep := report(map[string]string{job.StepSnapshot: mustJSON(map[string]any{"phase": "Failed", "error": "start snapshots: context canceled"})})
	startedStep := report(map[string]string{job.StepSnapshot: mustJSON(map[string]any{"phase": "Failed", "error": "snapshot snap-1 is in the error state",
		"startedAt": metav1.NewMicroTime(t0)})})
	settledStep := report(map[string]string{job.StepSnapshot: mustJSON(map[string]any{"phase": "Failed", "settled": true,
		"error": "the pause did not hold until every snapshot started: PD no longer lists the pause's safepoint"})})
	settledRunning := report(map[string]string{job.StepSnapshot: mustJSON(map[string]any{"phase": "Starting", "settled": true})})
	for _, tt := range []struct {
		name   string
		mut    func(*dpv1alpha1.VolumeBackupMember)
		report job.Report
		want   string
	}{
		{name: "stopped before it reported the starts", mut: func(*dpv1alpha1.VolumeBackupMember) {}, report: stoppedStep, want: "vol-1,vol-2"},
		{name: "no report at all", mut: func(*dpv1alpha1.VolumeBackupMember) {}, report: job.ReportOf(nil), want: "vol-1,vol-2"},
		{name: "every snapshot started (its report)", mut: func(*dpv1alpha1.VolumeBackupMember) {}, report: startedStep, want: ""},
		{name: "every snapshot started (the condition)", mut: withCond(dpv1alpha1.BackupMemberSnapshotsCreatedCondition, metav1.ConditionTrue,
			dpv1alpha1.BackupMemberSnapshotsStartedReason), report: stoppedStep, want: ""},
		{name: "no backup ts: the armed step never started one", mut: func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.BackupTS = "" }, report: stoppedStep, want: ""},
		{name: "failed settled: every call answered and its snapshots deleted", mut: func(*dpv1alpha1.VolumeBackupMember) {}, report: settledStep, want: ""},
		{name: "settled counts only in a Failed report", mut: func(*dpv1alpha1.VolumeBackupMember) {}, report: settledRunning, want: "vol-1,vol-2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := obs(member(dpv1alpha1.BackupMemberExecute, deleting(fedv1alpha1.CleanPolicyDelete), base, tt.mut), func(o *Observed) { o.Report = tt.report })
			args := jobOf(t, planned(t, o), job.StepClean).Job.Spec.Template.Spec.Containers[0].Args
			if got := argValue(args, "--expect-volumes"); got != tt.want {
				t.Errorf("--expect-volumes %q, want %q (args %v)", got, tt.want, args)
			}
		})
	}
}

// TestPhasesListsEveryPhase: Phases (the agent metrics' series) are exactly the Phase* constants
// of plan.go.
func TestPhasesListsEveryPhase(t *testing.T) {
	want := testenv.StringConsts(t, "plan.go", "Phase")
	got := slices.Sorted(slices.Values(Phases))
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("Phases %v, want every Phase* constant of plan.go %v", got, want)
	}
}
