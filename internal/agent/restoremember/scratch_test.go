package restoremember

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
)

var tcStepName = job.Name("fed-r1", job.StepTidbCluster)

// scratchMember is a scratch restore's member (template.scratch) restoring into dst/restored.
func scratchMember(mut ...func(*dpv1alpha1.VolumeRestoreMember)) *dpv1alpha1.VolumeRestoreMember {
	return rmember(dpv1alpha1.RestoreMemberRestoreVolume, append([]func(*dpv1alpha1.VolumeRestoreMember){func(m *dpv1alpha1.VolumeRestoreMember) {
		m.Spec.Template.Scratch = true
	}}, mut...)...)
}

// savedTCDoc is what the tidbcluster step reports of a backup of prod/restored joined to the
// PD of TidbCluster "restored" in namespace prod of another plane.
const savedTCDoc = `{"tidbCluster":{"apiVersion":"pingcap.com/v1alpha1","kind":"TidbCluster",` +
	`"metadata":{"name":"restored","namespace":"prod","uid":"src-uid","labels":{"team":"db"}},` +
	`"spec":{"cluster":{"name":"restored","namespace":"prod","clusterDomain":"az1.local"},"tikv":{"replicas":2}},"status":{"tikv":{}}}}`

// tcStep plays the tidbcluster step: its Job in phase (nil: gone) and, with result, its entry
// Completed with that result.
func tcStep(phase *job.Phase, result string) func(*Observed) {
	return func(o *Observed) {
		if phase != nil {
			o.TidbCluster = job.State{Name: tcStepName, Phase: *phase}
		}
		data := map[string]string{job.StepTidbCluster: `{"phase":"Completed"}`}
		if result != "" {
			data[job.StepTidbCluster+".result"] = result
		}
		o.Report = rreport(data)
	}
}

func ours(tc *pcv1alpha1.TidbCluster) *pcv1alpha1.TidbCluster {
	tc.Labels = map[string]string{LabelRestore: "ruid-1"}
	return tc
}

func TestPlanScratch(t *testing.T) {
	succeeded, active, failed := ptr.To(job.Succeeded), ptr.To(job.Active), ptr.To(job.Failed)
	created := rcond(dpv1alpha1.RestoreMemberTidbClusterCreatedCondition, dpv1alpha1.RestoreMemberFromBackupReason)
	for _, tt := range []struct {
		name string
		o    Observed
		want rwant
	}{
		{
			name: "no TidbCluster yet: the tidbcluster step reads the saved one",
			o:    robs(scratchMember(), nil),
			want: rwant{actions: []ActionKind{EnsureServiceAccount, CreateJob}, phase: PhasePending, check: func(t *testing.T, r Result) {
				args := r.Actions[1].Job.Spec.Template.Spec.Containers[0].Args
				if !slices.Contains(args, job.StepTidbCluster) || argValue(args, "--storage") != "s3://bk/p-az1" || argValue(args, "--member") != "fed-r1" {
					t.Errorf("args %v", args)
				}
			}},
		},
		{name: "its Job runs: wait", o: robs(scratchMember(), nil, tcStep(active, "")), want: rwant{}},
		{
			name: "a reported TidbCluster while its Job runs is no verdict (the entry may be forged)",
			o:    robs(scratchMember(), nil, tcStep(active, savedTCDoc)),
			want: rwant{},
		},
		{
			name: "a reported TidbCluster without its Job: read again",
			o:    robs(scratchMember(), nil, tcStep(nil, savedTCDoc)),
			want: rwant{actions: []ActionKind{EnsureServiceAccount, CreateJob}},
		},
		{
			name: "an entry still reading whose Job is gone (deleted, or a forged entry): the Job is run again",
			o:    robs(scratchMember(), nil, func(o *Observed) { o.Report = rreport(map[string]string{job.StepTidbCluster: `{"phase":"Reading"}`}) }),
			want: rwant{actions: []ActionKind{EnsureServiceAccount, CreateJob}},
		},
		{
			name: "its Job succeeded: the TidbCluster is created, recovering, here, the restore's and owned by the member",
			o:    robs(scratchMember(), nil, tcStep(succeeded, savedTCDoc)),
			want: rwant{actions: []ActionKind{CreateTC}, check: func(t *testing.T, r Result) {
				u := r.Actions[0].Object
				if u.GetNamespace() != "dst" || u.GetName() != "restored" || u.GetLabels()[LabelRestore] != "ruid-1" || u.GetLabels()["team"] != "db" || u.GetUID() != "" {
					t.Errorf("metadata %+v", u.Object["metadata"])
				}
				if refs := u.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != "ruid-1" || refs[0].Kind != Kind {
					t.Errorf("owner references %+v", refs)
				}
				spec := u.Object["spec"].(map[string]any)
				if spec["recoveryMode"] != true || spec["cluster"].(map[string]any)["namespace"] != "dst" || u.Object["status"] != nil {
					t.Errorf("spec %+v, status %+v", spec, u.Object["status"])
				}
			}},
		},
		{
			name: "the step failed",
			o: robs(scratchMember(), nil, tcStep(failed, ""), func(o *Observed) {
				o.Report = rreport(map[string]string{job.StepTidbCluster: `{"phase":"Failed","error":"the backup saved no TidbCluster"}`})
			}),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberSavedTidbClusterFailedReason}, msg: "the backup saved no TidbCluster"},
		},
		{
			name: "a reported TidbCluster a restore cannot be made from (joined by the source's PD address)",
			o: robs(scratchMember(), nil, tcStep(succeeded,
				`{"tidbCluster":{"apiVersion":"pingcap.com/v1alpha1","kind":"TidbCluster","metadata":{"name":"restored"},"spec":{"pdAddresses":["http://src-pd:2379"],"tikv":{}}}}`)),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberSavedTidbClusterFailedReason}, msg: "spec.pdAddresses"},
		},
		{
			name: "a reported TidbCluster over the bound",
			o:    robs(scratchMember(), nil, tcStep(succeeded, `{"tidbCluster":{"metadata":{"annotations":{"x":"`+strings.Repeat("a", 300<<10)+`"}}}}`)),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberSavedTidbClusterFailedReason}, msg: "over the 262144"},
		},
		{
			name: "a TidbCluster of that name that this restore did not make is never taken",
			o:    robs(scratchMember(), targetTC(2, true)),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberTidbClusterExistsReason}, phase: PhaseFailed},
		},
		{
			name: "its own TidbCluster seen: TidbClusterCreated, and the restore goes on",
			o:    robs(scratchMember(), ours(targetTC(2, true))),
			want: rwant{actions: []ActionKind{EnsureServiceAccount, CreateJob}, true: []string{dpv1alpha1.RestoreMemberTidbClusterCreatedCondition}, check: func(t *testing.T, r Result) {
				if r.Actions[1].Job.Name != rvName {
					t.Errorf("job %s, want %s", r.Actions[1].Job.Name, rvName)
				}
			}},
		},
		{
			name: "made and gone since: not found",
			o:    robs(scratchMember(created), nil),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.TidbClusterNotFoundReason}},
		},
	} {
		t.Run(tt.name, func(t *testing.T) { rcheck(t, planned(t, tt.o), tt.want) })
	}
}

func TestPlanScratchDeletion(t *testing.T) {
	del := func(m *dpv1alpha1.VolumeRestoreMember) { m.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }
	complete := rcond(dpv1alpha1.RestoreMemberCompleteCondition, dpv1alpha1.RestoreMemberRecoveryModeOffReason)
	created := rcond(dpv1alpha1.RestoreMemberTidbClusterCreatedCondition, dpv1alpha1.RestoreMemberFromBackupReason)
	exists := rcond(dpv1alpha1.RestoreMemberFailedCondition, dpv1alpha1.RestoreMemberTidbClusterExistsReason)
	operatorClaim := func(reclaim corev1.PersistentVolumeReclaimPolicy) func(*Observed) {
		return func(o *Observed) {
			o.OperatorClaims = map[string]*corev1.PersistentVolumeClaim{"pd-restored-pd-0": {ObjectMeta: metav1.ObjectMeta{Name: "pd-restored-pd-0"},
				Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pvc-1"}}}
			o.OperatorPVs = map[string]*corev1.PersistentVolume{"pvc-1": {ObjectMeta: metav1.ObjectMeta{Name: "pvc-1"},
				Spec: corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: reclaim}}}
		}
	}
	for _, tt := range []struct {
		name string
		o    Observed
		want rwant
	}{
		{
			name: "a complete scratch restore deletes its TidbCluster first",
			o:    robs(scratchMember(del, complete, created), ours(targetTC(2, false))),
			want: rwant{actions: []ActionKind{DeleteTC}, phase: PhaseCleaning, reason: map[string]string{dpv1alpha1.RestoreMemberVolumesCleanedCondition: dpv1alpha1.RestoreMemberCleaningReason}},
		},
		{
			name: "a TidbCluster being deleted: wait",
			o: robs(scratchMember(del, complete, created), func() *pcv1alpha1.TidbCluster {
				tc := ours(targetTC(2, false))
				tc.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
				return tc
			}()),
			want: rwant{},
		},
		{
			name: "then tidb-operator's claims, their retained PVs set to reclaim Delete first",
			o:    robs(scratchMember(del, complete, created), nil, operatorClaim(corev1.PersistentVolumeReclaimRetain)),
			want: rwant{actions: []ActionKind{ReclaimPV, DeletePVC}, requeue: true},
		},
		{
			name: "a claim whose PV reclaims Delete already",
			o:    robs(scratchMember(del, complete, created), nil, operatorClaim(corev1.PersistentVolumeReclaimDelete)),
			want: rwant{actions: []ActionKind{DeletePVC}, requeue: true},
		},
		{
			name: "then the restore's volumes, as for any restore",
			o:    robs(scratchMember(del, complete, created), nil, func(o *Observed) { o.CloudListed, o.CloudVolumes = true, []string{"vol-a"} }),
			want: rwant{actions: []ActionKind{DeleteVolumes}, requeue: true},
		},
		{
			name: "nothing left: cleaned",
			o:    robs(scratchMember(del, complete, created), nil, func(o *Observed) { o.CloudListed = true }),
			want: rwant{release: true, true: []string{dpv1alpha1.RestoreMemberVolumesCleanedCondition}},
		},
		{
			name: "a TidbCluster it did not make, and its claims, are left alone",
			o:    robs(scratchMember(del, exists), targetTC(2, true), operatorClaim(corev1.PersistentVolumeReclaimRetain), func(o *Observed) { o.CloudListed = true }),
			want: rwant{release: true},
		},
	} {
		t.Run(tt.name, func(t *testing.T) { rcheck(t, planned(t, tt.o), tt.want) })
	}
}

// TestSavedTCResultShape: the agent reads the result the step writes (brtidbcluster.Result).
func TestSavedTCResultShape(t *testing.T) {
	var res struct {
		TidbCluster json.RawMessage `json:"tidbCluster"`
	}
	if err := json.Unmarshal([]byte(savedTCDoc), &res); err != nil || len(res.TidbCluster) == 0 {
		t.Fatalf("%v %s", err, res.TidbCluster)
	}
}
