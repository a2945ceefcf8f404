package restoremember

import (
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	"github.com/fedbr/fedbr/internal/meta"
)

// A scratch restore (template.scratch) makes its own TidbCluster from the one the backup saved
// and removes it, with every claim and volume, when it is deleted: a restore drill. The agent
// reads no storage: the tidbcluster step reads the backupmeta with the restore's identity and
// reports the saved TidbCluster, which the agent judges (tidbcluster.ForRestore, bounded) and
// creates once that step's Job succeeded. The TidbCluster carries the restore id (LabelRestore)
// and an owner reference to the member: the agent changes and deletes no TidbCluster it did not
// make.

// OwnsTC says tc is the one scratch restore member m created.
func OwnsTC(tc *pcv1alpha1.TidbCluster, m *dpv1alpha1.VolumeRestoreMember) bool {
	return tc != nil && tc.Labels[LabelRestore] == string(m.UID) && m.UID != ""
}

// scratch says the member is a scratch restore's.
func (p *plan) scratch() bool { return p.m.Spec.Template.Scratch }

// madeTC says this scratch restore made its TidbCluster: it saw it (TidbClusterCreated), or it is
// there with the restore id.
func (p *plan) madeTC() bool {
	return p.isTrue(dpv1alpha1.RestoreMemberTidbClusterCreatedCondition) || OwnsTC(p.o.TC, p.m)
}

// planScratchTC makes a scratch restore's TidbCluster; it says whether the restore can go on (the
// TidbCluster is there and is this restore's, or it was and is gone, which the plan then fails as
// not found).
func (p *plan) planScratchTC() bool {
	tc := p.o.TC
	if tc != nil {
		if !OwnsTC(tc, p.m) {
			p.fail(dpv1alpha1.RestoreMemberTidbClusterExistsReason, fmt.Sprintf(
				"TidbCluster %s/%s exists and is not one this scratch restore made: a scratch restore creates its own TidbCluster and changes none it did not make; "+
					"delete it, or restore into another namespace", tc.Namespace, tc.Name))
			return false
		}
		if !p.isTrue(dpv1alpha1.RestoreMemberTidbClusterCreatedCondition) {
			p.set(dpv1alpha1.RestoreMemberTidbClusterCreatedCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberFromBackupReason,
				fmt.Sprintf("created TidbCluster %s/%s in recovery mode from the TidbCluster the backup saved", tc.Namespace, tc.Name))
		}
		return true
	}
	if p.isTrue(dpv1alpha1.RestoreMemberTidbClusterCreatedCondition) {
		return true // made and gone since: not found
	}
	j := p.o.TidbCluster
	done, reason, msg := p.stepOutcome(job.StepTidbCluster, j, dpv1alpha1.RestoreMemberSavedTidbClusterFailedReason)
	switch {
	case msg != "":
		p.fail(reason, msg)
		return false
	case done && j.Phase == job.Succeeded:
		// Only the Job's own success counts: the entry is written with the steps' service
		// account, which others in the namespace may act as.
		u, err := p.savedTC()
		if err != nil {
			p.fail(dpv1alpha1.RestoreMemberSavedTidbClusterFailedReason, err.Error())
			return false
		}
		p.add(Action{Kind: CreateTC, Object: u})
		return false
	case j.Exists():
		return false // its Job's end and its report wake us
	}
	// Not started, or an entry whose Job is gone (its TTL, deleted, or a forged entry): read it
	// again.
	storage, err := job.StorageFor(p.m.Spec.Backup)
	if err != nil {
		p.fail(dpv1alpha1.InvalidStorageReason, "spec.backup: "+err.Error())
		return false
	}
	p.createJob(p.jobSpec(job.StepTidbCluster, []string{"br", job.StepTidbCluster, "--storage", storage.Flag, "--member", p.m.Name}, storage, 0))
	return false
}

// savedTC is the TidbCluster the tidbcluster step reported, as this restore creates it: judged
// by ForRestore (a pingcap.com TidbCluster with TiKV, not joined by an address), in recovery mode
// in the member's namespace, named tcName, labelled with the restore id and owned by the member.
func (p *plan) savedTC() (*unstructured.Unstructured, error) {
	raw, ok := p.o.Report.Results[job.StepTidbCluster]
	if !ok {
		return nil, errors.New("the tidbcluster step reported no result")
	}
	if len(raw) > tidbcluster.MaxSaved+64 {
		return nil, fmt.Errorf("the tidbcluster step's result is %d bytes, over the %d a scratch restore takes", len(raw), tidbcluster.MaxSaved)
	}
	var res struct {
		TidbCluster json.RawMessage `json:"tidbCluster"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("the tidbcluster step's result: %w", err)
	}
	var saved struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(res.TidbCluster, &saved); err != nil {
		return nil, fmt.Errorf("the TidbCluster the tidbcluster step reported: %w", err)
	}
	// Renamed only when the restore names it otherwise: a rename also renames the TidbCluster
	// spec.cluster joins, which is right only when every plane's gets the one name.
	name := ""
	if saved.Metadata.Name != p.m.Spec.TCName {
		name = p.m.Spec.TCName
	}
	u, err := tidbcluster.ForRestore(meta.Manifest{Key: "the TidbCluster the tidbcluster step reported", YAML: res.TidbCluster}, p.m.Spec.TCNamespace, name)
	if err != nil {
		return nil, err
	}
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelRestore] = string(p.m.UID)
	u.SetLabels(labels)
	ref := ownerRef(p.m)
	ref.Controller = nil
	u.SetOwnerReferences([]metav1.OwnerReference{ref})
	return u, nil
}

// planScratchDeletion removes everything a scratch restore made, complete or not: its steps, its
// TidbCluster, the pods on the restored claims, every claim of that TidbCluster (the restored ones
// and those tidb-operator made, whose volumes their provisioner deletes: their PVs are set to
// reclaim Delete first), the restored PVs, and every EBS volume tagged with the restore id. A
// TidbCluster this restore did not make, and its claims, are never touched.
func (p *plan) planScratchDeletion() {
	if !p.stopSteps() {
		return
	}
	if tc := p.o.TC; OwnsTC(tc, p.m) {
		if tc.DeletionTimestamp == nil {
			p.add(Action{Kind: DeleteTC, Name: tc.Name, UID: tc.UID})
		}
		p.cleaning(fmt.Sprintf("deleting TidbCluster %s/%s, which this scratch restore made", tc.Namespace, tc.Name))
		return
	}
	if !p.releaseTiKV() || !p.deleteOperatorClaims() || !p.deleteClaims() {
		return
	}
	p.deleteCloudVolumes()
}

// deleteOperatorClaims deletes the claims tidb-operator made for the scratch TidbCluster, each
// once its PV reclaims Delete, so that the storage class's provisioner deletes the volume with
// the released PV (a class that retains would leave it in the account).
func (p *plan) deleteOperatorClaims() bool {
	if !p.madeTC() || len(p.o.OperatorClaims) == 0 {
		return true
	}
	names := sortedKeys(p.o.OperatorClaims)
	for _, name := range names {
		if pv := p.o.OperatorPVs[p.o.OperatorClaims[name].Spec.VolumeName]; pv != nil && pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
			p.add(Action{Kind: ReclaimPV, Name: pv.Name})
		}
	}
	for _, name := range names {
		if p.o.OperatorClaims[name].DeletionTimestamp == nil {
			p.add(Action{Kind: DeletePVC, Name: name})
		}
	}
	p.cleaning(fmt.Sprintf("deleting %d claims tidb-operator made for TidbCluster %s/%s (their volumes go with their PVs, reclaim policy Delete)",
		len(p.o.OperatorClaims), p.m.Spec.TCNamespace, p.m.Spec.TCName))
	// The agent's cache holds only its own claims: these are read from the API server, and
	// looked at again.
	p.res.RequeueAfter = cloudRecheck
	return false
}
