package restoremember

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/meta"
)

// planDeletion lets go of an unfinished restore: it stops the steps, unbinds TiKV from the
// restored volumes, deletes the PVCs and PVs it created and every volume tagged with the
// restore id, in that order, each waiting for the one before. A complete restore's volumes
// belong to the TidbCluster: nothing is deleted. A scratch restore removes everything it made,
// complete or not (planScratchDeletion).
func (p *plan) planDeletion() {
	if p.m.Annotations[ForceRemoveAnnotation] == "true" {
		p.set(dpv1alpha1.RestoreMemberVolumesCleanedCondition, metav1.ConditionFalse, dpv1alpha1.RestoreMemberForceRemovedReason,
			fmt.Sprintf("annotation %s=true: the finalizer is removed without cleaning; volumes tagged %s=%s may remain",
				ForceRemoveAnnotation, meta.TagRestore, p.m.UID))
		p.res.RemoveFinalizer = true
		return
	}
	if p.isTrue(dpv1alpha1.RestoreMemberVolumesCleanedCondition) {
		p.res.RemoveFinalizer = true
		return
	}
	if p.scratch() {
		p.planScratchDeletion()
		return
	}
	if p.isTrue(dpv1alpha1.RestoreMemberCompleteCondition) {
		p.res.RemoveFinalizer = true
		return
	}
	if !p.stopSteps() || !p.releaseTiKV() || !p.deleteClaims() {
		return
	}
	p.deleteCloudVolumes()
}

func (p *plan) cleaning(msg string) {
	p.set(dpv1alpha1.RestoreMemberVolumesCleanedCondition, metav1.ConditionFalse, dpv1alpha1.RestoreMemberCleaningReason, msg)
}

// stopSteps deletes running step Jobs (SIGTERM makes restore-volumes delete what it created)
// and waits until they are gone.
func (p *plan) stopSteps() bool {
	waiting := false
	steps := []job.State{p.o.RestoreVolumes, p.o.RestoreData}
	for _, name := range slices.Sorted(maps.Keys(p.o.Warmups)) {
		steps = append(steps, p.o.Warmups[name]) // their pods hold the claims
	}
	for _, j := range steps {
		if !j.Exists() || j.Done() {
			continue // a finished step has no pod left to stop
		}
		waiting = true
		if !j.Deleting {
			p.add(Action{Kind: DeleteJob, Name: j.Name})
		}
	}
	if waiting {
		p.cleaning("stopping the restore's Jobs before deleting its volumes")
	}
	return !waiting
}

// releaseTiKV takes back the tikv-volumes-ready annotation and deletes the TiKV pods that
// mount the restored claims, so the claims and volumes can go.
func (p *plan) releaseTiKV() bool {
	if tc := p.o.TC; tc != nil && tc.Annotations[pcv1alpha1.TiKVVolumesReadyAnnotation] == VolumesReadyValue(p.m) {
		p.add(Action{Kind: AnnotateTC, Key: pcv1alpha1.TiKVVolumesReadyAnnotation})
	}
	waiting := false
	for _, pod := range p.o.Pods {
		for _, c := range pod.Claims {
			if p.o.PVCs[c] == nil {
				continue
			}
			waiting = true
			if !pod.Deleting {
				p.add(Action{Kind: DeletePod, Name: pod.Name, UID: pod.UID})
			}
			break
		}
	}
	if waiting {
		p.cleaning("stopping the TiKV pods that use the restored volumes")
	}
	return !waiting
}

// deleteClaims deletes the PVCs, then the PVs, the agent created.
func (p *plan) deleteClaims() bool {
	if len(p.o.PVCs) > 0 {
		for _, name := range sortedKeys(p.o.PVCs) {
			if p.o.PVCs[name].DeletionTimestamp == nil {
				p.add(Action{Kind: DeletePVC, Name: name})
			}
		}
		p.cleaning(fmt.Sprintf("deleting %d claims", len(p.o.PVCs)))
		return false
	}
	if len(p.o.PVs) > 0 {
		for _, name := range sortedKeys(p.o.PVs) {
			if p.o.PVs[name].DeletionTimestamp == nil {
				p.add(Action{Kind: DeletePV, Name: name})
			}
		}
		p.cleaning(fmt.Sprintf("deleting %d persistent volumes", len(p.o.PVs)))
		return false
	}
	return true
}

// deleteCloudVolumes deletes every EBS volume tagged with the restore id and rechecks until
// none is left (the cloud cannot be watched).
func (p *plan) deleteCloudVolumes() {
	switch {
	case p.o.CloudErr != nil:
		p.set(dpv1alpha1.RestoreMemberVolumesCleanedCondition, metav1.ConditionFalse, dpv1alpha1.RestoreMemberCleanFailedReason,
			fmt.Sprintf("listing volumes tagged %s=%s: %v; retrying in %s (annotation %s=true removes the member without cleaning)",
				meta.TagRestore, p.m.UID, p.o.CloudErr, cloudRecheck, ForceRemoveAnnotation))
		p.res.RequeueAfter = cloudRecheck
	case !p.o.CloudListed:
		p.cleaning("listing the restore's volumes")
		p.res.RequeueAfter = cloudRecheck
	case len(p.o.CloudVolumes) > 0:
		p.add(Action{Kind: DeleteVolumes, IDs: p.o.CloudVolumes})
		p.cleaning(fmt.Sprintf("deleting %d volumes tagged %s=%s", len(p.o.CloudVolumes), meta.TagRestore, p.m.UID))
		p.res.RequeueAfter = cloudRecheck
	default:
		p.set(dpv1alpha1.RestoreMemberVolumesCleanedCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberCleanedReason,
			fmt.Sprintf("no volume tagged %s=%s is left", meta.TagRestore, p.m.UID))
		p.res.RemoveFinalizer = true
	}
}

func sortedKeys[T any](m map[string]T) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
