package security

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	brreport "github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/awsdouble/awsdoubletest"
	"github.com/fedbr/fedbr/internal/testenv"
)

// seedTiKV creates the TidbCluster name in ns with one TiKV pod on an EBS volume, as
// tidb-operator and the CSI driver leave them.
func seedTiKV(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	tc := &pcv1alpha1.TidbCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: pcv1alpha1.TidbClusterSpec{PD: &pcv1alpha1.ComponentSpec{Replicas: 1}, TiKV: &pcv1alpha1.ComponentSpec{Replicas: 1}}}
	must(env.Client.Create(ctx, tc))
	tc.Status.PD.Members = map[string]pcv1alpha1.PDMember{name + "-pd-0": {Name: name + "-pd-0", ClientURL: "http://127.0.0.1:2379"}}
	tc.Status.TiKV.Stores = map[string]pcv1alpha1.TiKVStore{"1": {ID: "1", PodName: name + "-tikv-0", State: "Up"}}
	must(env.Client.Update(ctx, tc)) // no status subresource, as tidb-operator's CRD
	must(env.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + ns}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-west-2a/i-0f0f0f0f0f0f0f0f0"}}))
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + ns}, Spec: corev1.PersistentVolumeSpec{
		Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
		AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: tidbcluster.EBSCSIDriver, VolumeHandle: "vol-0f0f0f0f0f0f0f0f0"}}}}
	must(env.Client.Create(ctx, pv))
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "tikv-" + name + "-tikv-0", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv.Name, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}}}
	must(env.Client.Create(ctx, pvc))
	pvc.Status.Phase = corev1.ClaimBound
	must(env.Client.Status().Update(ctx, pvc))
	must(env.Client.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-tikv-0", Namespace: ns, Labels: tidbcluster.TiKVSelector(name)},
		Spec: corev1.PodSpec{NodeName: "node-" + ns, Containers: []corev1.Container{{Name: "tikv", Image: "tikv",
			VolumeMounts: []corev1.VolumeMount{{Name: "tikv", MountPath: "/var/lib/tikv"}}}},
			Volumes: []corev1.Volume{{Name: "tikv", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}}}}))
}

// TestForgedStepResults: whoever can act as the steps' service account (a namespace editor may
// impersonate it) cannot make a backup Complete. The members' status guard refuses the Complete
// condition, phase and commit ts it writes; a snapshot step's Completed report it forges, naming
// a snapshot AWS (the double) does not hold, fails the member SnapshotsNotConfirmed, and the
// backup fails with it; nothing is deleted.
func TestForgedStepResults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := env.Kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-f",
		filepath.Join(env.RepoRoot, "charts", "fedbr-agent", "templates", "member-status-guard.yaml")); err != nil {
		t.Fatal(err)
	}
	const ns, name = "team-f", "forged"
	if err := client.IgnoreAlreadyExists(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})); err != nil {
		t.Fatal(err)
	}
	seedTiKV(t, ns, name)
	lab := awsdoubletest.Serve(t, awsdouble.Options{}, "")
	startFederation(t, lab.Provider)

	b := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: fedv1alpha1.VolumeBackupSpec{Clusters: []fedv1alpha1.VolumeBackupMemberCluster{{K8sClusterName: plane, TCName: name, TCNamespace: ns}},
			Template: fedv1alpha1.VolumeBackupMemberSpec{StorageProvider: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "backups", Prefix: ns + "/p"}}}}}
	if err := env.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: ns, Name: fedv1alpha1.MemberName(name)}
	m := &dpv1alpha1.VolumeBackupMember{}
	testenv.Eventually(t, "the member and the steps' role binding", time.Minute, func() (bool, string) {
		if err := env.Client.Get(ctx, key, m); err != nil {
			return false, err.Error()
		}
		rb := &rbacv1.RoleBinding{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: job.ServiceAccountName}, rb); err != nil {
			return false, "role binding: " + err.Error()
		}
		return true, ""
	})

	// The step's identity, as a namespace editor gets it by impersonation.
	stepCfg := rest.CopyConfig(env.Config)
	stepCfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + job.ServiceAccountName}
	step, err := client.New(stepCfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// The policy is loaded asynchronously: wait, by dry runs (admission runs, nothing is
	// stored), until the guard refuses the step identity, so no forgery below lands before it.
	testenv.Eventually(t, "the members' status guard refuses the step identity", time.Minute, func() (bool, string) {
		err := step.Status().Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"Complete"}}`)), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "only the agent"), fmt.Sprint(err)
	})
	for field, value := range map[string]any{
		"conditions": []any{map[string]any{"type": dpv1alpha1.BackupMemberCompleteCondition, "status": "True", "reason": "SnapshotsCompleted",
			"message": "forged", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}},
		"phase": "Complete", "commitTs": "1",
	} {
		body, _ := json.Marshal(map[string]any{"status": map[string]any{field: value}})
		err := step.Status().Patch(ctx, m, client.RawPatch(types.MergePatchType, body))
		if err == nil || !strings.Contains(err.Error(), "only the agent (RBAC verb confirm on volumebackupmembers/status)") {
			t.Errorf("the step identity writes status.%s: %v; want refused by the members' status guard", field, err)
		}
	}

	// The reports are the steps' to write: the forger walks the protocol with them. The pause's
	// Ready report is believed (docs/security.md: what a forger can still do); the snapshot
	// step's Completed report is checked in AWS.
	report := func(s string, data map[string]string) {
		t.Helper()
		sink, err := brreport.NewMemberStep(stepCfg, dpv1alpha1.GroupVersion.WithKind("VolumeBackupMember"), "volumebackupmembers", ns, key.Name, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := sink.Apply(ctx, data); err != nil {
			t.Fatalf("the step identity reports %s: %v", s, err)
		}
	}
	ts := uint64(time.Now().UnixMilli()) << 18
	report(job.StepSnapshot, map[string]string{job.StepSnapshot: `{"phase":"Armed"}`})
	report(job.StepPause, map[string]string{job.StepPause: fmt.Sprintf(`{"phase":"Ready","backupTS":%d,"stores":1}`, ts)})
	testenv.Eventually(t, "the member asked to execute at the forged pause's ts", time.Minute, func() (bool, string) {
		if err := env.Client.Get(ctx, key, m); err != nil {
			return false, err.Error()
		}
		return m.Spec.BackupTS == strconv.FormatUint(ts, 10), "spec.backupTS " + m.Spec.BackupTS
	})
	now := time.Now().UTC().Format(time.RFC3339Nano)
	report(job.StepSnapshot, map[string]string{
		job.StepSnapshot: fmt.Sprintf(`{"phase":"Completed","done":1,"total":1,"backupTS":%d,"startedAt":%q,"completedAt":%q}`, ts, now, now),
		job.StepSnapshot + ".result": fmt.Sprintf(`{"backupID":%q,"resolvedTS":%d,"sizeGiB":10,"snapshots":[{"storeID":1,"volumeID":"vol-0f0f0f0f0f0f0f0f0","snapshotID":"snap-0f0f0f0f0f0f0f0f0","sizeGiB":10}]}`,
			m.UID, ts),
	})
	var failed *metav1.Condition
	testenv.Eventually(t, "the member failed", time.Minute, func() (bool, string) {
		if err := env.Client.Get(ctx, key, m); err != nil {
			return false, err.Error()
		}
		failed = apimeta.FindStatusCondition(m.Status.Conditions, dpv1alpha1.BackupMemberFailedCondition)
		return failed != nil && failed.Status == metav1.ConditionTrue, fmt.Sprintf("Failed %+v", failed)
	})
	if failed.Reason != dpv1alpha1.BackupMemberSnapshotsNotConfirmedReason || !strings.Contains(failed.Message, `snapshot "snap-0f0f0f0f0f0f0f0f0": not found in AWS`) {
		t.Fatalf("Failed %s: %s; want %s naming the snapshot", failed.Reason, failed.Message, dpv1alpha1.BackupMemberSnapshotsNotConfirmedReason)
	}
	if apimeta.IsStatusConditionTrue(m.Status.Conditions, dpv1alpha1.BackupMemberCompleteCondition) {
		t.Error("the member is Complete on a forged report")
	}
	testenv.Eventually(t, "the backup failed", time.Minute, func() (bool, string) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, err.Error()
		}
		c := apimeta.FindStatusCondition(b.Status.Conditions, fedv1alpha1.VolumeBackupFailedCondition)
		return c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, dpv1alpha1.BackupMemberSnapshotsNotConfirmedReason),
			fmt.Sprintf("phase %s Failed %+v", b.Status.Phase, c)
	})
	if b.Status.Phase != fedv1alpha1.VolumeBackupFailed || b.Status.CommitTs != "" {
		t.Errorf("backup phase %s commit ts %q, want Failed without one", b.Status.Phase, b.Status.CommitTs)
	}
	// Nothing deleted: the member (torn down, not deleted), its TiKV's claim and volume.
	for _, o := range []client.Object{&dpv1alpha1.VolumeBackupMember{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tikv-" + name + "-tikv-0"}},
		&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + ns}}} {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil || o.GetDeletionTimestamp() != nil {
			t.Errorf("%T %s: %v (deleting %v), want kept", o, o.GetName(), err, o.GetDeletionTimestamp())
		}
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), b); apierrors.IsNotFound(err) {
		t.Error("the backup is gone")
	}
}
