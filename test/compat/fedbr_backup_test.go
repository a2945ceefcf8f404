package compat_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/backupmember"
	"github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/br/snapshot"
	"github.com/fedbr/fedbr/internal/cloud/blob"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/awsdouble/awsdoubletest"
	"github.com/fedbr/fedbr/internal/meta"
)

const (
	tcName    = "basic"
	namespace = "tidb"
	stores    = 3
)

// tikvConfig puts raft-engine and RocksDB's WAL on the two storage volumes, as a TiKV with
// storageVolumes is configured, and asks for encryption, which upstream's restore checks.
const tikvConfig = `[raft-engine]
dir = "/var/lib/raft"

[rocksdb]
wal-dir = "/var/lib/wal"

[security.encryption]
data-encryption-method = "aes256-ctr"

[security.encryption.master-key]
type = "kms"
key-id = "0987dcba-09fe-87dc-65ba-ab0987654321"
`

// tidbClusterObject is the TidbCluster as the API server would return it, with fields fedbr's
// reduced type lacks (spec.tiflash, spec.pvReclaimPolicy, spec.tikv.evictLeaderTimeout).
func tidbClusterObject() map[string]any {
	storesStatus := map[string]any{}
	for i := range stores {
		id := strconv.Itoa(i + 1)
		storesStatus[id] = map[string]any{"id": id, "podName": fmt.Sprintf("%s-tikv-%d", tcName, i), "state": "Up"}
	}
	return map[string]any{
		"apiVersion": "pingcap.com/v1alpha1",
		"kind":       "TidbCluster",
		"metadata":   map[string]any{"name": tcName, "namespace": namespace},
		"spec": map[string]any{
			"acrossK8s":       true,
			"pvReclaimPolicy": "Retain",
			"pd":              map[string]any{"replicas": int64(3), "baseImage": "pingcap/pd"},
			"tidb":            map[string]any{"replicas": int64(2), "baseImage": "pingcap/tidb"},
			"tikv": map[string]any{
				"replicas": int64(stores), "baseImage": "pingcap/tikv", "evictLeaderTimeout": "3m",
				"config": tikvConfig,
				"storageVolumes": []any{
					map[string]any{"name": "raft", "storageSize": "10Gi", "mountPath": "/var/lib/raft"},
					map[string]any{"name": "wal", "storageSize": "5Gi", "mountPath": "/var/lib/wal"},
				},
			},
			"tiflash": map[string]any{"replicas": int64(1), "baseImage": "pingcap/tiflash",
				"storageClaims": []any{map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": "10Gi"}}}}},
		},
		"status": map[string]any{"tikv": map[string]any{"stores": storesStatus}},
	}
}

// tikvVolumes are a TiKV pod's volumes as tidb-operator names them: pod volume, mount path.
var tikvVolumes = []struct{ name, mount string }{
	{"tikv", "/var/lib/tikv"}, {"tikv-raft", "/var/lib/raft"}, {"tikv-wal", "/var/lib/wal"},
}

// backup is a backup fedbr took: its backupmeta as stored, the TidbCluster the agent read,
// and the AWS double holding its snapshots.
type backup struct {
	raw []byte
	tc  map[string]any
	aws awsdoubletest.Lab
}

// fedbrBackup runs fedbr's writers in process — the agent's Discover (clustermeta) and the
// snapshot step (backupmeta) against the AWS double — for a three-store TidbCluster whose TiKV
// pods each have a data volume and two storage volumes.
func fedbrBackup(t *testing.T) backup {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	al := awsdoubletest.Serve(t, awsdouble.Options{}, "")

	obj := tidbClusterObject()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var tc pcv1alpha1.TidbCluster
	if err := json.Unmarshal(b, &tc); err != nil {
		t.Fatal(err)
	}
	c := backupmember.Cluster{TC: &tc, Object: &unstructured.Unstructured{Object: obj},
		PVCs: map[string]*corev1.PersistentVolumeClaim{}, PVs: map[string]*corev1.PersistentVolume{}, Nodes: map[string]*corev1.Node{}}
	for i := range stores {
		in, err := al.Server.CreateInstance(awsdouble.InstanceSpec{AZ: "us-west-2a", Volumes: []awsdouble.VolumeSpec{
			{Device: "/dev/xvdb", SizeGiB: 20}, {Device: "/dev/xvdc", SizeGiB: 10}, {Device: "/dev/xvdd", SizeGiB: 5}}})
		if err != nil {
			t.Fatal(err)
		}
		pod := fmt.Sprintf("%s-tikv-%d", tcName, i)
		node := fmt.Sprintf("node-%d", i)
		c.Nodes[node] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-west-2a/" + in.ID}}
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: namespace}, Spec: corev1.PodSpec{NodeName: node,
			Containers: []corev1.Container{{Name: "tikv"}}}}
		for vi, v := range tikvVolumes {
			claim := fmt.Sprintf("%s-%s", v.name, pod)
			pv := fmt.Sprintf("pvc-%d-%d", i, vi)
			p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: v.name, MountPath: v.mount})
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: v.name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
			c.PVCs[claim] = &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: namespace, Labels: map[string]string{"app.kubernetes.io/instance": tcName}},
				Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: pv},
				Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
			}
			c.PVs[pv] = &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv}, Spec: corev1.PersistentVolumeSpec{
				Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
				ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: namespace, Name: claim, UID: types.UID("uid-" + claim)},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
					Driver: "ebs.csi.aws.com", VolumeHandle: in.Volumes[vi].ID, FSType: "ext4"}}}}
		}
		c.Pods = append(c.Pods, p)
	}

	rec, err := backupmember.Discover(c, "east", "bk-1")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	d, err := blob.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	store := meta.NewStore(d, nil)
	if err := store.PutClusterMeta(ctx, rec); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	_, err = snapshot.Run(ctx, snapshot.Deps{Cloud: al.Provider, Store: store, PDHTTP: pdVersion("v8.5.0")},
		snapshot.Options{BackupID: "bk-1", Cluster: "east", BackupTS: 457000000000000000, SkipClusterCheck: true, Progress: &log})
	if err != nil {
		t.Fatalf("snapshot step: %v\n%s", err, log.String())
	}
	raw, err := os.ReadFile(filepath.Join(dir, meta.BackupMetaKey))
	if err != nil {
		t.Fatal(err)
	}
	return backup{raw: raw, tc: obj, aws: al}
}

// pdVersion answers PD's cluster version; the step is given its backup ts, so it asks PD
// nothing else.
type pdVersion string

func (v pdVersion) ClusterVersion(context.Context) (string, error) { return string(v), nil }
func (pdVersion) MinResolvedTS(context.Context) (snapshot.ResolvedTS, error) {
	return snapshot.ResolvedTS{}, errors.New("not asked")
}

// TestUpstreamReadsFedbrBackupMeta: a backupmeta written by fedbr's agent and snapshot step
// passes every rule upstream's restore applies (upstream_reader_test.go), and its
// crd_tidb_cluster is the whole TidbCluster the agent read.
func TestUpstreamReadsFedbrBackupMeta(t *testing.T) {
	b := fedbrBackup(t)
	raw := b.raw
	m, errs := readUpstream(raw)
	for _, err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.Logf("backupmeta:\n%s", raw)
		return
	}
	if got := len(m.TiKV.Stores); got != stores {
		t.Fatalf("tikv.stores: %d, want %d", got, stores)
	}
	for si, s := range m.TiKV.Stores {
		types := map[string]bool{}
		for _, v := range s.Volumes {
			types[v.Type] = true
		}
		if want := map[string]bool{upDataType: true, "raft-engine.dir": true, "rocksdb.wal-dir": true}; !reflect.DeepEqual(types, want) {
			t.Errorf("tikv.stores[%d] volume types %v, want %v", si, types, want)
		}
	}

	// The whole TidbCluster: every member the API server returned, spec and status, not
	// only what fedbr's reduced type knows.
	var whole map[string]any
	if err := json.Unmarshal(raw, &whole); err != nil {
		t.Fatal(err)
	}
	saved, _ := whole["kubernetes"].(map[string]any)["crd_tidb_cluster"].(map[string]any)
	want := jsonRoundTrip(t, b.tc)
	for _, key := range []string{"apiVersion", "kind", "metadata", "spec", "status"} {
		if !reflect.DeepEqual(saved[key], want[key]) {
			t.Errorf("rule op-tidb-cluster-whole: kubernetes.crd_tidb_cluster.%s = %v, want the TidbCluster as read: %v", key, saved[key], want[key])
		}
	}
}

func jsonRoundTrip(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUpstreamReaderRefuses is the reader's negative control: fedbr's backupmeta, each time
// with one thing upstream's restore needs taken away, breaks exactly the rule that needs it,
// naming the field.
func TestUpstreamReaderRefuses(t *testing.T) {
	raw := fedbrBackup(t).raw
	for _, tt := range []struct {
		name, rule, field string
		mutate            func(m map[string]any)
	}{
		{"no cluster_info", ruleClusterInfo, "cluster_info", func(m map[string]any) { delete(m, "cluster_info") }},
		{"bad version", ruleVersion, "cluster_info.cluster_version", func(m map[string]any) { path(m, "cluster_info")["cluster_version"] = "eight" }},
		{"resolved ts 0", ruleResolvedTS, "cluster_info.resolved_ts", func(m map[string]any) { path(m, "cluster_info")["resolved_ts"] = 0 }},
		{"not aws-ebs", ruleBackupType, "cluster_info.full_backup_type", func(m map[string]any) { path(m, "cluster_info")["full_backup_type"] = "kv" }},
		{"no stores", ruleStores, "tikv.stores", func(m map[string]any) { path(m, "tikv")["stores"] = []any{} }},
		{"replicas below the stores", ruleStores, "tikv.replicas", func(m map[string]any) { path(m, "tikv")["replicas"] = 1 }},
		{"no snapshot id", ruleVolume, "tikv.stores[0].volumes[0].snapshot_id", func(m map[string]any) { volume(m, 0, 0)["snapshot_id"] = "" }},
		{"no volume AZ", ruleVolume, "tikv.stores[1].volumes[2].volume_az", func(m map[string]any) { volume(m, 1, 2)["volume_az"] = "" }},
		{"data volume untyped", ruleDataType, "tikv.stores[0].volumes[].type", func(m map[string]any) { retype(m, 0, upDataType, "") }},
		{"extra volume typed by its pod volume", ruleExtraType, ".type", func(m map[string]any) { retype(m, 2, "raft-engine.dir", "tikv-raft") }},
		{"extra volume untyped though a key holds its path", ruleExtraType, ".type", func(m map[string]any) { retype(m, 1, "rocksdb.wal-dir", "") }},
		{"no kubernetes", ruleKubernetes, "kubernetes", func(m map[string]any) { delete(m, "kubernetes") }},
		{"no TidbCluster", ruleTidbCluster, "kubernetes.crd_tidb_cluster", func(m map[string]any) { delete(path(m, "kubernetes"), "crd_tidb_cluster") }},
		{"TidbCluster without TiKV", ruleTidbCluster, "spec.tikv.replicas", func(m map[string]any) { delete(path(m, "kubernetes", "crd_tidb_cluster", "spec"), "tikv") }},
		{"unreadable TiKV config", ruleTiKVConfig, "spec.tikv.config", func(m map[string]any) {
			path(m, "kubernetes", "crd_tidb_cluster", "spec", "tikv")["config"] = "[raft-engine"
		}},
		{"PV without the volume-id annotation", rulePVAnnotation, ".volume_id", func(m map[string]any) {
			delete(path(m, "kubernetes", "pvs", "0", "metadata", "annotations"), upAnnVolumeID)
		}},
		{"PV of another driver", rulePVSource, "PV ", func(m map[string]any) {
			path(m, "kubernetes", "pvs", "0", "spec", "csi")["driver"] = "efs.csi.aws.com"
		}},
		{"PV without claimRef", ruleClaimRef, "spec.claimRef", func(m map[string]any) { delete(path(m, "kubernetes", "pvs", "1", "spec"), "claimRef") }},
		{"PVC missing", ruleClaimRef, "spec.claimRef", func(m map[string]any) { path(m, "kubernetes")["pvcs"] = path(m, "kubernetes")["pvcs"].([]any)[1:] }},
		{"PVC of another TidbCluster", ruleClaimName, "PVC ", func(m map[string]any) {
			path(m, "kubernetes", "crd_tidb_cluster", "metadata")["name"] = "other"
		}},
		{"storage volume dropped from the TidbCluster", ruleStoreClaims, "PVC ", func(m map[string]any) {
			tikv := path(m, "kubernetes", "crd_tidb_cluster", "spec", "tikv")
			tikv["storageVolumes"] = tikv["storageVolumes"].([]any)[:1]
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			tt.mutate(m)
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			_, errs := readUpstream(b)
			for _, err := range errs {
				var re ruleError
				if errors.As(err, &re) && re.Rule == tt.rule && strings.Contains(re.Field, tt.field) {
					t.Logf("refused: %v", err)
					return
				}
			}
			t.Errorf("want rule %s on a field with %q, got %v", tt.rule, tt.field, errs)
		})
	}
}

// path follows keys (a decimal key indexes an array) down a decoded JSON document.
func path(m map[string]any, keys ...string) map[string]any {
	var cur any = m
	for _, k := range keys {
		if a, ok := cur.([]any); ok {
			i, _ := strconv.Atoi(k)
			cur = a[i]
			continue
		}
		cur = cur.(map[string]any)[k]
	}
	return cur.(map[string]any)
}

func volume(m map[string]any, store, vol int) map[string]any {
	return path(m, "tikv", "stores", strconv.Itoa(store), "volumes", strconv.Itoa(vol))
}

// retype changes the type of store's volume typed from.
func retype(m map[string]any, store int, from, to string) {
	for _, v := range path(m, "tikv", "stores", strconv.Itoa(store))["volumes"].([]any) {
		if v := v.(map[string]any); v["type"] == from {
			v["type"] = to
			return
		}
	}
	panic("no volume typed " + from)
}

// brMeta is the backupmeta as BR writes it back (br/pkg/config/ebs.go, VolSnapBackupMeta):
// BR unmarshals the volume file into this struct and marshals the whole struct, so a key it
// lacks is dropped and the Kubernetes objects pass through as they are.
type brMeta struct {
	ClusterInfo *upClusterInfo `json:"cluster_info"`
	TiKV        *upTiKV        `json:"tikv"`
	TiDB        *upReplicas    `json:"tidb"`
	PD          *upReplicas    `json:"pd"`
	Kubernetes  *struct {
		PVs     []any          `json:"pvs"`
		PVCs    []any          `json:"pvcs"`
		CRD     any            `json:"crd_tidb_cluster"`
		Options map[string]any `json:"options"`
	} `json:"kubernetes"`
	Options map[string]any `json:"options"`
	Region  string         `json:"region"`
}

// TestFedbrRestoresBRShapedBackupMeta: fedbr's backupmeta written back in BR's shape (every
// key of fedbr's own dropped: the fedbr object, mount_path, instance_id) still passes upstream's
// rules, and fedbr's restore-volumes, allowed upstream backups, restores every volume of it
// from its snapshot in its AZ.
func TestFedbrRestoresBRShapedBackupMeta(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := fedbrBackup(t)
	var br brMeta
	if err := json.Unmarshal(b.raw, &br); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(br)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"fedbr"`, `"mount_path"`, `"instance_id"`} {
		if strings.Contains(string(raw), key) {
			t.Fatalf("BR's shape still has %s", key)
		}
	}
	m, errs := readUpstream(raw)
	for _, err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, meta.BackupMetaKey), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := blob.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	store := meta.NewStore(d, nil)
	// Without fedbr's identity the document is an upstream backup to fedbr: refused unless
	// allowed.
	if _, err := restorevolumes.Run(ctx, b.aws.Provider, nopPD{}, store, restorevolumes.Options{RestoreID: "r1"}); !errors.Is(err, restorevolumes.ErrUpstream) {
		t.Fatalf("restore not allowing upstream backups = %v, want %v", err, restorevolumes.ErrUpstream)
	}
	res, err := restorevolumes.Run(ctx, b.aws.Provider, nopPD{}, store, restorevolumes.Options{RestoreID: "r1", AllowUpstream: true})
	if err != nil {
		t.Fatal(err)
	}
	restored := map[string]restorevolumes.Volume{}
	for _, v := range res.Volumes {
		restored[v.BackupVolumeID] = v
	}
	for si, s := range m.TiKV.Stores {
		for vi, v := range s.Volumes {
			r, ok := restored[v.VolumeID]
			switch {
			case !ok || r.VolumeID == "":
				t.Errorf("tikv.stores[%d].volumes[%d] (%s) not restored", si, vi, v.VolumeID)
			case r.SnapshotID != v.SnapshotID || r.AZ != v.VolumeAZ || r.Type != v.Type || r.StoreID != s.StoreID:
				t.Errorf("tikv.stores[%d].volumes[%d] restored as %+v, want from %s in %s, type %q, store %d", si, vi, r, v.SnapshotID, v.VolumeAZ, v.Type, s.StoreID)
			}
		}
	}
	if len(res.Volumes) != len(restored) || len(restored) != stores*len(tikvVolumes) {
		t.Errorf("%d volumes restored, want %d", len(res.Volumes), stores*len(tikvVolumes))
	}
}

// nopPD takes the restore's PD calls; what PD does with them is not this test's matter.
type nopPD struct{}

func (nopPD) MarkSnapshotRecovering(context.Context) error { return nil }
func (nopPD) ResetTS(context.Context, uint64) error        { return nil }
