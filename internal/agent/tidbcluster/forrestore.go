package tidbcluster

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/meta"
)

// TidbClusterKind is the kind of the manifest a restore needs in every data plane.
const TidbClusterKind = "TidbCluster"

// lastApplied is kubectl's annotation holding a whole earlier manifest: a restored copy must not
// carry the source's, which a later kubectl apply would diff against.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// MaxSaved bounds the saved TidbCluster a scratch restore's tidbcluster step reports and its
// agent accepts: a TidbCluster is a few KiB, its TiKV config included, and the member's whole
// status lives in one etcd object beside restore-volumes' report of the backup.
const MaxSaved = 256 << 10

// keptMetadata are the metadata fields a restored TidbCluster keeps of the saved one; the rest
// (uid, resourceVersion, generation, creationTimestamp, managedFields, ownerReferences,
// finalizers, deletion marks) belonged to the source object.
var keptMetadata = []string{"name", "namespace", "labels", "annotations"}

// SavedTidbCluster is the TidbCluster namespace/name among the manifests a backup saved.
func SavedTidbCluster(ms []meta.Manifest, namespace, name string) (meta.Manifest, error) {
	for _, m := range ms {
		if m.Kind == TidbClusterKind && m.Namespace == namespace && m.Name == name {
			return m, nil
		}
	}
	var have []string
	for _, m := range ms {
		if m.Kind == TidbClusterKind {
			have = append(have, m.Namespace+"/"+m.Name)
		}
	}
	return meta.Manifest{}, fmt.Errorf("the backup saved no TidbCluster %s/%s (it saved %v)", namespace, name, have)
}

// ForRestore is the TidbCluster a restore of m needs in its data plane: the saved spec, named
// name ("": the saved name) in namespace into, in recovery mode (spec.recoveryMode: true, which
// the restore's last step clears), without the source object's status and server-set
// metadata; spec.cluster, the TidbCluster it joins across Kubernetes clusters, is moved into
// into too (and renamed to name when one is given), so the restored clusters join each other,
// not the source. The annotation tikv-volumes-ready of a backed-up cluster that was itself
// restored is dropped (the restore opens that gate). A manifest that is not a TidbCluster with
// TiKV is refused.
func ForRestore(m meta.Manifest, into, name string) (*unstructured.Unstructured, error) {
	if msgs := validation.IsDNS1123Label(into); len(msgs) > 0 {
		return nil, fmt.Errorf("namespace %q: %s", into, strings.Join(msgs, "; "))
	}
	if name != "" {
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			return nil, fmt.Errorf("TidbCluster name %q: %s", name, strings.Join(msgs, "; "))
		}
	}
	var obj map[string]any
	if err := yaml.Unmarshal(m.YAML, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", m.Key, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	if u.GetKind() != TidbClusterKind || !strings.HasPrefix(u.GetAPIVersion(), "pingcap.com/") {
		return nil, fmt.Errorf("%s: %s %s, want a pingcap.com TidbCluster", m.Key, u.GetAPIVersion(), u.GetKind())
	}
	if tikv, ok, _ := unstructured.NestedMap(obj, "spec", "tikv"); !ok || tikv == nil {
		return nil, fmt.Errorf("%s: the saved TidbCluster has no spec.tikv: there is nothing to restore into", m.Key)
	}
	// spec.pdAddresses names the PD a TidbCluster joins by address: the source's. Kept, the
	// restored TidbCluster's TiKV would join the source's PD and the restore would prepare
	// that PD (snapshot-recovering, its TSO): no address can be moved to the restored cluster
	// safely, so such a manifest is refused.
	if addrs, _, _ := unstructured.NestedStringSlice(obj, "spec", "pdAddresses"); len(addrs) > 0 {
		return nil, fmt.Errorf("%s: the saved TidbCluster joins PD by spec.pdAddresses %v, the source's: a restored copy would join the source's PD; "+
			"create this data plane's TidbCluster by hand (recovery mode, joining the restored cluster's PD)", m.Key, addrs)
	}
	renamed := name != ""
	if !renamed {
		name = u.GetName()
	}
	md, _, _ := unstructured.NestedMap(obj, "metadata")
	for k := range md {
		if !slices.Contains(keptMetadata, k) {
			delete(md, k)
		}
	}
	obj["metadata"] = md
	u.SetName(name)
	u.SetNamespace(into)
	if a := u.GetAnnotations(); a != nil {
		delete(a, lastApplied)
		// A backed-up cluster that was itself restored still carries the gate its restore
		// opened: kept, tidb-operator would start TiKV at once, on fresh empty volumes.
		delete(a, pcv1alpha1.TiKVVolumesReadyAnnotation)
		u.SetAnnotations(a)
		if len(a) == 0 {
			unstructured.RemoveNestedField(obj, "metadata", "annotations")
		}
	}
	// tidb-operator ran a TiKV pod more per failed-over store, and the backup took each one's
	// volumes: the restored cluster needs as many TiKV (restore-volumes refuses another count),
	// as plain replicas, the failover itself not restored.
	if failed, _, _ := unstructured.NestedMap(obj, "status", "tikv", "failureStores"); len(failed) > 0 {
		replicas, _, err := unstructured.NestedFieldNoCopy(obj, "spec", "tikv", "replicas")
		if err != nil {
			return nil, fmt.Errorf("%s: spec.tikv.replicas: %w", m.Key, err)
		}
		n, ok := asInt(replicas)
		if !ok {
			return nil, fmt.Errorf("%s: spec.tikv.replicas %v is not a number", m.Key, replicas)
		}
		if err := unstructured.SetNestedField(obj, n+int64(len(failed)), "spec", "tikv", "replicas"); err != nil {
			return nil, err
		}
	}
	delete(obj, "status")
	if err := unstructured.SetNestedField(obj, true, "spec", "recoveryMode"); err != nil {
		return nil, err
	}
	if ref, ok, err := unstructured.NestedMap(obj, "spec", "cluster"); err != nil {
		return nil, fmt.Errorf("%s: spec.cluster: %w", m.Key, err)
	} else if ok && ref != nil {
		if n, _ := ref["name"].(string); n == "" {
			return nil, errors.New(m.Key + ": spec.cluster has no name")
		}
		if _, named := ref["namespace"]; named {
			ref["namespace"] = into
		}
		if renamed {
			// Every restored TidbCluster has the one name the restore gives them, so the one
			// joined has it too; with the saved names, the joined one keeps its own.
			ref["name"] = name
		}
		if err := unstructured.SetNestedMap(obj, ref, "spec", "cluster"); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// asInt reads a number of a decoded YAML or JSON document.
func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		return int64(n), n == float64(int64(n))
	}
	return 0, false
}
