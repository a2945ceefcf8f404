// Package tidbcluster is what the agent reads from a TidbCluster and its TiKV pods: PD's
// address, the TiKV pod selector tidb-operator uses, and whether the stores are up. It speaks
// the tidb-operator contract only (labels, status fields), so it works against tidb-operator
// and against the lab's stand-in alike.
package tidbcluster

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
)

// Labels tidb-operator puts on a TidbCluster's pods (and, LabelInstance and LabelManagedBy with
// ManagedByOperator, on the claims its StatefulSets make).
const (
	LabelInstance     = "app.kubernetes.io/instance"
	LabelComponent    = "app.kubernetes.io/component"
	LabelManagedBy    = "app.kubernetes.io/managed-by"
	ManagedByOperator = "tidb-operator"
	ComponentTiKV     = "tikv"
	// StoreUp is the state of a serving store.
	StoreUp = "Up"
)

// ErrNoPD marks a TidbCluster that names no PD the agent could reach.
var ErrNoPD = errors.New("no PD address")

// TiKVOrdinal is the ordinal of TiKV pod name <tc>-tikv-<n>, tidb-operator's naming.
func TiKVOrdinal(pod, tc string) (int, bool) {
	rest, ok := strings.CutPrefix(pod, tc+"-tikv-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0
}

// TiKVSelector selects tc's TiKV pods.
func TiKVSelector(tc string) map[string]string {
	return map[string]string{LabelInstance: tc, LabelComponent: ComponentTiKV}
}

// PDAddresses are the client URLs of the PD the TidbCluster's stores belong to: its own PD
// members (status.pd.members, sorted by name), else spec.pdAddresses (a TidbCluster that joins
// a PD running in another Kubernetes cluster), else the PD of the TidbCluster spec.cluster
// references (ClusterRefPD).
func PDAddresses(tc *pcv1alpha1.TidbCluster) ([]string, error) {
	names := make([]string, 0, len(tc.Status.PD.Members))
	for n, m := range tc.Status.PD.Members {
		if m.ClientURL != "" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var out []string
	for _, n := range names {
		out = append(out, tc.Status.PD.Members[n].ClientURL)
	}
	if len(out) > 0 {
		return out, nil
	}
	for _, a := range tc.Spec.PDAddresses {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	if ref := ClusterRefPD(tc); ref != "" {
		return []string{ref}, nil
	}
	return nil, fmt.Errorf("%w: TidbCluster %s/%s has no PD member with a client URL in status.pd.members, no spec.pdAddresses and no spec.cluster",
		ErrNoPD, tc.Namespace, tc.Name)
}

// ClusterRefPD is the client URL of the PD of the TidbCluster tc joins through spec.cluster
// ("" without one), as tidb-operator addresses it: <name>-pd.<namespace>:2379 (the namespace
// defaults to tc's), or <name>-pd-peer.<namespace>.svc.<clusterDomain>:2379 across Kubernetes
// clusters with a cluster domain; https when tc's cluster TLS is on (pingcap/tidb-operator
// pkg/pdapi, ClusterRefPDClientUrl).
func ClusterRefPD(tc *pcv1alpha1.TidbCluster) string {
	ref := tc.Spec.Cluster
	if ref == nil || strings.TrimSpace(ref.Name) == "" {
		return ""
	}
	scheme := "http"
	if tc.Spec.TLSCluster != nil && tc.Spec.TLSCluster.Enabled {
		scheme = "https"
	}
	ns := ref.Namespace
	if ns == "" {
		ns = tc.Namespace
	}
	if ref.ClusterDomain == "" {
		return fmt.Sprintf("%s://%s-pd.%s:2379", scheme, ref.Name, ns)
	}
	return fmt.Sprintf("%s://%s-pd-peer.%s.svc.%s:2379", scheme, ref.Name, ns, ref.ClusterDomain)
}

// TiKVReplicas is spec.tikv.replicas (0 without TiKV).
func TiKVReplicas(tc *pcv1alpha1.TidbCluster) int {
	if tc.Spec.TiKV == nil {
		return 0
	}
	return int(tc.Spec.TiKV.Replicas)
}

// TiKVPods is how many TiKV pods tidb-operator keeps for tc: spec.tikv.replicas plus one for
// each store it failed over (status.tikv.failureStores), which it keeps until the failover is
// recovered (spec.tikv.recoverFailover). It is the desired replicas of tidb-operator's TiKV
// StatefulSet (TidbCluster.TiKVStsDesiredReplicas in v1.6), without the spare replicas of a
// volume replace. 0 without TiKV.
func TiKVPods(tc *pcv1alpha1.TidbCluster) int {
	if tc.Spec.TiKV == nil {
		return 0
	}
	return TiKVReplicas(tc) + len(tc.Status.TiKV.FailureStores)
}

// FailureStores are tc's failed-over TiKV stores (status.tikv.failureStores), in the order of
// their store ids; StoreID is the map's key when the entry does not repeat it.
func FailureStores(tc *pcv1alpha1.TidbCluster) []pcv1alpha1.TiKVFailureStore {
	out := make([]pcv1alpha1.TiKVFailureStore, 0, len(tc.Status.TiKV.FailureStores))
	for id, s := range tc.Status.TiKV.FailureStores {
		if s.StoreID == "" {
			s.StoreID = id
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].StoreID, out[j].StoreID
		if len(a) != len(b) {
			return len(a) < len(b) // numeric ids: the shorter is the smaller
		}
		return a < b
	})
	return out
}

// StoresUp counts the stores of tc that are Up.
func StoresUp(tc *pcv1alpha1.TidbCluster) int {
	n := 0
	for _, s := range tc.Status.TiKV.Stores {
		if s.State == StoreUp {
			n++
		}
	}
	return n
}

// StoreIDByPod maps each TiKV pod name to its store id, from status.tikv.stores.
func StoreIDByPod(tc *pcv1alpha1.TidbCluster) map[string]string {
	m := map[string]string{}
	for id, s := range tc.Status.TiKV.Stores {
		if s.PodName == "" {
			continue
		}
		if s.ID != "" {
			id = s.ID
		}
		// A tombstone store may still carry the pod's name; a live one wins.
		if _, ok := m[s.PodName]; ok && s.State != StoreUp {
			continue
		}
		m[s.PodName] = id
	}
	return m
}

// EBSZoneLabel is the EBS CSI driver's own zone key: its node plugin still reports it (beside
// topology.kubernetes.io/zone), and the driver wrote it on the PVs it provisioned before v1.33.0.
// Restored PVs name it in a second node-affinity term (restoremember's zoneAffinity).
const EBSZoneLabel = "topology.ebs.csi.aws.com/zone"
