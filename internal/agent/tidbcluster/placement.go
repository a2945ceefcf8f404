package tidbcluster

import (
	"maps"

	corev1 "k8s.io/api/core/v1"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
)

// Placement is where and with what a TiKV pod runs, as tidb-operator places it: warm-up pods
// take it, so that they land on the nodes TiKV may use (taints, zones, dedicated instance
// types) and read with the resources TiKV would have.
type Placement struct {
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	Affinity     *corev1.Affinity
	// Resources are TiKV's cpu and memory requests and limits; the other resources TiKV names
	// (its data volume's storage) are not a pod's.
	Resources corev1.ResourceRequirements
}

// TiKVPlacement is the placement of tc's TiKV pods: the TidbCluster's node selector with
// TiKV's keys over it, TiKV's tolerations and affinity or else the TidbCluster's, and TiKV's
// cpu and memory.
func TiKVPlacement(tc *pcv1alpha1.TidbCluster) Placement {
	p := Placement{Tolerations: tc.Spec.Tolerations, Affinity: tc.Spec.Affinity}
	sel := maps.Clone(tc.Spec.NodeSelector)
	kv := tc.Spec.TiKV
	if kv == nil {
		p.NodeSelector = sel
		return p
	}
	if len(kv.NodeSelector) > 0 && sel == nil {
		sel = map[string]string{}
	}
	maps.Copy(sel, kv.NodeSelector)
	p.NodeSelector = sel
	if len(kv.Tolerations) > 0 {
		p.Tolerations = kv.Tolerations
	}
	if kv.Affinity != nil {
		p.Affinity = kv.Affinity
	}
	p.Resources = corev1.ResourceRequirements{Requests: podResources(kv.Requests), Limits: podResources(kv.Limits)}
	return p
}

// podResources are the cpu and memory of list, nil when it names neither.
func podResources(list corev1.ResourceList) corev1.ResourceList {
	var out corev1.ResourceList
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := list[name]; ok {
			if out == nil {
				out = corev1.ResourceList{}
			}
			out[name] = q
		}
	}
	return out
}
