package restoremember

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	"github.com/fedbr/fedbr/internal/meta"
)

// What a restore refuses before it creates any volume: a target whose TiKV would not mount the
// restored volumes as they were backed up.
var (
	// ErrVolumeLayout marks a target TidbCluster whose TiKV pods mount other volumes than the
	// backed-up ones: TiKV would start on a fresh, empty volume where the backup has data.
	ErrVolumeLayout = errors.New("TiKV volume layout differs from the backup's")
	// ErrClaimConflict marks a claim the restore needs that already exists and is not the one
	// this restore created: TiKV would start on that claim's volume, not on the restored one.
	ErrClaimConflict = errors.New("claim already exists")
)

// CheckLayout compares the TiKV volumes of every backed-up TiKV member of rec with those the
// target TidbCluster's TiKV pods mount (tidbcluster.TiKVVolumeNames: the data volume and one
// per spec.tikv.storageVolumes), by name and so by count.
func CheckLayout(rec *meta.Record, tc *pcv1alpha1.TidbCluster) error {
	list, err := backedUpClaims(rec, false)
	if err != nil {
		return err
	}
	byMember := map[int][]string{}
	for _, b := range list {
		byMember[b.oldOrdinal] = append(byMember[b.oldOrdinal], b.prefix)
	}
	members := make([]int, 0, len(byMember))
	for o := range byMember {
		members = append(members, o)
	}
	sort.Ints(members)
	want := tidbcluster.TiKVVolumeNames(tc)
	for _, o := range members {
		got := byMember[o]
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("%w: the backed-up TiKV member %d had %d volumes (%s) and TidbCluster %s/%s's TiKV pods mount %d (%s): "+
				"give spec.tikv.storageVolumes the backed-up cluster's volume names (a volume tikv-<name> is storageVolumes name <name>)",
				ErrVolumeLayout, o, len(got), strings.Join(got, ", "), tc.Namespace, tc.Name, len(want), strings.Join(want, ", "))
		}
	}
	return nil
}

// CheckClaims refuses every claim in names (in namespace) that already exists in existing
// (the namespace's claims by name) and is not the one this restore created: labelled with
// restoreID and bound to its PV (PVName).
func CheckClaims(names []string, existing map[string]*corev1.PersistentVolumeClaim, restoreID, namespace string) error {
	var conflicts []string
	for _, name := range names {
		pvc := existing[name]
		if pvc == nil || pvc.Labels[LabelRestore] == restoreID && pvc.Spec.VolumeName == PVName(restoreID, namespace, name) {
			continue
		}
		conflicts = append(conflicts, fmt.Sprintf("%s/%s (%s)", namespace, name, claimState(pvc)))
	}
	if len(conflicts) == 0 {
		return nil
	}
	return fmt.Errorf("%w: PersistentVolumeClaim %s: the restored TiKV claims need these names, and TiKV would mount the existing claims' volumes instead of the restored ones; "+
		"delete them if their data is not needed, or restore into another TidbCluster name or namespace",
		ErrClaimConflict, strings.Join(conflicts, ", "))
}

// claimState says what an existing claim is bound to and who made it.
func claimState(pvc *corev1.PersistentVolumeClaim) string {
	var parts []string
	if pvc.Spec.VolumeName != "" {
		parts = append(parts, "bound to volume "+pvc.Spec.VolumeName)
	} else {
		parts = append(parts, "not bound")
	}
	if id := pvc.Labels[LabelRestore]; id != "" {
		parts = append(parts, "made by restore "+id)
	}
	if pvc.DeletionTimestamp != nil {
		parts = append(parts, "being deleted")
	}
	return strings.Join(parts, ", ")
}
