package restoremember

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	"github.com/fedbr/fedbr/internal/meta"
	"github.com/fedbr/fedbr/internal/tikvconfig"
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
	// ErrEncryptionMismatch marks a target TidbCluster whose TiKV could not read the restored
	// data: the backed-up TiKV encrypted it at rest, and the target's TiKV config has another
	// method or master key.
	ErrEncryptionMismatch = errors.New("TiKV encryption at rest differs from the backup's")
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

// CheckEncryption compares TiKV's encryption at rest in the backup (rec's
// kubernetes.crd_tidb_cluster spec.tikv.config) and in the target TidbCluster tc (its
// spec.tikv.config), each a TOML string or a map, as upstream does before a volume-snapshot
// restore (tidb-operator #4914). A backup without encryption (data-encryption-method unset or
// plaintext) restores into any target. An encrypted one needs the target's method, and its
// master key: the same type and, for a KMS key, the same key id, as the target's master-key or
// previous-master-key (TiKV falls back to that one while the key is rotated); a file key's
// path is not compared, the file is the pod's. A mismatch, or a target config that cannot be
// read, wraps ErrEncryptionMismatch and names both sides; a backup config that cannot be read
// is another error.
func CheckEncryption(rec *meta.Record, tc *pcv1alpha1.TidbCluster) error {
	backup, err := backupEncryption(rec)
	if err != nil {
		return err
	}
	if !backup.Encrypted() {
		return nil
	}
	var raw json.RawMessage
	if tc.Spec.TiKV != nil && tc.Spec.TiKV.Config != nil {
		raw = tc.Spec.TiKV.Config.Raw
	}
	target, err := tikvconfig.ParseEncryption(raw)
	if err != nil {
		return fmt.Errorf("%w: the backed-up TiKV encrypted its data with %s, and TidbCluster %s/%s's spec.tikv.config cannot be read: %w",
			ErrEncryptionMismatch, backup, tc.Namespace, tc.Name, err)
	}
	if target.Method == backup.Method && (sameMasterKey(backup.MasterKey, target.MasterKey) || sameMasterKey(backup.MasterKey, target.PreviousMasterKey)) {
		return nil
	}
	have := target.String()
	if target.PreviousMasterKey != (tikvconfig.MasterKey{}) {
		have += ", previous-master-key " + target.PreviousMasterKey.String()
	}
	return fmt.Errorf("%w: the backed-up TiKV encrypted its data with %s, and TidbCluster %s/%s's spec.tikv.config has %s: its TiKV could not read the restored data; "+
		"give spec.tikv.config the backup's security.encryption (data-encryption-method and master-key, as the backupmeta's kubernetes.crd_tidb_cluster.spec.tikv.config has them)",
		ErrEncryptionMismatch, backup, tc.Namespace, tc.Name, have)
}

// sameMasterKey says whether a target's master key t opens what the backup's b encrypted: the
// same type and, for KMS, key id. A backup key of another type (plaintext, unset: TiKV
// refuses it with encryption on) gives nothing to compare.
func sameMasterKey(b, t tikvconfig.MasterKey) bool {
	switch b.Type {
	case tikvconfig.MasterKeyKMS:
		return t.Type == tikvconfig.MasterKeyKMS && t.KeyID == b.KeyID
	case tikvconfig.MasterKeyFile:
		return t.Type == tikvconfig.MasterKeyFile
	}
	return true
}

// backupEncryption reads TiKV's encryption at rest off rec's kubernetes.crd_tidb_cluster
// (restore-volumes reports it in the map form; a backupmeta has the whole TidbCluster); none
// when the backup has no TidbCluster, no TiKV or no config.
func backupEncryption(rec *meta.Record) (tikvconfig.Encryption, error) {
	raw := rec.Kubernetes.TidbCluster
	if len(raw) == 0 || string(raw) == "null" {
		return tikvconfig.Encryption{}, nil
	}
	var tc struct {
		Spec struct {
			TiKV *struct {
				Config json.RawMessage `json:"config"`
			} `json:"tikv"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &tc); err != nil {
		return tikvconfig.Encryption{}, fmt.Errorf("kubernetes.crd_tidb_cluster: %w", err)
	}
	if tc.Spec.TiKV == nil {
		return tikvconfig.Encryption{}, nil
	}
	e, err := tikvconfig.ParseEncryption(tc.Spec.TiKV.Config)
	if err != nil {
		return tikvconfig.Encryption{}, fmt.Errorf("kubernetes.crd_tidb_cluster spec.tikv.config: %w", err)
	}
	return e, nil
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
