package restoremember

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/metrics"
	"github.com/fedbr/fedbr/internal/agent/policy"
	brreport "github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/cloud/blob"
	rvcmd "github.com/fedbr/fedbr/internal/cmd/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/awsdouble/awsdoubletest"
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
	code := m.Run() // each test stops its agent in its cleanup
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the API server:", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

// startAgent runs a restore controller for one test, against the AWS double of lab; each test
// has its own controller name so they can run in one manager process each.
func startAgent(t *testing.T, lab awsdoubletest.Lab, name string) {
	t.Helper()
	if env == nil {
		t.Skip("needs a real API server; skipped in -short mode")
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("fedbr-agent"), Metrics: metrics.New(),
		Env: job.Env{Image: "fedbr:test", AWSEndpoint: lab.Endpoint, Region: "us-west-2"}, ClusterName: name, Cloud: lab.Provider}
	// The restores read their backup from a hostPath directory, as in the lab.
	pol, err := policy.New(policy.Config{AgentImage: r.Env.Image, StepServiceAccount: job.ServiceAccountName, SameNamespace: true, HostPath: true})
	if err != nil {
		t.Fatal(err)
	}
	r.Policy = pol
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
	t.Cleanup(func() { cancel(); <-done })
}

func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	testenv.Eventually(t, what, 90*time.Second, cond)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// fixture is one data plane's restore: the target TidbCluster in recovery mode, the backup in
// a hostPath storage, and the AWS double the volumes come from.
type fixture struct {
	t       *testing.T
	ctx     context.Context
	ns      string
	dir     string // the storage prefix's directory
	lab     awsdoubletest.Lab
	key     types.NamespacedName
	oldVol  string
	newVol  string
	backup  *meta.Record
	cluster string
	// volTags are tags the restored volume carries besides the restore's identity.
	volTags map[string]string
}

func newFixture(t *testing.T, ns string) *fixture {
	f := &fixture{t: t, ctx: context.Background(), ns: ns, cluster: "az-" + ns}
	f.lab = awsdoubletest.Serve(t, awsdouble.Options{}, "")
	startAgent(t, f.lab, f.cluster)
	c := env.Client
	must(t, c.Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	tc := &pcv1alpha1.TidbCluster{ObjectMeta: metav1.ObjectMeta{Name: "restored", Namespace: ns},
		Spec: pcv1alpha1.TidbClusterSpec{RecoveryMode: true, TiKV: &pcv1alpha1.ComponentSpec{Replicas: 1}, PD: &pcv1alpha1.ComponentSpec{Replicas: 1}}}
	must(t, c.Create(f.ctx, tc))
	tc.Status.PD.Members = map[string]pcv1alpha1.PDMember{"restored-pd-0": {Name: "restored-pd-0", ClientURL: "http://127.0.0.1:2379"}}
	must(t, c.Update(f.ctx, tc))

	// The backed-up volume: an instance's data volume, snapshotted.
	inst, err := f.lab.Server.CreateInstance(awsdouble.InstanceSpec{AZ: "us-west-2a", Volumes: []awsdouble.VolumeSpec{{Device: "/dev/sdb", SizeGiB: 10}}})
	must(t, err)
	f.oldVol = inst.Volumes[0].ID
	snaps, err := f.lab.Provider.SnapshotInstance(f.ctx, cloud.SnapshotRequest{InstanceID: inst.ID, VolumeIDs: []string{f.oldVol}, Tags: meta.BackupTags("b-" + ns)})
	must(t, err)
	_, err = f.lab.Provider.WaitSnapshots(f.ctx, []string{snaps[0].ID}, nil)
	must(t, err)

	rec := record(t)
	rec.TiKV = meta.TiKV{Replicas: 1, Stores: []meta.TiKVStore{{ID: 11, Volumes: []meta.Volume{{ID: f.oldVol, Type: meta.DataDirType, SnapshotID: snaps[0].ID, AZ: "us-west-2a"}}}}}
	rec.Kubernetes.PVs, rec.Kubernetes.PVCs = nil, nil
	// The source cluster's claim tikv-src-tikv-4 on the backed-up volume.
	pv := map[string]any{"metadata": map[string]any{"name": "pvc-src-4"}, "spec": map[string]any{
		"capacity": map[string]any{"storage": "10Gi"}, "accessModes": []string{"ReadWriteOnce"}, "storageClassName": "gp3",
		"csi":      map[string]any{"driver": "ebs.csi.aws.com", "volumeHandle": f.oldVol, "fsType": "ext4"},
		"claimRef": map[string]any{"namespace": "prod", "name": "tikv-src-tikv-4"}}}
	pvc := map[string]any{"metadata": map[string]any{"name": "tikv-src-tikv-4", "namespace": "prod"}, "spec": map[string]any{
		"volumeName": "pvc-src-4", "storageClassName": "gp3", "accessModes": []string{"ReadWriteOnce"},
		"resources": map[string]any{"requests": map[string]any{"storage": "10Gi"}}}}
	for _, o := range []struct {
		list *[]json.RawMessage
		v    any
	}{{&rec.Kubernetes.PVs, pv}, {&rec.Kubernetes.PVCs, pvc}} {
		b, err := json.Marshal(o.v)
		must(t, err)
		*o.list = append(*o.list, b)
	}
	f.backup = rec
	f.dir = filepath.Join(t.TempDir(), "p-az1")
	b, err := blob.NewDir(f.dir)
	must(t, err)
	must(t, meta.NewStore(b, nil).PutBackupMeta(f.ctx, rec))
	return f
}

func (f *fixture) createMember() { f.createMemberWith() }

func (f *fixture) createMemberWith(mut ...func(*dpv1alpha1.VolumeRestoreMember)) {
	m := &dpv1alpha1.VolumeRestoreMember{
		ObjectMeta: metav1.ObjectMeta{Name: "fed-r1", Namespace: f.ns, Labels: map[string]string{dpv1alpha1.LabelOwnerNamespace: f.ns}},
		Spec: dpv1alpha1.VolumeRestoreMemberSpec{VolumeRestore: "r1", K8sClusterName: f.cluster, TCName: "restored", TCNamespace: f.ns,
			AZName: "us-west-2b", Phase: dpv1alpha1.RestoreMemberRestoreVolume,
			Backup: fedv1alpha1.StorageProvider{Local: &fedv1alpha1.LocalStorageProvider{
				Volume:      corev1.Volume{Name: "backup", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: filepath.Dir(f.dir)}}},
				VolumeMount: corev1.VolumeMount{Name: "backup", MountPath: "/backup"}, Prefix: "p-az1"}}},
	}
	for _, f := range mut {
		f(m)
	}
	must(f.t, env.Client.Create(f.ctx, m))
	f.key = client.ObjectKeyFromObject(m)
}

func (f *fixture) member() *dpv1alpha1.VolumeRestoreMember {
	m := &dpv1alpha1.VolumeRestoreMember{}
	if err := env.Client.Get(f.ctx, f.key, m); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		f.t.Fatal(err)
	}
	return m
}

func (f *fixture) update(mutate func(*dpv1alpha1.VolumeRestoreMember)) {
	must(f.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m := f.member()
		mutate(m)
		return env.Client.Update(f.ctx, m)
	}))
}

func (f *fixture) waitCondition(typ string) {
	f.t.Helper()
	eventually(f.t, typ, func() (bool, string) {
		m := f.member()
		if m == nil {
			return false, "member gone"
		}
		return apimeta.IsStatusConditionTrue(m.Status.Conditions, typ), fmt.Sprintf("%+v", m.Status.Conditions)
	})
}

func (f *fixture) job(step string) *batchv1.Job {
	j := &batchv1.Job{}
	if err := env.Client.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: job.Name("fed-r1", step)}, j); err != nil {
		return nil
	}
	return j
}

// writeReport writes steps' reports into the member's status.steps exactly as the steps do
// (data: each step's status document under its name, its result under <step>.result).
func (f *fixture) writeReport(data map[string]string) {
	byStep := map[string]map[string]string{}
	for k, v := range data {
		step, _ := strings.CutSuffix(k, ".result")
		if byStep[step] == nil {
			byStep[step] = map[string]string{}
		}
		byStep[step][k] = v
	}
	for step, keys := range byStep {
		sink, err := brreport.NewMemberStep(env.Config, dpv1alpha1.GroupVersion.WithKind(Kind), "volumerestoremembers", f.ns, "fed-r1", step)
		must(f.t, err)
		must(f.t, sink.Apply(f.ctx, keys))
	}
}

// restoreVolumes plays `fedbr br restore-volumes`: the backup reported, the agent's go
// awaited, a volume from the snapshot tagged with the restore id, the status and summary.
func (f *fixture) restoreVolumes() { f.restoreVolumesRecording("") }

// reportBackup plays restore-volumes up to its wait for the agent's check: the Job's args, and
// the backup reported in phase AwaitingCheck (restorevolumes.BackupReport); it returns the
// status document, which every later report of the step repeats.
func (f *fixture) reportBackup() string {
	var j *batchv1.Job
	eventually(f.t, "restore-volumes Job", func() (bool, string) { j = f.job(job.StepRestoreVolumes); return j != nil, "none" })
	args := j.Spec.Template.Spec.Containers[0].Args
	if argValue(args, "--restore-id") != string(f.member().UID) || argValue(args, "--target-az") != "us-west-2b" || argValue(args, "--storage") != "backup/p-az1" {
		f.t.Errorf("restore-volumes args %v", args)
	}
	sub, err := restorevolumes.BackupReport(f.backup)
	must(f.t, err)
	doc, err := json.Marshal(restorevolumes.Status{Phase: restorevolumes.PhaseAwaitingCheck, ResolvedTS: resolvedTS, Backup: sub})
	must(f.t, err)
	f.writeReport(map[string]string{job.StepRestoreVolumes: string(doc)})
	return string(doc)
}

// restoreVolumesRecording is restoreVolumes with a result that names volume forged instead of
// the restored one (when not empty), as the tenant's identity, which may write the step's
// entry, may.
func (f *fixture) restoreVolumesRecording(forged string) {
	doc := f.reportBackup()
	f.waitCondition(dpv1alpha1.RestoreMemberTargetCheckedCondition)
	m := f.member()
	if m.Status.CommitTs != fmt.Sprint(resolvedTS) {
		f.t.Errorf("commitTs %s, want the reported backup's %d", m.Status.CommitTs, resolvedTS)
	}
	tags := meta.RestoreTags(string(m.UID))
	maps.Copy(tags, f.volTags)
	v, err := f.lab.Provider.CreateVolume(f.ctx, cloud.VolumeSpec{SnapshotID: f.backup.TiKV.Stores[0].Volumes[0].SnapshotID, AZ: "us-west-2b",
		Tags: tags})
	must(f.t, err)
	_, err = f.lab.Provider.WaitVolumes(f.ctx, []string{v.ID})
	must(f.t, err)
	f.newVol = v.ID
	recorded := v.ID
	if forged != "" {
		recorded = forged
	}
	doc = strings.Replace(doc, `"phase":"`+restorevolumes.PhaseAwaitingCheck+`"`, `"phase":"Completed"`, 1)
	f.writeReport(map[string]string{job.StepRestoreVolumes: doc,
		job.StepRestoreVolumes + ".result": fmt.Sprintf(`{"restoreID":%q,"volumes":[{"storeID":11,"backupVolumeID":%q,"volumeID":%q,"az":"us-west-2b"}]}`, m.UID, f.oldVol, recorded)})
}

// startTiKV plays tidb-operator: once the volumes are ready, TiKV runs and its store is up.
func (f *fixture) startTiKV() {
	eventually(f.t, "tikv-volumes-ready", func() (bool, string) {
		tc := f.tc()
		return tc.Annotations[pcv1alpha1.TiKVVolumesReadyAnnotation] == f.ns+"/fed-r1", fmt.Sprint(tc.Annotations)
	})
	f.createTiKVPod()
	must(f.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tc := f.tc()
		tc.Status.TiKV.Stores = map[string]pcv1alpha1.TiKVStore{"11": {ID: "11", PodName: "restored-tikv-0", State: "Up"}}
		return env.Client.Update(f.ctx, tc)
	}))
}

func (f *fixture) tc() *pcv1alpha1.TidbCluster {
	tc := &pcv1alpha1.TidbCluster{}
	must(f.t, env.Client.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "restored"}, tc))
	return tc
}

// createTiKVPod creates a ready TiKV pod on the restored claim (no node: the test API server
// has no kubelet to confirm a graceful deletion).
func (f *fixture) createTiKVPod() *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "restored-tikv-0", Namespace: f.ns,
		Labels: map[string]string{"app.kubernetes.io/instance": "restored", "app.kubernetes.io/component": "tikv"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tikv", Image: "tikv"}},
			Volumes: []corev1.Volume{{Name: "tikv", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "tikv-restored-tikv-0"}}}}}}
	must(f.t, env.Client.Create(f.ctx, p))
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	must(f.t, env.Client.Status().Update(f.ctx, p))
	return p
}

// TestRestoreProtocol drives a member through restore-volume, restore-data and restore-finish.
func TestRestoreProtocol(t *testing.T) {
	f := newFixture(t, "rs-ok")
	f.createMember()
	f.restoreVolumes()
	f.waitCondition(dpv1alpha1.RestoreMemberVolumeCompleteCondition)

	pvc := &corev1.PersistentVolumeClaim{}
	must(t, env.Client.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "tikv-restored-tikv-0"}, pvc))
	pv := &corev1.PersistentVolume{}
	must(t, env.Client.Get(f.ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv))
	uid := string(f.member().UID)
	if pv.Spec.CSI.VolumeHandle != f.newVol || pv.Spec.ClaimRef.Name != pvc.Name || pv.Spec.ClaimRef.Namespace != f.ns || pv.Labels[LabelRestore] != uid ||
		pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != "us-west-2b" || pvc.Labels["tidb.pingcap.com/pod-name"] != "restored-tikv-0" {
		t.Errorf("PV %s %+v / PVC %+v", pv.Name, pv.Spec, pvc.ObjectMeta)
	}
	// The restored volume carries the operator tags of its PV and claim.
	tagged, err := f.lab.Provider.DescribeVolumes(f.ctx, []string{f.newVol})
	must(t, err)
	if want := restorevolumes.OperatorTags(pv.Name, pvc.Name, f.ns); len(tagged) != 1 || !mapContains(tagged[0].Tags, want) {
		t.Errorf("restored volume tags %v, want %v among them", tagged, want)
	}
	f.waitCondition(dpv1alpha1.RestoreMemberWarmUpCompleteCondition)
	f.startTiKV()
	f.waitCondition(dpv1alpha1.RestoreMemberTikvCompleteCondition)

	// The manager picks this member for restore-data.
	f.update(func(m *dpv1alpha1.VolumeRestoreMember) {
		m.Spec.Phase, m.Spec.ResolvedTS = dpv1alpha1.RestoreMemberRestoreData, "470802380936708097"
	})
	var rd *batchv1.Job
	eventually(t, "restore-data Job", func() (bool, string) { rd = f.job(job.StepRestoreData); return rd != nil, "none" })
	if a := rd.Spec.Template.Spec.Containers[0].Args; argValue(a, "--pd") != "http://127.0.0.1:2379" || argValue(a, "--storage") != "backup/p-az1" ||
		argValue(a, "--resolved-ts") != "470802380936708097" {
		t.Errorf("restore-data args %v", a)
	}
	f.writeReport(map[string]string{job.StepRestoreData: `{"phase":"Completed"}`, job.StepRestoreData + ".result": `{"resolvedTS":470802380936708097,"regions":3,"restoreTS":1}`})
	f.waitCondition(dpv1alpha1.RestoreMemberDataCompleteCondition)
	if got := f.member().Status.RestoredTS; got != "470802380936708097" {
		t.Errorf("status.restoredTS = %q, want the step's echo 470802380936708097 (a TSO, exact)", got)
	}

	// restore-finish: recovery mode off, the recovery-mode TiKV pod restarted.
	oldPod := &corev1.Pod{}
	must(t, env.Client.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "restored-tikv-0"}, oldPod))
	f.update(func(m *dpv1alpha1.VolumeRestoreMember) { m.Spec.Phase = dpv1alpha1.RestoreMemberRestoreFinish })
	eventually(t, "recovery mode off and TiKV restarted", func() (bool, string) {
		p := &corev1.Pod{}
		err := env.Client.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "restored-tikv-0"}, p)
		return !f.tc().Spec.RecoveryMode && apierrors.IsNotFound(err), fmt.Sprintf("recoveryMode %v pod err %v", f.tc().Spec.RecoveryMode, err)
	})
	f.createTiKVPod() // tidb-operator recreates it out of recovery mode
	f.waitCondition(dpv1alpha1.RestoreMemberCompleteCondition)
	if f.member().Annotations[AnnotationRecoveryPods] != string(oldPod.UID) {
		t.Errorf("recorded recovery pods %q, want %s", f.member().Annotations[AnnotationRecoveryPods], oldPod.UID)
	}

	// Deleting a complete restore's member deletes nothing: the volumes are the cluster's now.
	must(t, env.Client.Delete(f.ctx, f.member()))
	eventually(t, "member gone", func() (bool, string) { return f.member() == nil, "still there" })
	vols, err := f.lab.Provider.ListVolumes(f.ctx, meta.RestoreTags(uid))
	must(t, err)
	if len(vols) != 1 {
		t.Errorf("restored volumes after deleting a complete member: %v", vols)
	}
	must(t, env.Client.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "tikv-restored-tikv-0"}, pvc))
}

func mapContains(m, sub map[string]string) bool {
	for k, v := range sub {
		if got, ok := m[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// TestOperatorTagsWithinTheTagLimit: a restored volume at 48 tags, 45 of them copied from its
// snapshot, cannot take the four operator tags (the AWS double answers CreateTags past 50 with
// TagLimitExceeded); the agent drops the two least useful copied tags, tags the volume, says
// which in a Warning event, and the volumes complete.
func TestOperatorTagsWithinTheTagLimit(t *testing.T) {
	f := newFixture(t, "rs-tags")
	f.volTags = map[string]string{"team": "db", "snapshot/CSIVolumeName": "pvc-src-4"}
	for i := len(f.volTags) + 1; len(f.volTags) < 47; i++ {
		f.volTags[fmt.Sprintf("snapshot/cost-%02d", i)] = "v"
	}
	f.createMember()
	f.restoreVolumes()
	f.waitCondition(dpv1alpha1.RestoreMemberVolumeCompleteCondition)
	vols, err := f.lab.Provider.DescribeVolumes(f.ctx, []string{f.newVol})
	must(t, err)
	pvc := &corev1.PersistentVolumeClaim{}
	must(t, env.Client.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "tikv-restored-tikv-0"}, pvc))
	want := restorevolumes.OperatorTags(pvc.Spec.VolumeName, pvc.Name, f.ns)
	want["team"], want[meta.TagRestore] = "db", string(f.member().UID)
	tags := vols[0].Tags
	if len(tags) != cloud.MaxTags || !mapContains(tags, want) {
		t.Errorf("volume carries %d tags %v, want %d with %v", len(tags), tags, cloud.MaxTags, want)
	}
	for _, k := range []string{"snapshot/CSIVolumeName", "snapshot/cost-47"} {
		if _, ok := tags[k]; ok {
			t.Errorf("volume still carries %s", k)
		}
	}
	eventually(t, "a TagsDropped Warning", func() (bool, string) {
		evs := &corev1.EventList{}
		must(t, env.Client.List(f.ctx, evs, client.InNamespace(f.ns)))
		var seen []string
		for _, e := range evs.Items {
			seen = append(seen, e.Reason)
			if e.Reason == ReasonTagsDropped && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "snapshot/CSIVolumeName, snapshot/cost-47") {
				return true, ""
			}
		}
		return false, fmt.Sprint(seen)
	})
}

// TestFailedRestoreCleansVolumes: the manager deletes the member of a failed restore; the agent
// deletes the claims, the PVs and the EBS volumes, then lets go.
func TestFailedRestoreCleansVolumes(t *testing.T) {
	f := newFixture(t, "rs-fail")
	f.createMember()
	f.restoreVolumes()
	f.waitCondition(dpv1alpha1.RestoreMemberVolumeCompleteCondition)
	f.startTiKV()
	f.waitCondition(dpv1alpha1.RestoreMemberTikvCompleteCondition)
	uid := string(f.member().UID)

	must(t, env.Client.Delete(f.ctx, f.member()))
	// Play the API server's protection controllers, absent from the test server: a claim or
	// volume no pod uses loses its protection finalizer.
	stop := make(chan struct{})
	defer close(stop)
	go unprotect(f.ctx, f.ns, stop)
	eventually(t, "member gone", func() (bool, string) {
		m := f.member()
		if m == nil {
			return true, ""
		}
		return false, fmt.Sprintf("%s %+v", m.Status.Phase, m.Status.Conditions)
	})
	vols, err := f.lab.Provider.ListVolumes(f.ctx, meta.RestoreTags(uid))
	must(t, err)
	for _, v := range vols {
		if v.State != "deleted" {
			t.Errorf("volume %s of the failed restore is left: %s", v.ID, v.State)
		}
	}
	pvs := &corev1.PersistentVolumeList{}
	must(t, env.Client.List(f.ctx, pvs, client.MatchingLabels{LabelRestore: uid}))
	if len(pvs.Items) != 0 {
		t.Errorf("PVs left: %d", len(pvs.Items))
	}
	if tc := f.tc(); tc.Annotations[pcv1alpha1.TiKVVolumesReadyAnnotation] != "" {
		t.Errorf("tikv-volumes-ready left on the TidbCluster: %v", tc.Annotations)
	}
	if vols, _ := f.lab.Provider.ListVolumes(f.ctx, map[string]string{}); !slices.ContainsFunc(vols, func(v cloud.Volume) bool { return v.ID == f.oldVol }) {
		t.Errorf("the backed-up volume %s must not be touched", f.oldVol)
	}
}

// unprotect plays the controllers the test API server lacks until stop: claims and volumes
// lose their protection finalizers, and Jobs deleted in the foreground (their pods are gone:
// the test server runs none) lose the garbage collector's finalizer.
func unprotect(ctx context.Context, ns string, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
		pvcs := &corev1.PersistentVolumeClaimList{}
		if env.Client.List(ctx, pvcs, client.InNamespace(ns)) == nil {
			for i := range pvcs.Items {
				if p := &pvcs.Items[i]; p.DeletionTimestamp != nil && len(p.Finalizers) > 0 {
					p.Finalizers = nil
					_ = env.Client.Update(ctx, p)
				}
			}
		}
		jobs := &batchv1.JobList{}
		if env.Client.List(ctx, jobs, client.InNamespace(ns)) == nil {
			for i := range jobs.Items {
				if j := &jobs.Items[i]; j.DeletionTimestamp != nil && len(j.Finalizers) > 0 {
					j.Finalizers = nil
					_ = env.Client.Update(ctx, j)
				}
			}
		}
		pvs := &corev1.PersistentVolumeList{}
		if env.Client.List(ctx, pvs) == nil {
			for i := range pvs.Items {
				if p := &pvs.Items[i]; p.DeletionTimestamp != nil && len(p.Finalizers) > 0 {
					p.Finalizers = nil
					_ = env.Client.Update(ctx, p)
				}
			}
		}
	}
}

// TestRestoremetaNamingAnotherVolumeIsRefused: a restore-volumes result that names a volume of
// the account the restore did not create (here another cluster's live TiKV volume) fails the
// member with VolumeNotOwned naming the volume and the rule, and no PV is ever created, so no
// TiKV of the restored cluster mounts another cluster's data.
func TestRestoremetaNamingAnotherVolumeIsRefused(t *testing.T) {
	f := newFixture(t, "rs-forged")
	f.createMember()
	other, err := f.lab.Server.CreateInstance(awsdouble.InstanceSpec{AZ: "us-west-2b", Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 10}}})
	must(t, err)
	victim := other.Volumes[0].ID
	f.restoreVolumesRecording(victim)
	f.waitCondition(dpv1alpha1.RestoreMemberFailedCondition)
	c := apimeta.FindStatusCondition(f.member().Status.Conditions, dpv1alpha1.RestoreMemberFailedCondition)
	if c.Reason != dpv1alpha1.RestoreMemberVolumeNotOwnedReason || !strings.Contains(c.Message, victim) || !strings.Contains(c.Message, "rule "+meta.RuleRestoreTag) {
		t.Errorf("Failed %s: %s", c.Reason, c.Message)
	}
	pvs := &corev1.PersistentVolumeList{}
	must(t, env.Client.List(f.ctx, pvs, client.MatchingLabels{LabelRestore: string(f.member().UID)}))
	if len(pvs.Items) != 0 {
		t.Errorf("PVs created on a volume that is not the restore's: %d", len(pvs.Items))
	}
}

// TestSameNameClaimIsRefusedBeforeAnyVolume: a claim in the target namespace with the name the
// restored data volume needs, bound to another volume, fails the member with a reason naming
// the claim as soon as restore-volumes reported the backup, and the step, which creates no
// volume before the target is checked, reads the refusal off the member and ends.
func TestSameNameClaimIsRefusedBeforeAnyVolume(t *testing.T) {
	f := newFixture(t, "rs-taken")
	taken := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "tikv-restored-tikv-0", Namespace: f.ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeName: "pvc-someone-elses",
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}}}
	must(t, env.Client.Create(f.ctx, taken))
	f.createMember()
	f.reportBackup()
	f.waitCondition(dpv1alpha1.RestoreMemberFailedCondition)
	c := apimeta.FindStatusCondition(f.member().Status.Conditions, dpv1alpha1.RestoreMemberFailedCondition)
	if c.Reason != dpv1alpha1.RestoreMemberClaimConflictReason || !strings.Contains(c.Message, f.ns+"/tikv-restored-tikv-0 (bound to volume pvc-someone-elses)") {
		t.Errorf("Failed %s: %s", c.Reason, c.Message)
	}
	// The step reads the refusal, never a go, off the member.
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(dpv1alpha1.GroupVersion.WithKind(Kind))
	must(t, env.Client.Get(f.ctx, f.key, u))
	if v, given := rvcmd.TargetChecked(u); !given || !strings.HasPrefix(v, dpv1alpha1.RestoreMemberClaimConflictReason+": ") ||
		apimeta.IsStatusConditionTrue(f.member().Status.Conditions, dpv1alpha1.RestoreMemberTargetCheckedCondition) {
		t.Errorf("the step reads %q (given %v); conditions %+v", v, given, f.member().Status.Conditions)
	}
	pvs := &corev1.PersistentVolumeList{}
	must(t, env.Client.List(f.ctx, pvs, client.MatchingLabels{LabelRestore: string(f.member().UID)}))
	if len(pvs.Items) != 0 {
		t.Errorf("PVs created for a refused target: %d", len(pvs.Items))
	}
	if got := &(corev1.PersistentVolumeClaim{}); env.Client.Get(f.ctx, client.ObjectKeyFromObject(taken), got) != nil || got.Spec.VolumeName != "pvc-someone-elses" {
		t.Errorf("the existing claim was touched: %+v", got.Spec)
	}
}

// TestAnotherTenantsPrefixIsRefusedBeforeAnyJob: a restore whose backup is under another
// control-plane namespace's prefix fails with StorageNotAllowed, naming the location, before any
// Job (restore-volumes would read that tenant's backupmeta and create volumes from its
// snapshots).
func TestAnotherTenantsPrefixIsRefusedBeforeAnyJob(t *testing.T) {
	f := newFixture(t, "rs-tenant")
	m := &dpv1alpha1.VolumeRestoreMember{
		ObjectMeta: metav1.ObjectMeta{Name: "fed-r1", Namespace: f.ns, Labels: map[string]string{dpv1alpha1.LabelOwnerNamespace: f.ns}},
		Spec: dpv1alpha1.VolumeRestoreMemberSpec{VolumeRestore: "r1", K8sClusterName: f.cluster, TCName: "restored", TCNamespace: f.ns,
			AZName: "us-west-2b", Phase: dpv1alpha1.RestoreMemberRestoreVolume,
			Backup: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "backups", Prefix: "team-b/nightly-az1"}}},
	}
	must(t, env.Client.Create(f.ctx, m))
	f.key = client.ObjectKeyFromObject(m)
	f.waitCondition(dpv1alpha1.RestoreMemberFailedCondition)
	c := apimeta.FindStatusCondition(f.member().Status.Conditions, dpv1alpha1.RestoreMemberFailedCondition)
	if c.Reason != dpv1alpha1.StorageNotAllowedReason || !strings.Contains(c.Message, `spec.backup.s3 "s3://backups/team-b/nightly-az1"`) {
		t.Errorf("Failed %s: %s", c.Reason, c.Message)
	}
	jobs := &batchv1.JobList{}
	must(t, env.Client.List(f.ctx, jobs, client.InNamespace(f.ns)))
	if len(jobs.Items) != 0 {
		t.Errorf("Jobs created for a refused restore: %d (%s)", len(jobs.Items), jobs.Items[0].Name)
	}
}

// TestSyncWarmupGatesTiKV: a sync warm-up's Jobs run once the claims exist, and only when they
// finished does the TidbCluster get the restored volumes.
func TestSyncWarmupGatesTiKV(t *testing.T) {
	f := newFixture(t, "rs-warm")
	f.createMember()
	f.update(func(m *dpv1alpha1.VolumeRestoreMember) { m.Spec.Template.Warmup = fedv1alpha1.RestoreWarmupSync })
	f.restoreVolumes()
	f.waitCondition(dpv1alpha1.RestoreMemberWarmUpStartedCondition)
	j := &batchv1.Job{}
	must(t, env.Client.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: WarmupJobName("fed-r1", 0)}, j))
	if args := j.Spec.Template.Spec.Containers[0].Args; strings.Join(args, " ") != "warmup --member fed-r1 --report-as warmup-0 --fs var/lib/fedbr-warmup/tikv-restored-tikv-0 --wal var/lib/fedbr-warmup/tikv-restored-tikv-0 --checkpoint-dir var/run/fedbr-warmup" {
		t.Errorf("warm-up args %v", args)
	}
	// The claim, the checkpoints' emptyDir, and the step's exit marker volume (job.ExitVolume).
	if v := j.Spec.Template.Spec.Volumes; len(v) != 3 || v[0].PersistentVolumeClaim == nil || v[0].PersistentVolumeClaim.ClaimName != "tikv-restored-tikv-0" ||
		v[1].Name != WarmupCheckpointVolume || v[2].Name != job.ExitVolume {
		t.Errorf("warm-up volumes %+v", v)
	}
	// The Job's progress reports reconcile the member while it runs: TiKV keeps waiting.
	for _, done := range []int{1, 2, 3} {
		f.writeReport(map[string]string{job.WarmupKey(0): fmt.Sprintf(`{"phase":"Reading","done":%d,"total":%d}`, done<<20, 4<<20)})
		want := fmt.Sprintf("read %dMi of 4Mi", done)
		eventually(t, "progress "+want, func() (bool, string) {
			c := apimeta.FindStatusCondition(f.member().Status.Conditions, dpv1alpha1.RestoreMemberWarmUpStartedCondition)
			return c != nil && strings.Contains(c.Message, want), fmt.Sprintf("%+v", c)
		})
	}
	if a := f.tc().Annotations[pcv1alpha1.TiKVVolumesReadyAnnotation]; a != "" {
		t.Fatalf("TiKV handed the volumes (%q) while the warm-up runs", a)
	}
	// The Job completes, as the Job controller would record it.
	now := metav1.Now()
	j.Status.StartTime, j.Status.CompletionTime, j.Status.Succeeded = &now, &now, 1
	j.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	must(t, env.Client.Status().Update(f.ctx, j))
	f.waitCondition(dpv1alpha1.RestoreMemberWarmUpCompleteCondition)
	if c := apimeta.FindStatusCondition(f.member().Status.Conditions, dpv1alpha1.RestoreMemberWarmUpCompleteCondition); c.Reason != dpv1alpha1.RestoreMemberWarmedUpReason {
		t.Errorf("WarmUpComplete %+v", c)
	}
	f.startTiKV()
	f.waitCondition(dpv1alpha1.RestoreMemberTikvCompleteCondition)
}

// TestScratchRestoreMakesAndRemovesItsTidbCluster: a scratch restore's agent runs the
// tidbcluster step, creates the TidbCluster that step reported once its Job succeeded (recovery
// mode, the restore's label, owned by the member), restores into it, and its deletion (the
// restore complete) removes that TidbCluster, the TiKV pod on the restored claim, the claim
// tidb-operator made for PD (its retained PV set to reclaim Delete first, for the provisioner),
// the restored claims and PVs, and the restored EBS volume.
func TestScratchRestoreMakesAndRemovesItsTidbCluster(t *testing.T) {
	f := newFixture(t, "rs-scratch")
	must(t, env.Client.Delete(f.ctx, f.tc()))
	f.createMemberWith(func(m *dpv1alpha1.VolumeRestoreMember) { m.Spec.Template.Scratch = true })
	var j *batchv1.Job
	eventually(t, "tidbcluster Job", func() (bool, string) { j = f.job(job.StepTidbCluster); return j != nil, "none" })
	if args := j.Spec.Template.Spec.Containers[0].Args; argValue(args, "--storage") != "backup/p-az1" || argValue(args, "--member") != "fed-r1" {
		t.Errorf("tidbcluster args %v", args)
	}
	f.writeReport(map[string]string{job.StepTidbCluster: `{"phase":"Completed"}`, job.StepTidbCluster + ".result": `{"tidbCluster":{"apiVersion":"pingcap.com/v1alpha1","kind":"TidbCluster",` +
		`"metadata":{"name":"restored","namespace":"prod","resourceVersion":"7"},"spec":{"pd":{"replicas":1},"tikv":{"replicas":1}},"status":{"tikv":{}}}}`})
	// A reported TidbCluster counts only with its Job's success.
	must(t, env.Client.Get(f.ctx, client.ObjectKeyFromObject(j), j))
	now := metav1.Now()
	j.Status.StartTime, j.Status.CompletionTime, j.Status.Succeeded = &now, &now, 1
	j.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	must(t, env.Client.Status().Update(f.ctx, j))
	var tc *pcv1alpha1.TidbCluster
	eventually(t, "the scratch TidbCluster", func() (bool, string) {
		tc = &pcv1alpha1.TidbCluster{}
		err := env.Client.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "restored"}, tc)
		return err == nil, fmt.Sprint(err)
	})
	uid := string(f.member().UID)
	if !tc.Spec.RecoveryMode || tc.Labels[LabelRestore] != uid || len(tc.OwnerReferences) != 1 || string(tc.OwnerReferences[0].UID) != uid {
		t.Fatalf("scratch TidbCluster %+v %+v", tc.ObjectMeta, tc.Spec)
	}
	// tidb-operator: PD runs, on a claim of its own whose PV the class retains.
	tc.Status.PD.Members = map[string]pcv1alpha1.PDMember{"restored-pd-0": {Name: "restored-pd-0", ClientURL: "http://127.0.0.1:2379"}}
	must(t, env.Client.Update(f.ctx, tc))
	pdPV := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-scratch-pd"}, Spec: corev1.PersistentVolumeSpec{
		Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
		PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-pd"}}}}
	must(t, env.Client.Create(f.ctx, pdPV))
	must(t, env.Client.Create(f.ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "pd-restored-pd-0", Namespace: f.ns,
		Labels: map[string]string{"app.kubernetes.io/instance": "restored", "app.kubernetes.io/managed-by": "tidb-operator", "app.kubernetes.io/component": "pd"}},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pdPV.Name, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}))
	f.waitCondition(dpv1alpha1.RestoreMemberTidbClusterCreatedCondition)
	f.restoreVolumes()
	f.waitCondition(dpv1alpha1.RestoreMemberVolumeCompleteCondition)
	f.startTiKV()
	f.waitCondition(dpv1alpha1.RestoreMemberTikvCompleteCondition)

	must(t, env.Client.Delete(f.ctx, f.member()))
	stop := make(chan struct{})
	defer close(stop)
	go unprotect(f.ctx, f.ns, stop)
	// Play the garbage collector and the kubelet: the deleted TidbCluster's TiKV pod goes.
	eventually(t, "TidbCluster deleted", func() (bool, string) {
		err := env.Client.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "restored"}, &pcv1alpha1.TidbCluster{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	_ = env.Client.Delete(f.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "restored-tikv-0", Namespace: f.ns}}, client.GracePeriodSeconds(0))
	eventually(t, "member gone", func() (bool, string) {
		m := f.member()
		if m == nil {
			return true, ""
		}
		return false, fmt.Sprintf("%s %+v", m.Status.Phase, m.Status.Conditions)
	})
	if err := env.Client.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "pd-restored-pd-0"}, &corev1.PersistentVolumeClaim{}); !apierrors.IsNotFound(err) {
		t.Errorf("PD's claim: %v, want it deleted", err)
	}
	must(t, env.Client.Get(f.ctx, client.ObjectKeyFromObject(pdPV), pdPV))
	if pdPV.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("PD's PV reclaims %s, want Delete (its provisioner deletes the volume)", pdPV.Spec.PersistentVolumeReclaimPolicy)
	}
	vols, err := f.lab.Provider.ListVolumes(f.ctx, meta.RestoreTags(uid))
	must(t, err)
	for _, v := range vols {
		if v.State != "deleted" {
			t.Errorf("restored volume %s left: %s", v.ID, v.State)
		}
	}
}
