package restorevolumes

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fedbr/fedbr/internal/cloud"
)

// Tags the data-plane agent adds to every restored volume once its PV exists, as tidb-operator
// does, so that the EBS CSI driver and the console see the volume as they see a dynamically
// provisioned one.
const (
	TagCSIVolumeName          = "CSIVolumeName"
	TagCreatedForPVName       = "kubernetes.io/created-for/pv/name"
	TagCreatedForPVCName      = "kubernetes.io/created-for/pvc/name"
	TagCreatedForPVCNamespace = "kubernetes.io/created-for/pvc/namespace"
)

// OperatorTags are the tags of a restored volume bound by PV pv to claim namespace/pvc.
func OperatorTags(pv, pvc, namespace string) map[string]string {
	return map[string]string{TagCSIVolumeName: pv, TagCreatedForPVName: pv, TagCreatedForPVCName: pvc, TagCreatedForPVCNamespace: namespace}
}

// operatorTagCount is the room restore-volumes leaves on each volume for OperatorTags.
const operatorTagCount = 4

// copied says a tag was copied from the source snapshot (snapshot/<key>); upstream's own
// snapshot/createdFromSnapshotId is not.
func copied(key string) bool {
	return strings.HasPrefix(key, snapshotTagPrefix) && key != TagFromSnapshot
}

// dropRank orders copied tags from the least useful (dropped first) to the most:
//
//	0  the source volume's Kubernetes and CSI bookkeeping (snapshot/CSIVolumeName,
//	   snapshot/kubernetes.io/…, snapshot/ebs.csi.aws.com/…, snapshot/KubernetesCluster):
//	   they name the old volume's PV and claim, which the restored volume's own tags replace;
//	1  the source's fedbr tags (snapshot/fedbr.io/…): the backup's identity, also in the
//	   restore's metadata;
//	2  every other copied tag (the user's own: cost allocation, owner, …), kept longest.
func dropRank(key string) int {
	src := strings.TrimPrefix(key, snapshotTagPrefix)
	switch {
	case src == TagCSIVolumeName || src == "KubernetesCluster" || strings.HasPrefix(src, "kubernetes.io/") || strings.HasPrefix(src, "ebs.csi.aws.com/"):
		return 0
	case strings.HasPrefix(src, "fedbr.io/"):
		return 1
	}
	return 2
}

// FitTags keeps tags within room tags (cloud.MaxTags less the tags still to be added) by
// dropping copied tags (snapshot/<key>) in dropRank order, within a rank the greatest key
// first; it returns the kept tags and the dropped keys, sorted. Only copied tags are ever
// dropped: fedbr's identity and pending tags, upstream's restore tags, the user's --tags and
// OperatorTags never are, and when they alone exceed room the result is cloud.ErrTooManyTags.
func FitTags(tags map[string]string, room int) (map[string]string, []string, error) {
	if len(tags) <= room {
		return tags, nil, nil
	}
	var candidates []string
	for k := range tags {
		if copied(k) {
			candidates = append(candidates, k)
		}
	}
	over := len(tags) - room
	if over > len(candidates) {
		return nil, nil, fmt.Errorf("%d tags of which %d may be dropped, room for %d: %w", len(tags), len(candidates), room, cloud.ErrTooManyTags)
	}
	slices.SortFunc(candidates, func(a, b string) int {
		if c := cmp.Compare(dropRank(a), dropRank(b)); c != 0 {
			return c
		}
		return cmp.Compare(b, a)
	})
	dropped := candidates[:over]
	kept := maps.Clone(tags)
	for _, k := range dropped {
		delete(kept, k)
	}
	slices.Sort(dropped)
	return kept, dropped, nil
}
