package restoremember

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/condition"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/policy"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	brreport "github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/meta"
	"github.com/fedbr/fedbr/internal/testenv"
)

var (
	t0      = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	testEnv = job.Env{Image: "fedbr:test", Region: "us-west-2", AWSEndpoint: "http://127.0.0.1:4566", ClusterID: "kube-system-uid"}
	rvName  = job.Name("fed-r1", job.StepRestoreVolumes)
	rdName  = job.Name("fed-r1", job.StepRestoreData)
)

const resolvedTS = uint64(470802380936708097)

func rmember(phase dpv1alpha1.RestoreMemberPhase, mut ...func(*dpv1alpha1.VolumeRestoreMember)) *dpv1alpha1.VolumeRestoreMember {
	m := &dpv1alpha1.VolumeRestoreMember{
		ObjectMeta: metav1.ObjectMeta{Name: "fed-r1", Namespace: "dst", UID: "ruid-1", Generation: 2, Finalizers: []string{Finalizer}},
		Spec: dpv1alpha1.VolumeRestoreMemberSpec{VolumeRestore: "r1", K8sClusterName: "az1", TCName: "restored", TCNamespace: "dst",
			AZName: "us-west-2b", Phase: phase,
			Backup: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "bk", Prefix: "p-az1"}}},
	}
	if phase == dpv1alpha1.RestoreMemberRestoreData {
		m.Spec.ResolvedTS = "42" // the manager's go carries the ts it decided
	}
	for _, f := range mut {
		f(m)
	}
	return m
}

func rcond(t string, reason string) func(*dpv1alpha1.VolumeRestoreMember) {
	return func(m *dpv1alpha1.VolumeRestoreMember) {
		apimeta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(t0)})
	}
}

// tikvUp is a member whose volume stage is done.
// handedOver is the target TidbCluster annotated with the restored volumes, up of its 2 stores
// up.
func handedOver(up int) *pcv1alpha1.TidbCluster {
	tc := storesUp(targetTC(2, true), up)
	tc.Annotations = map[string]string{pcv1alpha1.TiKVVolumesReadyAnnotation: "dst/fed-r1"}
	return tc
}

// dataMember marks the member as the one the manager chose to run restore-data.
func dataMember(m *dpv1alpha1.VolumeRestoreMember) { m.Spec.DataMember, m.Spec.ResolvedTS = true, "42" }

var tikvUp = []func(*dpv1alpha1.VolumeRestoreMember){
	rcond(dpv1alpha1.RestoreMemberVolumeCompleteCondition, dpv1alpha1.RestoreMemberVolumesRestoredReason),
	rcond(dpv1alpha1.RestoreMemberWarmUpCompleteCondition, dpv1alpha1.RestoreMemberNotRequestedReason),
	rcond(dpv1alpha1.RestoreMemberTikvCompleteCondition, dpv1alpha1.RestoreMemberTiKVStartedReason),
}

func targetTC(replicas int32, recovery bool) *pcv1alpha1.TidbCluster {
	return &pcv1alpha1.TidbCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "restored", Namespace: "dst"},
		Spec: pcv1alpha1.TidbClusterSpec{RecoveryMode: recovery, TiKV: &pcv1alpha1.ComponentSpec{Replicas: replicas,
			StorageVolumes: []pcv1alpha1.StorageVolume{{Name: "raft", MountPath: "/var/lib/raft"}}}},
		Status: pcv1alpha1.TidbClusterStatus{
			PD: pcv1alpha1.PDStatus{Members: map[string]pcv1alpha1.PDMember{"restored-pd-0": {Name: "restored-pd-0", ClientURL: "http://pd:2379"}}},
		},
	}
}

func storesUp(tc *pcv1alpha1.TidbCluster, n int) *pcv1alpha1.TidbCluster {
	tc.Status.TiKV.Stores = map[string]pcv1alpha1.TiKVStore{}
	for i := 0; i < n; i++ {
		id := fmt.Sprint(11 + i)
		tc.Status.TiKV.Stores[id] = pcv1alpha1.TiKVStore{ID: id, PodName: fmt.Sprintf("restored-tikv-%d", i), State: "Up"}
	}
	return tc
}

// record is a restoremeta of TidbCluster "src" in namespace "prod" with TiKV ordinals 3 and 5
// (stores 11 and 12), each with a data volume and the storage volume "raft" (pod volume
// tikv-raft).
func record(t testing.TB) *meta.Record {
	rec := &meta.Record{
		ClusterInfo: &meta.ClusterInfo{Version: "7.5.0", FullBackupType: meta.FullBackupTypeEBS, ResolvedTS: resolvedTS},
		TiKV:        meta.TiKV{Replicas: 2},
	}
	raw := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	rec.Kubernetes.TidbCluster = raw(map[string]any{"metadata": map[string]any{"name": "src", "namespace": "prod"}})
	sc := "gp3"
	for i, ord := range []int{3, 5} {
		store := meta.TiKVStore{ID: uint64(11 + i)}
		for _, vol := range []string{"tikv", "tikv-raft"} {
			oldID := fmt.Sprintf("vol-old-%d-%s", ord, vol)
			claim := fmt.Sprintf("%s-src-tikv-%d", vol, ord)
			typ := vol
			if vol == "tikv" {
				typ = meta.DataDirType
			}
			store.Volumes = append(store.Volumes, meta.Volume{ID: oldID, Type: typ, SnapshotID: "snap-" + oldID, AZ: "us-west-2a",
				RestoreVolumeID: "vol-new-" + oldID, RestoreAZ: "us-west-2a"})
			rec.Kubernetes.PVs = append(rec.Kubernetes.PVs, raw(&corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: "pvc-" + oldID},
				Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Gi")},
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: sc,
					PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
					PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: tidbcluster.EBSCSIDriver, VolumeHandle: oldID, FSType: "ext4"}},
					ClaimRef:                      &corev1.ObjectReference{Namespace: "prod", Name: claim}},
			}))
			rec.Kubernetes.PVCs = append(rec.Kubernetes.PVCs, raw(&corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: "prod", Labels: map[string]string{tidbcluster.LabelInstance: "src", "tidb.pingcap.com/pod-name": fmt.Sprintf("src-tikv-%d", ord)}},
				Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pvc-" + oldID, StorageClassName: &sc,
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Gi")}}},
			}))
		}
		rec.TiKV.Stores = append(rec.TiKV.Stores, store)
	}
	return rec
}

// kmsConfigTOML is spec.tikv.config as a TOML string: encryption method with a KMS master
// key keyID, and settings besides.
func kmsConfigTOML(method, keyID string) string {
	return strconv.Quote("[storage]\nreserve-space = \"0MB\"\n[security.encryption]\ndata-encryption-method = \"" + method + "\"\n" +
		"[security.encryption.master-key]\ntype = \"kms\"\nkey-id = \"" + keyID + "\"\nregion = \"us-west-2\"\n")
}

// kmsConfigMap is kmsConfigTOML in spec.tikv.config's map form.
func kmsConfigMap(method, keyID string) string {
	return `{"storage":{"reserve-space":"0MB"},"security":{"encryption":{"data-encryption-method":"` + method +
		`","master-key":{"type":"kms","key-id":"` + keyID + `","region":"us-west-2"}}}}`
}

// encryptedRecord is record(t) whose backed-up TidbCluster has the TiKV config config
// (spec.tikv.config as JSON).
func encryptedRecord(t testing.TB, config string) *meta.Record {
	rec := record(t)
	rec.Kubernetes.TidbCluster = json.RawMessage(`{"metadata":{"name":"src","namespace":"prod"},"spec":{"tikv":{"replicas":2,"config":` + config + `}}}`)
	return rec
}

// withTiKVConfig gives tc the TiKV config config (spec.tikv.config as JSON).
func withTiKVConfig(tc *pcv1alpha1.TidbCluster, config string) *pcv1alpha1.TidbCluster {
	tc.Spec.TiKV.Config = &apiextensionsv1.JSON{Raw: []byte(config)}
	return tc
}

func rreport(data map[string]string) job.Report {
	steps, err := brreport.Entries(data)
	if err != nil {
		panic(err)
	}
	return job.ReportOf(steps)
}

// reportedBackup is the status document of restore-volumes waiting for the check, with rec
// as BackupReport trims it (phase is the document's phase).
func reportedBackup(t testing.TB, rec *meta.Record, phase string) string {
	sub, err := restorevolumes.BackupReport(rec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(restorevolumes.Status{Phase: phase, ResolvedTS: resolvedTS, Backup: sub})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// backupReported plays restore-volumes up to its wait for the check: its Job runs, its entry
// reports the status document doc (reportedBackup, or any forged one); the agent reads the
// report as observe does.
func backupReported(doc string) func(*Observed) {
	return func(o *Observed) {
		o.RestoreVolumes = job.State{Name: rvName, Phase: job.Active}
		o.Report = rreport(map[string]string{job.StepRestoreVolumes: doc})
		observeReport(o)
	}
}

// restoredResult is restore-volumes' result for rec's restored volumes.
func restoredResult(t testing.TB, rec *meta.Record) string {
	res := restorevolumes.Result{RestoreID: "ruid-1", ResolvedTS: resolvedTS}
	for _, v := range rec.Volumes() {
		res.Volumes = append(res.Volumes, restorevolumes.Volume{StoreID: v.StoreID, Type: v.Type, BackupVolumeID: v.ID, SnapshotID: v.SnapshotID,
			VolumeID: v.RestoreVolumeID, AZ: v.RestoreAZ, SizeGiB: 100})
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// stepSucceeded plays restore-volumes to its end: its Job succeeded, its entry holds doc (the
// backup) in phase Completed and result; the agent reads the report as observe does.
func stepSucceeded(doc, result string) func(*Observed) {
	return func(o *Observed) {
		o.RestoreVolumes = job.State{Name: rvName, Phase: job.Succeeded}
		o.Report = rreport(map[string]string{job.StepRestoreVolumes: doc, job.StepRestoreVolumes + ".result": result})
		observeReport(o)
	}
}

func robs(m *dpv1alpha1.VolumeRestoreMember, tc *pcv1alpha1.TidbCluster, mut ...func(*Observed)) Observed {
	o := Observed{Member: m, TC: tc, Env: testEnv, RestoreVolumes: job.StateOf(nil), RestoreData: job.StateOf(nil), Report: job.ReportOf(nil),
		PVCs: map[string]*corev1.PersistentVolumeClaim{}, PVs: map[string]*corev1.PersistentVolume{}, TargetClaims: map[string]*corev1.PersistentVolumeClaim{}}
	for _, f := range mut {
		f(&o)
	}
	return o
}

// checkClusterTLS fails t unless ps mounts the cluster client secret of TidbCluster
// "restored" and its step's --ca, --cert and --key point into it.
func checkClusterTLS(t *testing.T, ps corev1.PodSpec) {
	t.Helper()
	args := ps.Containers[0].Args
	for flag, v := range map[string]string{"--ca": "var/lib/fedbr/cluster-client-tls/ca.crt",
		"--cert": "var/lib/fedbr/cluster-client-tls/tls.crt", "--key": "var/lib/fedbr/cluster-client-tls/tls.key"} {
		if got := argValue(args, flag); got != v {
			t.Errorf("%s = %q, want %q: %v", flag, got, v, args)
		}
	}
	if !slices.ContainsFunc(ps.Volumes, func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == "restored-cluster-client-secret"
	}) {
		t.Errorf("volumes %+v, want restored-cluster-client-secret", ps.Volumes)
	}
}

func argValue(args []string, flag string) string {
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}

type rwant struct {
	actions []ActionKind
	release bool
	true    []string
	reason  map[string]string
	phase   string
	msg     string
	requeue bool
	check   func(*testing.T, Result)
}

func rcheck(t *testing.T, r Result, w rwant) {
	t.Helper()
	var got []ActionKind
	for _, a := range r.Actions {
		got = append(got, a.Kind)
	}
	if r.RemoveFinalizer != w.release {
		t.Errorf("RemoveFinalizer %v, want %v", r.RemoveFinalizer, w.release)
	}
	if w.actions != nil || w.check == nil {
		if !slices.Equal(got, w.actions) {
			t.Errorf("actions %v, want %v", r.Actions, w.actions)
		}
	}
	for _, c := range w.true {
		if !apimeta.IsStatusConditionTrue(r.Status.Conditions, c) {
			t.Errorf("condition %s not True: %+v", c, r.Status.Conditions)
		}
	}
	for c, reason := range w.reason {
		if got := apimeta.FindStatusCondition(r.Status.Conditions, c); got == nil || got.Reason != reason {
			t.Errorf("condition %s = %+v, want reason %s", c, got, reason)
		}
	}
	if w.msg != "" {
		found := false
		for _, c := range r.Status.Conditions {
			found = found || strings.Contains(c.Message, w.msg)
		}
		if !found {
			t.Errorf("no condition message contains %q: %+v", w.msg, r.Status.Conditions)
		}
	}
	if w.phase != "" && r.Status.Phase != w.phase {
		t.Errorf("phase %s, want %s", r.Status.Phase, w.phase)
	}
	if w.requeue != (r.RequeueAfter > 0) {
		t.Errorf("requeue %v, want %v", r.RequeueAfter, w.requeue)
	}
	if w.check != nil {
		w.check(t, r)
	}
}

// operatorTagged gives the observed restored volumes the operator tags of their claims.
func operatorTagged(o *Observed, claims []Claim) {
	for _, c := range claims {
		if v, ok := o.RestoredVolumes[c.PV.Spec.CSI.VolumeHandle]; ok {
			v.Tags = maps.Clone(v.Tags)
			maps.Copy(v.Tags, restorevolumes.OperatorTags(c.PV.Name, c.PVC.Name, c.PVC.Namespace))
			o.RestoredVolumes[v.ID] = v
		}
	}
}

// describeRestored gives o the restored volumes its restoremeta names, tagged for restore
// ruid-1, as EC2 describes them.
func describeRestored(o *Observed) {
	o.RestoredVolumes = map[string]cloud.Volume{}
	for _, id := range o.RestoreMeta.RestoredVolumes() {
		o.RestoredVolumes[id] = cloud.Volume{ID: id, Tags: meta.RestoreTags("ruid-1")}
	}
}

// restoredVolume edits the i-th restored volume of o (in id order) with f.
func restoredVolume(o *Observed, i int, f func(v *cloud.Volume)) {
	id := slices.Sorted(maps.Keys(o.RestoredVolumes))[i]
	v := o.RestoredVolumes[id]
	f(&v)
	o.RestoredVolumes[id] = v
}

func TestPlanRestoreVolume(t *testing.T) {
	failed := func(name, reason string) job.State {
		return job.State{Name: name, Phase: job.Failed, Reason: reason, Message: "boom", Started: t0, Finished: t0}
	}
	done := reportedBackup(t, record(t), restorevolumes.PhaseCompleted)
	// A member whose restore-volumes step succeeded and reported the backup and the volumes.
	volumesRestored := func(o *Observed) {
		stepSucceeded(done, restoredResult(t, record(t)))(o)
		if o.RestoreMetaErr != nil {
			t.Fatal(o.RestoreMetaErr)
		}
		describeRestored(o)
	}
	awaiting := reportedBackup(t, record(t), restorevolumes.PhaseAwaitingCheck)
	// forged is the status document of a step awaiting the check with the reported backup
	// edited by f.
	forged := func(f func(rec map[string]any)) string {
		var doc map[string]any
		if err := json.Unmarshal([]byte(awaiting), &doc); err != nil {
			t.Fatal(err)
		}
		f(doc["backup"].(map[string]any))
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// forgedResult is the result of the succeeded step with its volumes edited by f.
	forgedResult := func(f func(vols []any) []any) string {
		var res map[string]any
		if err := json.Unmarshal([]byte(restoredResult(t, record(t))), &res); err != nil {
			t.Fatal(err)
		}
		res["volumes"] = f(res["volumes"].([]any))
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	failedReport := func(reason, msg string) rwant {
		return rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: reason}, msg: msg, phase: PhaseFailed}
	}
	// pvsSeen: the volumes restored, their PVs created at created and in the cache, every
	// volume described with its operator tags, then edit.
	pvsSeen := func(t *testing.T, created time.Time, edit func(o *Observed)) func(o *Observed) {
		return func(o *Observed) {
			volumesRestored(o)
			claims, err := Rebuild(o.RestoreMeta, Target{TCName: "restored", Namespace: "dst", AZ: "us-west-2b", RestoreID: "ruid-1", Member: o.Member.Name, MemberNamespace: o.Member.Namespace})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range claims {
				pv := c.PV.DeepCopy()
				pv.CreationTimestamp = metav1.NewTime(created)
				o.PVs[c.PV.Name] = pv
			}
			operatorTagged(o, claims)
			edit(o)
		}
	}
	for _, tt := range []struct {
		name string
		o    Observed
		want rwant
	}{
		{
			name: "valid: restore-volumes starts with the restore id and target AZ",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, func(m *dpv1alpha1.VolumeRestoreMember) {
				m.Spec.Template.BR = &fedv1alpha1.BRConfig{Options: []string{"--volume-type", "io2", "--volume-iops=4000", "--volume-encrypted", "--kms-key-id", "alias/k"}}
				m.Spec.Template.BackoffLimit = ptr.To[int32](2)
			}), targetTC(2, true)),
			want: rwant{actions: []ActionKind{EnsureServiceAccount, CreateJob}, phase: PhasePending, check: func(t *testing.T, r Result) {
				j := r.Actions[1].Job
				args := j.Spec.Template.Spec.Containers[0].Args
				for flag, v := range map[string]string{"--restore-id": "ruid-1", "--target-az": "us-west-2b", "--storage": "s3://bk/p-az1", "--pd": "http://pd:2379",
					"--volume-type": "io2", "--kms-key-id": "alias/k", "--aws-endpoint": "http://127.0.0.1:4566", "--member": "fed-r1",
					"--owner": "kube-system-uid/dst"} {
					if got := argValue(args, flag); got != v {
						t.Errorf("%s = %q, want %q: %v", flag, got, v, args)
					}
				}
				if *j.Spec.BackoffLimit != 2 || j.Spec.ActiveDeadlineSeconds != nil {
					t.Errorf("backoff %d deadline %v, want no deadline: the manager times the member's phase", *j.Spec.BackoffLimit, j.Spec.ActiveDeadlineSeconds)
				}
				if r.Status.CommitTs != "" || condition.IsTrue(r.Status.Conditions, dpv1alpha1.RestoreMemberTargetCheckedCondition) {
					t.Errorf("commitTs %q, conditions %+v before the backup was reported", r.Status.CommitTs, r.Status.Conditions)
				}
			}},
		},
		{
			name: "the backup reported: the target checked (TargetChecked), commitTs and volumesTotal from the report, nothing else",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), backupReported(awaiting)),
			want: rwant{true: []string{dpv1alpha1.RestoreMemberTargetCheckedCondition}, phase: PhaseRestoringVolumes, msg: "4 volumes",
				check: func(t *testing.T, r Result) {
					if r.Status.CommitTs != fmt.Sprint(resolvedTS) || r.Status.VolumesTotal != 4 {
						t.Errorf("status %+v", r.Status)
					}
				}},
		},
		{
			name: "the target left recovery mode before the check: refused, the step not let go on",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, false), backupReported(awaiting)),
			want: failedReport(dpv1alpha1.RestoreMemberNotInRecoveryModeReason, "left recovery mode"),
		},
		{
			name: "the target checked already: the step goes on, nothing checked again",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, func(m *dpv1alpha1.VolumeRestoreMember) {
				m.Status.Conditions = []metav1.Condition{{Type: dpv1alpha1.RestoreMemberTargetCheckedCondition, Status: metav1.ConditionTrue, Reason: dpv1alpha1.RestoreMemberTargetMatchesReason}}
			}), targetTC(3, true), backupReported(awaiting)),
			want: rwant{true: []string{dpv1alpha1.RestoreMemberTargetCheckedCondition}, phase: PhaseRestoringVolumes},
		},
		{
			name: "a reported backup that is not a valid backupmeta (resolved ts 0) is refused InvalidBackup",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), backupReported(forged(func(rec map[string]any) {
				rec["cluster_info"].(map[string]any)["resolved_ts"] = 0
			}))),
			want: failedReport(dpv1alpha1.RestoreMemberInvalidBackupReason, "resolved_ts is 0"),
		},
		{
			name: "a reported backup over the size bound is refused InvalidReport",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), backupReported(forged(func(rec map[string]any) {
				rec["padding"] = strings.Repeat("x", MaxBackupReportBytes)
			}))),
			want: failedReport(dpv1alpha1.InvalidReportReason, fmt.Sprintf("at most %d", MaxBackupReportBytes)),
		},
		{
			name: "a reported backup with more volumes than the bound is refused InvalidReport",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), backupReported(forged(func(rec map[string]any) {
				var stores []any
				for i := range MaxReportVolumes/meta.MaxVolumesPerStore + 1 {
					var vols []any
					for j := range meta.MaxVolumesPerStore {
						vols = append(vols, map[string]any{"volume_id": fmt.Sprintf("vol-%d-%d", i, j), "snapshot_id": fmt.Sprintf("snap-%d-%d", i, j)})
					}
					stores = append(stores, map[string]any{"store_id": i + 1, "volumes": vols})
				}
				rec["tikv"] = map[string]any{"replicas": len(stores), "stores": stores}
			}))),
			want: failedReport(dpv1alpha1.InvalidReportReason, fmt.Sprintf("volumes, at most %d", MaxReportVolumes)),
		},
		{
			name: "a reported claim with more labels than the bound is refused InvalidReport",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), backupReported(forged(func(rec map[string]any) {
				pvc := rec["kubernetes"].(map[string]any)["pvcs"].([]any)[0].(map[string]any)
				labels := map[string]any{}
				for i := range MaxClaimLabels + 1 {
					labels[fmt.Sprintf("l%d", i)] = "v"
				}
				pvc["metadata"].(map[string]any)["labels"] = labels
			}))),
			want: failedReport(dpv1alpha1.InvalidReportReason, fmt.Sprintf("labels, at most %d", MaxClaimLabels)),
		},
		{
			name: "a reported claim whose name is not an object name is refused InvalidReport",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), backupReported(forged(func(rec map[string]any) {
				rec["kubernetes"].(map[string]any)["pvcs"].([]any)[0].(map[string]any)["metadata"].(map[string]any)["name"] = "../tikv-src-tikv-3"
			}))),
			want: failedReport(dpv1alpha1.InvalidReportReason, `name "../tikv-src-tikv-3"`),
		},
		{
			name: "a reported backup that is not a record is refused InvalidReport",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), backupReported(`{"phase":"AwaitingCheck","backup":{"tikv":"many"}}`)),
			want: failedReport(dpv1alpha1.InvalidReportReason, "the backup"),
		},
		{
			name: "a result naming a volume the reported backup does not list is refused InvalidReport, nothing created",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), stepSucceeded(done, forgedResult(func(vols []any) []any {
				vols[0].(map[string]any)["backupVolumeID"] = "vol-elsewhere"
				return vols
			}))),
			want: failedReport(dpv1alpha1.InvalidReportReason, "vol-elsewhere"),
		},
		{
			name: "a result listing a backed-up volume twice is refused InvalidReport",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), stepSucceeded(done, forgedResult(func(vols []any) []any {
				return append(vols[:1], vols[:3]...)
			}))),
			want: failedReport(dpv1alpha1.InvalidReportReason, "twice"),
		},
		{
			name: "a result with a volume id that is no EBS id is refused InvalidReport",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), stepSucceeded(done, forgedResult(func(vols []any) []any {
				vols[0].(map[string]any)["volumeID"] = "vol-*"
				return vols
			}))),
			want: failedReport(dpv1alpha1.InvalidReportReason, "not an EBS volume id"),
		},
		{
			name: "a result with an AZ that is no zone name is refused InvalidReport",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), stepSucceeded(done, forgedResult(func(vols []any) []any {
				vols[0].(map[string]any)["az"] = "us-west-2a; zone"
				return vols
			}))),
			want: failedReport(dpv1alpha1.InvalidReportReason, "is not a zone name"),
		},
		{
			name: "a result over the size bound is refused InvalidReport",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), stepSucceeded(done,
				`{"restoreID":"ruid-1","swept":["`+strings.Repeat("x", MaxResultBytes)+`"]}`)),
			want: failedReport(dpv1alpha1.InvalidReportReason, fmt.Sprintf("at most %d", MaxResultBytes)),
		},
		{
			name: "restore-volumes succeeded without reporting the backup: refused InvalidReport",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true),
				stepSucceeded(`{"phase":"Completed"}`, restoredResult(t, record(t)))),
			want: failedReport(dpv1alpha1.InvalidReportReason, "without reporting the backup"),
		},
		{
			// A target TidbCluster with tlsCluster: restore-volumes (it dials PD) mounts its
			// cluster client secret and takes --ca, --cert and --key from it.
			name: "a TLS cluster's restore-volumes gets its cluster client secret",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), func() *pcv1alpha1.TidbCluster {
				tc := targetTC(2, true)
				tc.Spec.TLSCluster = &pcv1alpha1.TLSCluster{Enabled: true}
				return tc
			}()),
			want: rwant{actions: []ActionKind{EnsureServiceAccount, CreateJob}, phase: PhasePending, check: func(t *testing.T, r Result) {
				checkClusterTLS(t, r.Actions[1].Job.Spec.Template.Spec)
			}},
		},
		{
			name: "TidbCluster missing",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), nil),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.TidbClusterNotFoundReason}, phase: PhaseFailed},
		},
		{
			name: "a fresh TidbCluster whose PD has not reported its address yet: wait, nothing created, not failed",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), func() *pcv1alpha1.TidbCluster {
				tc := targetTC(2, true)
				tc.Status.PD.Members = nil
				return tc
			}()),
			want: rwant{check: func(t *testing.T, r Result) {
				for _, a := range r.Actions {
					if a.Kind == CreateJob {
						t.Errorf("a Job was created before PD had an address: %+v", a)
					}
				}
				if c := apimeta.FindStatusCondition(r.Status.Conditions, dpv1alpha1.RestoreMemberFailedCondition); c != nil && c.Status == metav1.ConditionTrue {
					t.Errorf("failed while waiting for PD: %+v", c)
				}
			}},
		},
		{
			name: "TidbCluster not in recovery mode",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, false)),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberNotInRecoveryModeReason}, msg: "spec.recoveryMode: true"},
		},
		{
			name: "TiKV count differs from the backup's store count",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(3, true), backupReported(awaiting)),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberTiKVCountMismatchReason}, msg: "has 2 TiKV stores", phase: PhaseFailed},
		},
		{
			name: "more volumes than template.maxVolumes: refused before any volume",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, func(m *dpv1alpha1.VolumeRestoreMember) { m.Spec.Template.MaxVolumes = ptr.To[int32](3) }),
				targetTC(2, true), backupReported(awaiting)),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberTooManyVolumesReason}, msg: "has 4 volumes in this plane, more than template.maxVolumes 3",
				phase: PhaseFailed},
		},
		{
			name: "as many volumes as template.maxVolumes: checked and let go on",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, func(m *dpv1alpha1.VolumeRestoreMember) { m.Spec.Template.MaxVolumes = ptr.To[int32](4) }),
				targetTC(2, true), backupReported(awaiting)),
			want: rwant{true: []string{dpv1alpha1.RestoreMemberTargetCheckedCondition}},
		},
		{
			name: "the backup's TiKV encrypts with a KMS key the target's does not use: refused EncryptionMismatch before any volume, the step not let go on",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), withTiKVConfig(targetTC(2, true), kmsConfigMap("aes256-ctr", "key-b")),
				backupReported(reportedBackup(t, encryptedRecord(t, kmsConfigTOML("aes256-ctr", "key-a")), restorevolumes.PhaseAwaitingCheck))),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberEncryptionMismatchReason}, msg: `kms key-id "key-a"`, phase: PhaseFailed,
				actions: []ActionKind{}, check: func(t *testing.T, r Result) {
					if len(r.Actions) != 0 || condition.IsTrue(r.Status.Conditions, dpv1alpha1.RestoreMemberTargetCheckedCondition) {
						t.Errorf("actions %v, conditions %+v: the step was let go on", r.Actions, r.Status.Conditions)
					}
					if c := apimeta.FindStatusCondition(r.Status.Conditions, dpv1alpha1.RestoreMemberFailedCondition); c == nil || !strings.Contains(c.Message, `"key-b"`) {
						t.Errorf("Failed %+v: want both key ids named", c)
					}
				}},
		},
		{
			name: "the backup's TiKV encrypted, the target's not: refused EncryptionMismatch",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true),
				backupReported(reportedBackup(t, encryptedRecord(t, kmsConfigTOML("aes256-ctr", "key-a")), restorevolumes.PhaseAwaitingCheck))),
			want: failedReport(dpv1alpha1.RestoreMemberEncryptionMismatchReason, "data-encryption-method"),
		},
		{
			name: "a forged report whose TiKV config cannot be read: refused InvalidBackup",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), backupReported(forged(func(rec map[string]any) {
				rec["kubernetes"].(map[string]any)["crd_tidb_cluster"] = map[string]any{"spec": map[string]any{"tikv": map[string]any{"config": 42}}}
			}))),
			want: failedReport(dpv1alpha1.RestoreMemberInvalidBackupReason, "spec.tikv.config"),
		},
		{
			name: "the target's TiKV encrypts as the backup's did (its config a map, the backup's TOML): checked",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), withTiKVConfig(targetTC(2, true), kmsConfigMap("aes256-ctr", "key-a")),
				backupReported(reportedBackup(t, encryptedRecord(t, kmsConfigTOML("aes256-ctr", "key-a")), restorevolumes.PhaseAwaitingCheck))),
			want: rwant{true: []string{dpv1alpha1.RestoreMemberTargetCheckedCondition}, phase: PhaseRestoringVolumes},
		},
		{
			name: "a KMS key without encryption is refused",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, func(m *dpv1alpha1.VolumeRestoreMember) {
				m.Spec.Template.BR = &fedv1alpha1.BRConfig{Options: []string{"--kms-key-id", "alias/k"}}
			}), targetTC(2, true)),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberInvalidOptionsReason}, msg: "--volume-encrypted"},
		},
		{
			name: "an unknown BR option is refused",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, func(m *dpv1alpha1.VolumeRestoreMember) {
				m.Spec.Template.BR = &fedv1alpha1.BRConfig{Options: []string{"--check-requirements=false"}}
			}), targetTC(2, true)),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberInvalidOptionsReason}},
		},
		{
			name: "gcs backup storage is refused",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, func(m *dpv1alpha1.VolumeRestoreMember) {
				m.Spec.Backup = fedv1alpha1.StorageProvider{Gcs: &fedv1alpha1.GcsStorageProvider{ProjectId: "p"}}
			}), targetTC(2, true)),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.InvalidStorageReason}},
		},
		{
			name: "restore-volumes running: wait, report progress",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), func(o *Observed) {
				o.RestoreVolumes = job.State{Name: rvName, Phase: job.Active}
				o.Report = rreport(map[string]string{job.StepRestoreVolumes: `{"phase":"Creating","volumes":4}`})
			}),
			want: rwant{actions: nil, phase: PhaseRestoringVolumes, check: func(t *testing.T, r Result) {
				if r.Status.VolumesTotal != 4 || r.Status.VolumesReady != 0 {
					t.Errorf("volumes %d/%d", r.Status.VolumesReady, r.Status.VolumesTotal)
				}
			}},
		},
		{
			name: "restore-volumes reports Failed, its Job out of attempts: the step's error",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), func(o *Observed) {
				o.RestoreVolumes = failed(rvName, job.ReasonBackoffLimitExceeded)
				o.Report = rreport(map[string]string{job.StepRestoreVolumes: `{"phase":"Failed","error":"snapshot snap-1 not completed"}`})
			}),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberRestoreVolumesFailedReason}, msg: "snap-1 not completed"},
		},
		{
			name: "restore-volumes reports Failed while its Job is active (the template's backoffLimit retries it): wait",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, func(m *dpv1alpha1.VolumeRestoreMember) { m.Spec.Template.BackoffLimit = ptr.To[int32](2) }),
				targetTC(2, true), func(o *Observed) {
					o.RestoreVolumes = job.State{Name: rvName, Phase: job.Active}
					o.Report = rreport(map[string]string{job.StepRestoreVolumes: `{"phase":"Failed","error":"snapshot snap-1 not completed"}`})
				}),
			want: rwant{actions: nil, phase: PhaseRestoringVolumes, check: func(t *testing.T, r Result) {
				if condition.IsTrue(r.Status.Conditions, dpv1alpha1.RestoreMemberFailedCondition) {
					t.Errorf("member failed on an attempt its Job retries: %+v", r.Status.Conditions)
				}
			}},
		},
		{
			name: "restore-volumes Job failed",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), func(o *Observed) { o.RestoreVolumes = failed(rvName, job.ReasonBackoffLimitExceeded) }),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberRestoreVolumesFailedReason}, msg: "BackoffLimitExceeded"},
		},
		{
			name: "volumes restored: the PVs first, for the target",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), func(o *Observed) {
				volumesRestored(o)
			}),
			want: rwant{actions: []ActionKind{CreatePV, CreatePV, CreatePV, CreatePV, TagVolume, TagVolume, TagVolume, TagVolume}, phase: PhaseRestoringVolumes,
				check: func(t *testing.T, r Result) {
					pv := r.Actions[2].PV // tikv-restored-tikv-0
					if pv.Spec.CSI.VolumeHandle != "vol-new-vol-old-3-tikv" || pv.Spec.CSI.Driver != tidbcluster.EBSCSIDriver ||
						pv.Spec.ClaimRef.Name != "tikv-restored-tikv-0" || pv.Spec.ClaimRef.Namespace != "dst" ||
						pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != "us-west-2b" || pv.Labels[LabelRestore] != "ruid-1" {
						t.Errorf("PV %+v", pv.Spec)
					}
					// Each volume is tagged after the PVs are created, as tidb-operator tags it.
					tag := r.Actions[6] // tikv-restored-tikv-0's volume
					want := map[string]string{"CSIVolumeName": pv.Name, "kubernetes.io/created-for/pv/name": pv.Name,
						"kubernetes.io/created-for/pvc/name": "tikv-restored-tikv-0", "kubernetes.io/created-for/pvc/namespace": "dst"}
					if tag.Name != "vol-new-vol-old-3-tikv" || !maps.Equal(tag.Tags, want) || len(tag.IDs) != 0 {
						t.Errorf("TagVolume %s %v dropping %v, want %v", tag.Name, tag.Tags, tag.IDs, want)
					}
				}},
		},
		{
			name: "the PVs seen, a volume's operator tags not seen yet: claims created, tagged again, VolumeComplete waits",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), func(o *Observed) {
				volumesRestored(o)
				claims, err := Rebuild(o.RestoreMeta, Target{TCName: "restored", Namespace: "dst", AZ: "us-west-2b", RestoreID: "ruid-1", Member: o.Member.Name, MemberNamespace: o.Member.Namespace})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range claims {
					o.PVs[c.PV.Name] = c.PV
				}
				operatorTagged(o, claims[1:])
			}),
			want: rwant{actions: []ActionKind{TagVolume, CreatePVC, CreatePVC, CreatePVC, CreatePVC}, phase: PhaseRestoringVolumes, requeue: true,
				check: func(t *testing.T, r Result) {
					if r.RequeueAfter != tagRecheck || condition.IsTrue(r.Status.Conditions, dpv1alpha1.RestoreMemberVolumeCompleteCondition) {
						t.Errorf("requeue %s, conditions %+v", r.RequeueAfter, r.Status.Conditions)
					}
				}},
		},
		{
			name: "a volume at AWS's 50 tags: copied tags dropped, least useful first, to make room for the operator tags",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), func(o *Observed) {
				volumesRestored(o)
				var tags map[string]string
				restoredVolume(o, 0, func(v *cloud.Volume) { tags = v.Tags })
				tags["snapshot/CSIVolumeName"], tags["snapshot/fedbr.io/backup"], tags["team"] = "pvc-old", "b1", "db"
				for i := len(tags); i < cloud.MaxTags; i++ {
					tags[fmt.Sprintf("snapshot/cost-%02d", i)] = "v"
				}
			}),
			want: rwant{actions: []ActionKind{CreatePV, CreatePV, CreatePV, CreatePV, TagVolume, TagVolume, TagVolume, TagVolume}, phase: PhaseRestoringVolumes,
				check: func(t *testing.T, r Result) {
					var drops [][]string
					for _, a := range r.Actions {
						if a.Kind == TagVolume && len(a.IDs) > 0 {
							drops = append(drops, a.IDs)
						}
					}
					want := []string{"snapshot/CSIVolumeName", "snapshot/cost-48", "snapshot/cost-49", "snapshot/fedbr.io/backup"}
					if len(drops) != 1 || !slices.Equal(drops[0], want) {
						t.Errorf("tags dropped %v, want %v on one volume", drops, want)
					}
				}},
		},
		{
			name: "the PVs seen, a volume described without any tag: tagged, no crash",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), func(o *Observed) {
				volumesRestored(o)
				claims, err := Rebuild(o.RestoreMeta, Target{TCName: "restored", Namespace: "dst", AZ: "us-west-2b", RestoreID: "ruid-1", Member: o.Member.Name, MemberNamespace: o.Member.Namespace})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range claims {
					o.PVs[c.PV.Name] = c.PV
				}
				operatorTagged(o, claims)
				restoredVolume(o, 0, func(v *cloud.Volume) { v.Tags = nil })
			}),
			want: rwant{actions: []ActionKind{TagVolume, CreatePVC, CreatePVC, CreatePVC, CreatePVC}, phase: PhaseRestoringVolumes, requeue: true},
		},
		{
			name: "the PVs just created, a volume not described (EC2's eventual consistency): tagged again, nothing failed",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), pvsSeen(t, t0.Add(-missingGrace+time.Second), func(o *Observed) {
				delete(o.RestoredVolumes, slices.Sorted(maps.Keys(o.RestoredVolumes))[0])
			})),
			want: rwant{actions: []ActionKind{CreatePVC, CreatePVC, CreatePVC, CreatePVC}, phase: PhaseRestoringVolumes, requeue: true,
				check: func(t *testing.T, r Result) {
					if r.RequeueAfter != tagRecheck || condition.IsTrue(r.Status.Conditions, dpv1alpha1.RestoreMemberFailedCondition) {
						t.Errorf("requeue %s, conditions %+v", r.RequeueAfter, r.Status.Conditions)
					}
				}},
		},
		{
			name: "a volume no longer described a grace after its PV was created: failed, the volume named",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), pvsSeen(t, t0.Add(-missingGrace), func(o *Observed) {
				delete(o.RestoredVolumes, "vol-new-vol-old-3-tikv")
			})),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberRestoredVolumeMissingReason},
				msg: "volume vol-new-vol-old-3-tikv of PV fedbr-ruid-1-dst-tikv-restored-tikv-0: EC2 no longer describes it", phase: PhaseFailed},
		},
		{
			name: "a volume described deleting after its PV was created: failed at once, the volume named",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), pvsSeen(t, t0, func(o *Observed) {
				v := o.RestoredVolumes["vol-new-vol-old-3-tikv"]
				v.State = "deleting"
				o.RestoredVolumes[v.ID] = v
			})),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberRestoredVolumeMissingReason},
				msg: "volume vol-new-vol-old-3-tikv of PV fedbr-ruid-1-dst-tikv-restored-tikv-0 is deleting", phase: PhaseFailed},
		},
		{
			name: "the PVs seen, the volumes not describable: claims created, VolumeComplete waits, said and retried",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), func(o *Observed) {
				volumesRestored(o)
				claims, err := Rebuild(o.RestoreMeta, Target{TCName: "restored", Namespace: "dst", AZ: "us-west-2b", RestoreID: "ruid-1", Member: o.Member.Name, MemberNamespace: o.Member.Namespace})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range claims {
					o.PVs[c.PV.Name] = c.PV
				}
				o.RestoredVolumes, o.RestoredVolumesErr = nil, errors.New("RequestLimitExceeded")
			}),
			want: rwant{actions: []ActionKind{CreatePVC, CreatePVC, CreatePVC, CreatePVC}, phase: PhaseRestoringVolumes, requeue: true,
				reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberCloudUnreachableReason}, msg: "RequestLimitExceeded"},
		},
		{
			name: "restore-volumes left copied tags out and restored a volume without FSR: a Warning each as the volumes complete",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), func(o *Observed) {
				volumesRestored(o)
				o.Report = rreport(map[string]string{job.StepRestoreVolumes: `{"phase":"Completed","done":4,"total":4}`,
					job.StepRestoreVolumes + ".result": `{"restoreID":"ruid-1","volumes":[],"droppedTags":["snapshot/cost-1","snapshot/owner"],` +
						`"withoutFSR":[{"snapshotID":"snap-a","reason":"the region's fast snapshot restore quota of 5 snapshots is full"}]}`})
				claims, err := Rebuild(o.RestoreMeta, Target{TCName: "restored", Namespace: "dst", AZ: "us-west-2b", RestoreID: "ruid-1", Member: o.Member.Name, MemberNamespace: o.Member.Namespace})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range claims {
					o.PVs[c.PV.Name] = c.PV
				}
				operatorTagged(o, claims)
			}),
			want: rwant{actions: []ActionKind{CreatePVC, CreatePVC, CreatePVC, CreatePVC, Warn, Warn, AnnotateTC},
				true:  []string{dpv1alpha1.RestoreMemberVolumeCompleteCondition},
				phase: PhaseVolumeComplete, check: func(t *testing.T, r Result) {
					if a := r.Actions[4]; a.Key != ReasonTagsDropped || !strings.Contains(a.Value, "snapshot/cost-1, snapshot/owner") {
						t.Errorf("warning %+v", a)
					}
					if a := r.Actions[5]; a.Key != ReasonWithoutFSR || !strings.Contains(a.Value, "snap-a: the region's fast snapshot restore quota of 5 snapshots is full") {
						t.Errorf("warning %+v", a)
					}
				}},
		},
		{
			name: "the PVs seen: PVCs pre-bound to them, TiKV started",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), func(o *Observed) {
				volumesRestored(o)
				claims, err := Rebuild(o.RestoreMeta, Target{TCName: "restored", Namespace: "dst", AZ: "us-west-2b", RestoreID: "ruid-1", Member: o.Member.Name, MemberNamespace: o.Member.Namespace})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range claims {
					o.PVs[c.PV.Name] = c.PV
				}
				operatorTagged(o, claims)
			}),
			want: rwant{actions: []ActionKind{CreatePVC, CreatePVC, CreatePVC, CreatePVC, AnnotateTC},
				true:  []string{dpv1alpha1.RestoreMemberVolumeCompleteCondition, dpv1alpha1.RestoreMemberWarmUpCompleteCondition},
				phase: PhaseVolumeComplete, check: func(t *testing.T, r Result) {
					var names []string
					for _, a := range r.Actions {
						if a.Kind == CreatePVC {
							names = append(names, a.PVC.Namespace+"/"+a.PVC.Name+"→"+a.PVC.Spec.VolumeName)
						}
					}
					want := []string{
						"dst/tikv-raft-restored-tikv-0→fedbr-ruid-1-dst-tikv-raft-restored-tikv-0",
						"dst/tikv-raft-restored-tikv-1→fedbr-ruid-1-dst-tikv-raft-restored-tikv-1",
						"dst/tikv-restored-tikv-0→fedbr-ruid-1-dst-tikv-restored-tikv-0",
						"dst/tikv-restored-tikv-1→fedbr-ruid-1-dst-tikv-restored-tikv-1",
					}
					if !slices.Equal(names, want) {
						t.Errorf("claims %v, want %v", names, want)
					}
					if a := r.Actions[4]; a.Key != pcv1alpha1.TiKVVolumesReadyAnnotation || a.Value != "dst/fed-r1" {
						t.Errorf("annotation %+v", a)
					}
					if r.Status.CommitTs != fmt.Sprint(resolvedTS) || r.Status.VolumesReady != 4 {
						t.Errorf("status %+v", r.Status)
					}
				}},
		},
		{
			name: "restoremeta naming a volume of another restore: no PV at all, refused by id and rule",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), func(o *Observed) {
				volumesRestored(o)
				restoredVolume(o, 1, func(v *cloud.Volume) { v.Tags = meta.RestoreTags("ruid-other") })
			}),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberVolumeNotOwnedReason},
				msg: "rule " + meta.RuleRestoreTag},
		},
		{
			name: "restoremeta naming an untagged volume (another cluster's TiKV volume) is refused",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), func(o *Observed) {
				volumesRestored(o)
				restoredVolume(o, 0, func(v *cloud.Volume) { v.Tags = map[string]string{"CSIVolumeName": "pvc-prod"} })
			}),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberVolumeNotOwnedReason},
				msg: "tagged " + meta.TagRestore + `="", not "ruid-1"`},
		},
		{
			name: "restoremeta naming a volume that does not exist is refused",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), func(o *Observed) {
				volumesRestored(o)
				delete(o.RestoredVolumes, slices.Sorted(maps.Keys(o.RestoredVolumes))[0])
			}),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberVolumeNotOwnedReason},
				msg: "does not exist in this account"},
		},
		{
			name: "restored volumes not describable: retried, nothing created",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(2, true), func(o *Observed) {
				volumesRestored(o)
				o.RestoredVolumesErr = errors.New("RequestLimitExceeded")
			}),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberCloudUnreachableReason},
				msg: "RequestLimitExceeded", phase: PhaseRestoringVolumes, requeue: true},
		},
		{
			name: "restoremeta renumbered for another TiKV count is refused",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume), targetTC(3, true), func(o *Observed) {
				volumesRestored(o)
			}),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberTiKVCountMismatchReason}},
		},
		{
			name: "annotated, stores not up yet: wait",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, tikvUp[:2]...), handedOver(1)),
			want: rwant{actions: nil, phase: PhaseVolumeComplete},
		},
		{
			name: "tolerateSingleTiKVOutage: one of the two stores up is enough",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, append(tikvUp[:2:2], func(m *dpv1alpha1.VolumeRestoreMember) {
				m.Spec.Template.TolerateSingleTiKVOutage = true
			})...), handedOver(1)),
			want: rwant{true: []string{dpv1alpha1.RestoreMemberTikvCompleteCondition}, phase: PhaseTikvComplete, msg: "1 of 2 TiKV stores up"},
		},
		{
			name: "the data member's restore-data starts armed while its stores come up",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, append(tikvUp[:2:2], dataMember)...), handedOver(1)),
			want: rwant{actions: []ActionKind{EnsureServiceAccount, CreateJob}, phase: PhaseVolumeComplete, check: func(t *testing.T, r Result) {
				args := r.Actions[1].Job.Spec.Template.Spec.Containers[0].Args
				if !slices.Contains(args, "--wait-start") || argValue(args, "--member") != "fed-r1" || argValue(args, "--pd") != "http://pd:2379" {
					t.Errorf("args %v", args)
				}
				if slices.Contains(args, "--timeout") || r.Actions[1].Job.Spec.ActiveDeadlineSeconds != nil {
					t.Errorf("restore-data bounded by the step itself (args %v, deadline %v): the manager times the member's phase", args, r.Actions[1].Job.Spec.ActiveDeadlineSeconds)
				}
				if b := *r.Actions[1].Job.Spec.BackoffLimit; b != dataRetries {
					t.Errorf("restore-data backoffLimit %d, want %d: a killed attempt is run again", b, dataRetries)
				}
			}},
		},
		{
			name: "an armed restore-data is not started again",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, append(tikvUp[:2:2], dataMember)...), handedOver(1), func(o *Observed) { o.RestoreData = job.State{Name: rdName, Phase: job.Active} }),
			want: rwant{actions: nil, phase: PhaseVolumeComplete},
		},
		{
			name: "an armed restore-data that fails fails the member before its go",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, append(tikvUp[:2:2], dataMember)...), handedOver(1), func(o *Observed) {
				o.RestoreData = job.State{Name: rdName, Phase: job.Failed, Reason: job.ReasonBackoffLimitExceeded, Message: "boom", Started: t0, Finished: t0}
			}),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberRestoreDataFailedReason}, phase: PhaseFailed},
		},
		{
			name: "a member that is not the data member arms nothing",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, tikvUp[:2]...), handedOver(1)),
			want: rwant{actions: nil, phase: PhaseVolumeComplete},
		},
		{
			name: "every store up: TikvComplete",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, tikvUp[:2]...), handedOver(2)),
			want: rwant{actions: nil, true: []string{dpv1alpha1.RestoreMemberTikvCompleteCondition}, phase: PhaseTikvComplete},
		},
	} {
		t.Run(tt.name, func(t *testing.T) { rcheck(t, planned(t, tt.o), tt.want) })
	}
}

func TestPlanDataAndFinish(t *testing.T) {
	ready := func(phase dpv1alpha1.RestoreMemberPhase, mut ...func(*dpv1alpha1.VolumeRestoreMember)) *dpv1alpha1.VolumeRestoreMember {
		return rmember(phase, append(append([]func(*dpv1alpha1.VolumeRestoreMember){}, tikvUp...), mut...)...)
	}
	pods := func(uids ...string) func(*Observed) {
		return func(o *Observed) {
			for i, u := range uids {
				o.Pods = append(o.Pods, TiKVPod{Name: fmt.Sprintf("restored-tikv-%d", i), UID: types.UID(u), Ready: true})
			}
		}
	}
	recorded := func(v string) func(*dpv1alpha1.VolumeRestoreMember) {
		return func(m *dpv1alpha1.VolumeRestoreMember) { m.Annotations = map[string]string{AnnotationRecoveryPods: v} }
	}
	for _, tt := range []struct {
		name string
		o    Observed
		want rwant
	}{
		{
			name: "restore-data runs for the whole cluster",
			o: robs(ready(dpv1alpha1.RestoreMemberRestoreData, func(m *dpv1alpha1.VolumeRestoreMember) { m.Spec.Template.TolerateSingleTiKVOutage = true }),
				storesUp(targetTC(2, true), 2)),
			want: rwant{actions: []ActionKind{EnsureServiceAccount, CreateJob}, phase: PhaseRestoringData, check: func(t *testing.T, r Result) {
				args := r.Actions[1].Job.Spec.Template.Spec.Containers[0].Args
				if !slices.Contains(args, "--tolerate-single-tikv-outage") || argValue(args, "--pd") != "http://pd:2379" || argValue(args, "--storage") != "s3://bk/p-az1" ||
					argValue(args, "--resolved-ts") != "42" {
					t.Errorf("args %v", args)
				}
			}},
		},
		{
			name: "a TLS cluster's restore-data gets its cluster client secret",
			o: robs(ready(dpv1alpha1.RestoreMemberRestoreData), func() *pcv1alpha1.TidbCluster {
				tc := storesUp(targetTC(2, true), 2)
				tc.Spec.TLSCluster = &pcv1alpha1.TLSCluster{Enabled: true}
				return tc
			}()),
			want: rwant{actions: []ActionKind{EnsureServiceAccount, CreateJob}, phase: PhaseRestoringData, check: func(t *testing.T, r Result) {
				checkClusterTLS(t, r.Actions[1].Job.Spec.Template.Spec)
			}},
		},
		{
			name: "the armed restore-data takes its go off the member's phase: the agent waits for the step",
			o: robs(ready(dpv1alpha1.RestoreMemberRestoreData, dataMember), storesUp(targetTC(2, true), 2), func(o *Observed) {
				o.RestoreData = job.State{Name: rdName, Phase: job.Active}
			}),
			want: rwant{actions: nil, phase: PhaseRestoringData},
		},
		{
			name: "the TidbCluster deleted mid-restore fails the member instead of waiting",
			o:    robs(ready(dpv1alpha1.RestoreMemberRestoreFinish), nil),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.TidbClusterNotFoundReason}, phase: PhaseFailed},
		},
		{
			name: "restore-data failed, its Job out of attempts",
			o: robs(ready(dpv1alpha1.RestoreMemberRestoreData), storesUp(targetTC(2, true), 2), func(o *Observed) {
				o.RestoreData = job.State{Name: rdName, Phase: job.Failed, Reason: job.ReasonBackoffLimitExceeded}
				o.Report = rreport(map[string]string{job.StepRestoreData: `{"phase":"Failed","error":"hole in the key space"}`})
			}),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberRestoreDataFailedReason}, msg: "hole"},
		},
		{
			name: "a restore-data attempt failed (its pod deleted), the Job runs another: the restore goes on",
			o: robs(ready(dpv1alpha1.RestoreMemberRestoreData), storesUp(targetTC(2, true), 2), func(o *Observed) {
				o.RestoreData = job.State{Name: rdName, Phase: job.Active}
				o.Report = rreport(map[string]string{job.StepRestoreData: `{"phase":"Failed","error":"context canceled"}`})
			}),
			want: rwant{phase: PhaseRestoringData, check: func(t *testing.T, r Result) {
				if condition.IsTrue(r.Status.Conditions, dpv1alpha1.RestoreMemberFailedCondition) {
					t.Errorf("member failed on an attempt its Job retries: %+v", r.Status.Conditions)
				}
			}},
		},
		{
			name: "restore-data done",
			o: robs(ready(dpv1alpha1.RestoreMemberRestoreData), storesUp(targetTC(2, true), 2), func(o *Observed) {
				o.RestoreData = job.State{Name: rdName, Phase: job.Succeeded}
				o.Report = rreport(map[string]string{job.StepRestoreData: `{"phase":"Completed"}`, job.StepRestoreData + ".result": `{"resolvedTS":42,"regions":10}`})
			}),
			want: rwant{actions: nil, true: []string{dpv1alpha1.RestoreMemberDataCompleteCondition}, phase: PhaseDataComplete, check: func(t *testing.T, r Result) {
				if r.Status.RestoredTS != "42" {
					t.Errorf("status.restoredTS = %q, want the step's echo 42", r.Status.RestoredTS)
				}
			}},
		},
		{
			name: "restore-data done without saying what ts it restored to: refused",
			o: robs(ready(dpv1alpha1.RestoreMemberRestoreData), storesUp(targetTC(2, true), 2), func(o *Observed) {
				o.RestoreData = job.State{Name: rdName, Phase: job.Succeeded}
				o.Report = rreport(map[string]string{job.StepRestoreData: `{"phase":"Completed"}`, job.StepRestoreData + ".result": `{"regions":10}`})
			}),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.InvalidReportReason}, msg: "names no resolved ts", phase: PhaseFailed},
		},
		{
			name: "restore-data is never started without the decided ts",
			o:    robs(ready(dpv1alpha1.RestoreMemberRestoreData, func(m *dpv1alpha1.VolumeRestoreMember) { m.Spec.ResolvedTS = "" }), storesUp(targetTC(2, true), 2)),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberRestoreDataFailedReason}, msg: "spec.resolvedTS is not set", phase: PhaseFailed},
		},
		{
			name: "restore-finish: leave recovery mode, record and restart the recovery pods",
			o:    robs(ready(dpv1alpha1.RestoreMemberRestoreFinish), storesUp(targetTC(2, true), 2), pods("u1", "u2")),
			want: rwant{actions: []ActionKind{LeaveRecoveryMode, AnnotateMember, DeletePod, DeletePod}, phase: PhaseFinishing, check: func(t *testing.T, r Result) {
				if r.Actions[1].Value != "u1,u2" {
					t.Errorf("recorded %q", r.Actions[1].Value)
				}
			}},
		},
		{
			name: "restore-finish with recoveryMode already false still restarts TiKV",
			o:    robs(ready(dpv1alpha1.RestoreMemberRestoreFinish), storesUp(targetTC(2, false), 2), pods("u1", "u2")),
			want: rwant{actions: []ActionKind{AnnotateMember, DeletePod, DeletePod}},
		},
		{
			name: "restarted pods not ready yet: wait",
			o: robs(ready(dpv1alpha1.RestoreMemberRestoreFinish, recorded("u1,u2")), storesUp(targetTC(2, false), 2), pods("u3", "u4"), func(o *Observed) {
				o.Pods[1].Ready = false
			}),
			want: rwant{actions: nil, phase: PhaseFinishing},
		},
		{
			name: "restarted out of recovery mode: Complete",
			o:    robs(ready(dpv1alpha1.RestoreMemberRestoreFinish, recorded("u1,u2")), storesUp(targetTC(2, false), 2), pods("u3", "u4")),
			want: rwant{actions: nil, true: []string{dpv1alpha1.RestoreMemberCompleteCondition}, phase: PhaseComplete},
		},
		{
			name: "restarted with one store down and tolerateSingleTiKVOutage: Complete",
			o: robs(ready(dpv1alpha1.RestoreMemberRestoreFinish, recorded("u1"), func(m *dpv1alpha1.VolumeRestoreMember) {
				m.Spec.Template.TolerateSingleTiKVOutage = true
			}), storesUp(targetTC(2, false), 1), pods("u3")),
			want: rwant{actions: nil, true: []string{dpv1alpha1.RestoreMemberCompleteCondition}, phase: PhaseComplete},
		},
		{
			name: "restarted with one store down, no tolerance: wait",
			o:    robs(ready(dpv1alpha1.RestoreMemberRestoreFinish, recorded("u1")), storesUp(targetTC(2, false), 1), pods("u3")),
			want: rwant{actions: nil, phase: PhaseFinishing},
		},
	} {
		t.Run(tt.name, func(t *testing.T) { rcheck(t, planned(t, tt.o), tt.want) })
	}
}

func TestPlanRestoreDeletion(t *testing.T) {
	del := func(m *dpv1alpha1.VolumeRestoreMember) { m.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }
	failedCond := rcond(dpv1alpha1.RestoreMemberFailedCondition, dpv1alpha1.RestoreMemberRestoreDataFailedReason)
	claim := func(o *Observed) {
		o.PVCs["tikv-restored-tikv-0"] = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "tikv-restored-tikv-0"}}
		o.PVs["fedbr-ruid-1-dst-tikv-restored-tikv-0"] = &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "fedbr-ruid-1-dst-tikv-restored-tikv-0"}}
	}
	annotated := func() *pcv1alpha1.TidbCluster {
		tc := targetTC(2, true)
		tc.Annotations = map[string]string{pcv1alpha1.TiKVVolumesReadyAnnotation: "dst/fed-r1"}
		return tc
	}
	for _, tt := range []struct {
		name string
		o    Observed
		want rwant
	}{
		{
			name: "a complete restore deletes nothing",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreFinish, del, rcond(dpv1alpha1.RestoreMemberCompleteCondition, dpv1alpha1.RestoreMemberRecoveryModeOffReason)), targetTC(2, false), claim),
			want: rwant{release: true},
		},
		{
			name: "a running step is stopped first",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, del), targetTC(2, true), claim, func(o *Observed) {
				o.RestoreVolumes = job.State{Name: rvName, Phase: job.Active}
			}),
			want: rwant{actions: []ActionKind{DeleteJob}, phase: PhaseCleaning},
		},
		{
			name: "TiKV lets go of the restored claims",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, del, failedCond), annotated(), claim, func(o *Observed) {
				o.Pods = []TiKVPod{{Name: "restored-tikv-0", UID: "u1", Claims: []string{"tikv-restored-tikv-0"}}}
			}),
			want: rwant{actions: []ActionKind{AnnotateTC, DeletePod}},
		},
		{
			name: "claims, then volumes",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, del, failedCond), targetTC(2, true), claim),
			want: rwant{actions: []ActionKind{DeletePVC}},
		},
		{
			name: "PVs once the claims are gone",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, del, failedCond), targetTC(2, true), claim, func(o *Observed) {
				o.PVCs = map[string]*corev1.PersistentVolumeClaim{}
			}),
			want: rwant{actions: []ActionKind{DeletePV}},
		},
		{
			name: "the restore's EBS volumes are deleted and rechecked",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, del, failedCond), targetTC(2, true), func(o *Observed) {
				o.CloudListed, o.CloudVolumes = true, []string{"vol-a", "vol-b"}
			}),
			want: rwant{actions: []ActionKind{DeleteVolumes}, requeue: true, reason: map[string]string{dpv1alpha1.RestoreMemberVolumesCleanedCondition: dpv1alpha1.RestoreMemberCleaningReason}},
		},
		{
			name: "listing the volumes fails: surfaced and retried",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, del, failedCond), targetTC(2, true), func(o *Observed) {
				o.CloudErr = errors.New("UnauthorizedOperation")
			}),
			want: rwant{actions: nil, requeue: true, phase: PhaseCleanFailed, msg: "UnauthorizedOperation"},
		},
		{
			name: "nothing left: VolumesCleaned and the finalizer goes",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, del, failedCond), targetTC(2, true), func(o *Observed) { o.CloudListed = true }),
			want: rwant{release: true, true: []string{dpv1alpha1.RestoreMemberVolumesCleanedCondition}},
		},
		{
			name: "force-remove",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, del, failedCond, func(m *dpv1alpha1.VolumeRestoreMember) {
				m.Annotations = map[string]string{ForceRemoveAnnotation: "true"}
			}), targetTC(2, true), claim),
			want: rwant{release: true, reason: map[string]string{dpv1alpha1.RestoreMemberVolumesCleanedCondition: dpv1alpha1.RestoreMemberForceRemovedReason}},
		},
	} {
		t.Run(tt.name, func(t *testing.T) { rcheck(t, planned(t, tt.o), tt.want) })
	}
}

func TestRebuildSameNameInAnotherNamespace(t *testing.T) {
	a, err := Rebuild(record(t), Target{TCName: "basic", Namespace: "ns-a", RestoreID: "r1", Member: "fed-r"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Rebuild(record(t), Target{TCName: "basic", Namespace: "ns-b", RestoreID: "r1", Member: "fed-r"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if a[i].PVC.Name != b[i].PVC.Name || a[i].PV.Name == b[i].PV.Name {
			t.Errorf("claim %s: PVs %s and %s must differ", a[i].PVC.Name, a[i].PV.Name, b[i].PV.Name)
		}
	}
	if a[0].PV.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != "us-west-2a" {
		t.Errorf("without azName the restored volume's zone is kept: %+v", a[0].PV.Spec.NodeAffinity)
	}
}

// TestRestoreVolumesUpstreamFlag: restore-volumes may read an upstream backup only when the
// agent's policy allows upstream backups (--allow-upstream-backups); a template cannot ask for it
// through its BR options.
func TestRestoreVolumesUpstreamFlag(t *testing.T) {
	argsOf := func(o Observed) []string {
		for _, a := range Plan(o, t0).Actions {
			if a.Kind == CreateJob && a.Job.Labels[job.LabelStep] == job.StepRestoreVolumes {
				return a.Job.Spec.Template.Spec.Containers[0].Args
			}
		}
		return nil
	}
	fresh := func(mut ...func(*dpv1alpha1.VolumeRestoreMember)) Observed {
		return robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, mut...), targetTC(2, true))
	}
	if args := argsOf(fresh()); args == nil || slices.Contains(args, "--allow-upstream-backup") {
		t.Errorf("the default policy: restore-volumes args %v, want it started without --allow-upstream-backup", args)
	}
	allowing, err := policy.New(policy.Config{AgentImage: "fedbr:test", StepServiceAccount: job.ServiceAccountName, SameNamespace: true, UpstreamBackups: true})
	if err != nil {
		t.Fatal(err)
	}
	o := fresh()
	o.Policy = allowing
	if args := argsOf(o); !slices.Contains(args, "--allow-upstream-backup") {
		t.Errorf("--allow-upstream-backups: restore-volumes args %v, want --allow-upstream-backup", args)
	}
	asked := fresh(func(m *dpv1alpha1.VolumeRestoreMember) {
		m.Spec.Template.BR = &fedv1alpha1.BRConfig{Options: []string{"--allow-upstream-backup"}}
	})
	res := Plan(asked, t0)
	failed := apimeta.FindStatusCondition(res.Status.Conditions, dpv1alpha1.RestoreMemberFailedCondition)
	if argsOf(asked) != nil || failed == nil || !strings.Contains(failed.Message, `br option "--allow-upstream-backup"`) {
		t.Errorf("a template asking for upstream backups: actions %v, Failed %+v; want no Job and the option refused", res.Actions, failed)
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
