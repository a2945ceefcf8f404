package backupmember

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	"github.com/fedbr/fedbr/internal/meta"
	"github.com/fedbr/fedbr/internal/tikvconfig"
)

// tikvDataVolume is the name tidb-operator gives the TiKV data volume in the pod (its claim is
// tikv-<pod>).
const tikvDataVolume = "tikv"

// ErrVolumeDiscovery marks a TiKV volume layout the agent cannot back up.
var ErrVolumeDiscovery = errors.New("volume discovery")

// Cluster is the Kubernetes side of a TidbCluster's TiKV: its pods and the claims, volumes and
// nodes they use. Only TiKV pods are listed, so only TiKV volumes are ever snapshotted.
type Cluster struct {
	TC *pcv1alpha1.TidbCluster
	// Object is the TidbCluster as the API server returned it, every field (spec.tikv.config,
	// spec.tiflash, what fedbr's reduced type lacks): the backup saves it (Discover,
	// tidbClusterManifest). Read with the pods; nil when the TidbCluster was not found.
	Object *unstructured.Unstructured
	Pods   []corev1.Pod
	PVCs   map[string]*corev1.PersistentVolumeClaim // by name, in the TC's namespace
	PVs    map[string]*corev1.PersistentVolume      // by name
	Nodes  map[string]*corev1.Node                  // by name
	// OperatorObjects are the tidb-operator objects that reference TC (ObserveOperatorObjects).
	OperatorObjects []unstructured.Unstructured
}

// Discover builds the clustermeta record (BR's volume file) of a TidbCluster's TiKV stores:
// for each TiKV pod its store id, EC2 instance and EBS volumes with their mount paths, plus the
// PVs, PVCs and the whole TidbCluster as read (Cluster.Object), so a restore can rebuild and check them.
//
// It backs up every TiKV pod tidb-operator keeps: spec.tikv.replicas plus one for each store it
// failed over (tidbcluster.TiKVPods), each pod with its store in status.tikv.stores. A cluster
// running another number of TiKV pods (scaling, a pod being replaced, a failed-over store's pod
// gone) is refused, naming what is missing: a backup of it would lack a store.
func Discover(c Cluster, k8sClusterName, backupID string) (*meta.Record, error) {
	tc := c.TC
	if tidbcluster.TiKVReplicas(tc) == 0 {
		return nil, fmt.Errorf("%w: TidbCluster %s/%s has no TiKV (spec.tikv.replicas is 0)", ErrVolumeDiscovery, tc.Namespace, tc.Name)
	}
	pods := make([]corev1.Pod, 0, len(c.Pods))
	for _, p := range c.Pods {
		if p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	if want := tidbcluster.TiKVPods(tc); len(pods) != want {
		return nil, fmt.Errorf("%w: %s", ErrVolumeDiscovery, unsettled(tc, pods, want))
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	storeOf := tidbcluster.StoreIDByPod(tc)
	rec := &meta.Record{
		TiKV:  meta.TiKV{Replicas: len(pods)},
		Fedbr: &meta.Extension{Version: meta.FormatVersion, BackupID: backupID, Cluster: k8sClusterName},
	}
	if tc.Spec.PD != nil {
		rec.PD.Replicas = int(tc.Spec.PD.Replicas)
	}
	if tc.Spec.TiDB != nil {
		rec.TiDB.Replicas = int(tc.Spec.TiDB.Replicas)
	}
	typeOf, err := storageVolumeTypes(tc)
	if err != nil {
		return nil, err
	}
	var errs []error
	for i := range pods {
		store, pvcs, pvs, err := discoverPod(c, &pods[i], storeOf, typeOf)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rec.TiKV.Stores = append(rec.TiKV.Stores, store)
		rec.Kubernetes.PVCs = append(rec.Kubernetes.PVCs, pvcs...)
		rec.Kubernetes.PVs = append(rec.Kubernetes.PVs, pvs...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrVolumeDiscovery, err)
	}
	sort.Slice(rec.TiKV.Stores, func(i, j int) bool { return rec.TiKV.Stores[i].ID < rec.TiKV.Stores[j].ID })
	tcJSON, err := c.tidbClusterJSON()
	if err != nil {
		return nil, err
	}
	rec.Kubernetes.TidbCluster = tcJSON
	if err := rec.ValidateCluster(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrVolumeDiscovery, err)
	}
	return rec, nil
}

// tidbClusterJSON is the TidbCluster a backup saves as crd_tidb_cluster: the whole object as
// read (Object), status included as upstream keeps it, without the server's bookkeeping
// (cleanJSON). Without Object it is an error, never the reduced type: a backup that silently
// lost spec.tikv.config would restore without its encryption check.
func (c Cluster) tidbClusterJSON() (json.RawMessage, error) {
	if c.Object == nil {
		return nil, fmt.Errorf("%w: TidbCluster %s/%s not found when its TiKV volumes were read", ErrVolumeDiscovery, c.TC.Namespace, c.TC.Name)
	}
	return cleanJSON(c.Object.Object)
}

// unsettled says why tc's running TiKV pods are not the want pods tidb-operator keeps.
func unsettled(tc *pcv1alpha1.TidbCluster, running []corev1.Pod, want int) string {
	failed := tidbcluster.FailureStores(tc)
	if len(failed) == 0 {
		return fmt.Sprintf("TidbCluster %s/%s wants %d TiKV pods (spec.tikv.replicas) and %d are running: it is scaling or a pod is being replaced; back up a settled cluster",
			tc.Namespace, tc.Name, want, len(running))
	}
	stores := "stores"
	if len(failed) == 1 {
		stores = "store"
	}
	msg := fmt.Sprintf("TidbCluster %s/%s wants %d TiKV pods (spec.tikv.replicas %d and %d failed-over %s in status.tikv.failureStores) and %d are running",
		tc.Namespace, tc.Name, want, tidbcluster.TiKVReplicas(tc), len(failed), stores, len(running))
	isRunning := map[string]bool{}
	for _, p := range running {
		isRunning[p.Name] = true
	}
	var gone []string
	for _, s := range failed {
		if s.PodName != "" && !isRunning[s.PodName] {
			gone = append(gone, fmt.Sprintf("store %s failed over and its pod %s is not running", s.StoreID, s.PodName))
		}
	}
	if len(gone) > 0 {
		msg += ": " + strings.Join(gone, ", ") + " (tidb-operator starts it again)"
	}
	return msg + "; back up a settled cluster"
}

// storageVolumeTypes returns the type of a TiKV storage volume mounted at a path: the TiKV
// config key (dotted, e.g. raft-engine.dir) whose value is that path, the first in sorted
// order if several are, or "" if none is. That is the type upstream's backup gives such a
// volume; BR and both restores treat every type but the data volume's alike. The config is
// read once; a config that is neither a TOML string nor a map is refused.
func storageVolumeTypes(tc *pcv1alpha1.TidbCluster) (func(mountPath string) string, error) {
	var config json.RawMessage
	if tc.Spec.TiKV != nil && tc.Spec.TiKV.Config != nil {
		config = tc.Spec.TiKV.Config.Raw
	}
	if _, err := tikvconfig.KeysHolding(config, ""); err != nil {
		return nil, fmt.Errorf("%w: TidbCluster %s/%s spec.tikv.config: %w", ErrVolumeDiscovery, tc.Namespace, tc.Name, err)
	}
	types := map[string]string{}
	return func(mountPath string) string {
		if t, ok := types[mountPath]; ok || mountPath == "" {
			return t
		}
		keys, _ := tikvconfig.KeysHolding(config, mountPath) // parsed above
		types[mountPath] = ""
		if len(keys) > 0 {
			types[mountPath] = keys[0]
		}
		return types[mountPath]
	}, nil
}

// discoverPod finds one TiKV pod's store, instance and EBS volumes; typeOf types its storage
// volumes by their mount paths.
func discoverPod(c Cluster, pod *corev1.Pod, storeOf map[string]string, typeOf func(string) string) (meta.TiKVStore, []json.RawMessage, []json.RawMessage, error) {
	var store meta.TiKVStore
	idText, ok := storeOf[pod.Name]
	if !ok {
		return store, nil, nil, fmt.Errorf("TiKV pod %s has no store in the TidbCluster's status.tikv.stores yet", pod.Name)
	}
	id, err := strconv.ParseUint(idText, 10, 64)
	if err != nil || id == 0 {
		return store, nil, nil, fmt.Errorf("TiKV pod %s: store id %q is not a number", pod.Name, idText)
	}
	store.ID = id
	node := c.Nodes[pod.Spec.NodeName]
	if pod.Spec.NodeName == "" || node == nil {
		return store, nil, nil, fmt.Errorf("TiKV pod %s is not on a known node (%q)", pod.Name, pod.Spec.NodeName)
	}
	if store.InstanceID, err = tidbcluster.InstanceID(node.Spec.ProviderID); err != nil {
		return store, nil, nil, fmt.Errorf("TiKV pod %s on node %s: %w", pod.Name, node.Name, err)
	}
	mounts := map[string]string{}
	for _, ctr := range pod.Spec.Containers {
		for _, m := range ctr.VolumeMounts {
			if _, ok := mounts[m.Name]; !ok {
				mounts[m.Name] = m.MountPath
			}
		}
	}
	var pvcs, pvs []json.RawMessage
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		claim := v.PersistentVolumeClaim.ClaimName
		vol, pvc, pv, err := claimVolume(c, claim)
		if err != nil {
			return store, nil, nil, fmt.Errorf("TiKV pod %s: %w", pod.Name, err)
		}
		vol.MountPath = mounts[v.Name]
		vol.Type = typeOf(vol.MountPath)
		if v.Name == tikvDataVolume || claim == "tikv-"+pod.Name {
			vol.Type = meta.DataDirType
		}
		store.Volumes = append(store.Volumes, vol)
		pvcs, pvs = append(pvcs, pvc), append(pvs, pv)
	}
	if len(store.Volumes) == 0 {
		return store, nil, nil, fmt.Errorf("TiKV pod %s mounts no persistent volume claim", pod.Name)
	}
	return store, pvcs, pvs, nil
}

// claimVolume follows a claim to its EBS volume.
func claimVolume(c Cluster, claim string) (meta.Volume, json.RawMessage, json.RawMessage, error) {
	pvc := c.PVCs[claim]
	if pvc == nil {
		return meta.Volume{}, nil, nil, fmt.Errorf("claim %s not found", claim)
	}
	if pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
		return meta.Volume{}, nil, nil, fmt.Errorf("claim %s is not bound to a volume", claim)
	}
	pv := c.PVs[pvc.Spec.VolumeName]
	if pv == nil {
		return meta.Volume{}, nil, nil, fmt.Errorf("claim %s: volume %s not found", claim, pvc.Spec.VolumeName)
	}
	id, err := tidbcluster.EBSVolumeID(pv)
	if err != nil {
		return meta.Volume{}, nil, nil, fmt.Errorf("claim %s: %w", claim, err)
	}
	pvcJSON, err := cleanJSON(pvc)
	if err != nil {
		return meta.Volume{}, nil, nil, err
	}
	// The record names the volume on the PV as upstream's backup does, so upstream's restore
	// finds the PV; the object read from the API stays as it is.
	pv = pv.DeepCopy()
	if pv.Annotations == nil {
		pv.Annotations = map[string]string{}
	}
	pv.Annotations[meta.AnnotationVolumeID] = id
	pvJSON, err := cleanJSON(pv)
	if err != nil {
		return meta.Volume{}, nil, nil, err
	}
	return meta.Volume{ID: id}, pvcJSON, pvJSON, nil
}

// cleanJSON is an object's JSON without the server's bookkeeping, as a restore would create it.
func cleanJSON(obj any) (json.RawMessage, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", obj, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("encode %T: %w", obj, err)
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		for _, k := range []string{"managedFields", "resourceVersion", "uid", "generation", "creationTimestamp", "selfLink"} {
			delete(md, k)
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", obj, err)
	}
	return out, nil
}
