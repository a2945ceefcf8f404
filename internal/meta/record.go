// Package meta is fedbr's backup metadata: the JSON record BR and tidb-operator call
// clustermeta, backupmeta and restoremeta (one shape, filled in step by step), the identity
// tags fedbr puts on what it creates, and a Store that keeps the records at their object
// names over a blob.Store.
//
// The record is field-compatible with BR's EBS meta, so a backup written by upstream restores
// with fedbr and the other way round: BR's keys are always written, fedbr's additions are
// optional keys BR ignores (mount_path, instance_id, the "fedbr" object), and members this
// version does not know are kept when a record is read and written again.
package meta

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// FullBackupTypeEBS is the only full_backup_type BR and fedbr restore.
const FullBackupTypeEBS = "aws-ebs"

// DataDirType is the volume type (TiKV config key) of a store's main data volume; FSR and
// volume scopes treat it specially.
const DataDirType = "storage.data-dir"

// FormatVersion is the version of fedbr's extension this build writes and the newest it
// reads.
const FormatVersion = 1

// ErrInvalid marks a record that fails validation.
var ErrInvalid = errors.New("invalid metadata")

// Record is the EBS backup record (BR's EBSBasedBRMeta). The operator writes it as
// clustermeta with the volumes to snapshot, the snapshot step adds cluster_info and the
// snapshot ids and writes it as backupmeta, the volume restore adds restore_volume_id and
// writes it as restoremeta.
type Record struct {
	ClusterInfo *ClusterInfo    `json:"cluster_info"`
	TiKV        TiKV            `json:"tikv"`
	TiDB        Component       `json:"tidb"`
	PD          Component       `json:"pd"`
	Kubernetes  Kubernetes      `json:"kubernetes"`
	Options     json.RawMessage `json:"options"`
	Region      string          `json:"region"`
	// Fedbr is fedbr's extension; absent in records written by upstream.
	Fedbr *Extension `json:"fedbr,omitempty"`
	Extra Extra      `json:"-"`
}

// ClusterInfo is what the snapshot step learned from PD.
type ClusterInfo struct {
	// Version is PD's cluster version, normalized semver ("6.5.0").
	Version        string `json:"cluster_version"`
	FullBackupType string `json:"full_backup_type"`
	// ResolvedTS is the PD min resolved ts the backup is consistent at.
	ResolvedTS uint64            `json:"resolved_ts"`
	Replicas   map[string]uint64 `json:"replicas"`
	Extra      Extra             `json:"-"`
}

// TiKV lists the stores of this data plane.
type TiKV struct {
	// Replicas is, in a backupmeta, the number of TiKV stores of the whole federated cluster
	// (the snapshot step counts them in PD), which restore-data waits for; in the clustermeta
	// fedbr's agent writes, this plane's count (it knows no other plane's).
	Replicas int         `json:"replicas"`
	Stores   []TiKVStore `json:"stores"`
	Extra    Extra       `json:"-"`
}

// TiKVStore is one TiKV store and its volumes.
type TiKVStore struct {
	ID      uint64   `json:"store_id"`
	Volumes []Volume `json:"volumes"`
	// InstanceID is the EC2 instance the volumes are attached to (fedbr; BR finds it from
	// the first volume's attachment).
	InstanceID string `json:"instance_id,omitempty"`
	Extra      Extra  `json:"-"`
}

// Volume is one volume of a store.
type Volume struct {
	ID string `json:"volume_id"`
	// Type is the TiKV config key of the mount (DataDirType for the data volume).
	Type            string `json:"type"`
	SnapshotID      string `json:"snapshot_id"`
	RestoreVolumeID string `json:"restore_volume_id"`
	AZ              string `json:"volume_az"`
	Status          string `json:"status"`
	// MountPath is written by tidb-operator in clustermeta; BR drops it, fedbr keeps it.
	MountPath string `json:"mount_path,omitempty"`
	// RestoreAZ is the AZ of the restored volume (fedbr, restoremeta only).
	RestoreAZ string `json:"restore_volume_az,omitempty"`
	Extra     Extra  `json:"-"`
}

// Component is the size of a TiDB or PD deployment.
type Component struct {
	Replicas int   `json:"replicas"`
	Extra    Extra `json:"-"`
}

// Kubernetes carries the objects restore rebuilds, passed through untouched.
type Kubernetes struct {
	PVs         []json.RawMessage `json:"pvs"`
	PVCs        []json.RawMessage `json:"pvcs"`
	TidbCluster json.RawMessage   `json:"crd_tidb_cluster"`
	Options     json.RawMessage   `json:"options"`
	Extra       Extra             `json:"-"`
}

// Extension is what fedbr records beyond BR's schema.
type Extension struct {
	// Version is the extension's format version (FormatVersion when written).
	Version int `json:"version"`
	// BackupID is the identity the backup's snapshots are tagged with (BackupTags).
	BackupID string `json:"backup_id,omitempty"`
	// RestoreID is the identity of the restore that wrote a restoremeta (RestoreTags).
	RestoreID string `json:"restore_id,omitempty"`
	// Cluster is the k8sClusterName of the data plane.
	Cluster       string `json:"k8s_cluster,omitempty"`
	PDClusterID   uint64 `json:"pd_cluster_id,omitempty"`
	BackupStartTS uint64 `json:"backup_start_ts,omitempty"`
	// Manifests are the keys of the Kubernetes manifests saved next to the record.
	Manifests []string `json:"manifests,omitempty"`
	// Snapshots says whether the backup's snapshots have all completed (SnapshotsCompleted)
	// or were only started (SnapshotsPending). A backupmeta is written as soon as every
	// snapshot started (the "snapshots created" signal) and completed once they all finished;
	// empty (upstream's) means completed, as upstream never rewrites it.
	Snapshots SnapshotsState `json:"snapshots,omitempty"`
	// WrittenAt is when the record was written; it is ignored when a rewrite is compared
	// with what is stored, so a retried step may write it again.
	WrittenAt time.Time `json:"written_at,omitzero"`
	Extra     Extra     `json:"-"`
}

// SnapshotsState is how far a backup's snapshots got.
type SnapshotsState string

// Snapshot states of a backupmeta.
const (
	// SnapshotsPending: every snapshot was started; some may not have completed yet.
	SnapshotsPending SnapshotsState = "pending"
	// SnapshotsCompleted: every snapshot completed; the backup is restorable.
	SnapshotsCompleted SnapshotsState = "completed"
)

// Pending reports whether the record is a backupmeta whose snapshots are not all known to
// have completed.
func (r *Record) Pending() bool {
	return r.Fedbr != nil && r.Fedbr.Snapshots == SnapshotsPending
}

// Parse reads a record without validating it; unknown members are kept.
func Parse(data []byte) (*Record, error) {
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("parse metadata: %w: %w", ErrInvalid, err)
	}
	if r.Fedbr != nil && r.Fedbr.Version > FormatVersion {
		return nil, fmt.Errorf("metadata written by a newer fedbr (format %d, this build reads up to %d): %w", r.Fedbr.Version, FormatVersion, ErrInvalid)
	}
	return &r, nil
}

// Marshal writes a record as indented JSON.
func (r *Record) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("marshal metadata: %w", err)
	}
	return append(b, '\n'), nil
}

// Clone returns a deep copy.
func (r *Record) Clone() *Record {
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("clone metadata: %v", err)) // a Record always marshals
	}
	c, err := Parse(b)
	if err != nil {
		panic(fmt.Sprintf("clone metadata: %v", err))
	}
	return c
}

// Bounds on what a record may list: far above any real cluster, low enough that a forged
// record cannot make a step plan millions of cloud calls.
const (
	// MaxStores bounds tikv.stores and tikv.replicas.
	MaxStores = 10000
	// MaxVolumesPerStore bounds tikv.stores[].volumes.
	MaxVolumesPerStore = 32
)

// Cloud id syntax: AWS's ids are the prefix and 8 or 17 hex digits; the pattern admits any
// letters, digits and '-' after the prefix, and nothing else, so an id is never an EC2 filter
// wildcard ('*', '?'), a list or a path.
var (
	volumeIDPattern   = regexp.MustCompile(`^vol-[0-9A-Za-z][0-9A-Za-z-]{0,62}$`)
	snapshotIDPattern = regexp.MustCompile(`^snap-[0-9A-Za-z][0-9A-Za-z-]{0,62}$`)
)

// ValidateIDs checks what every reader of a record uses, whatever the record's kind: each
// volume, snapshot and restored volume id has its syntax and is listed once, the store and
// volume counts are within MaxStores and MaxVolumesPerStore, fedbr's backup and restore
// ids are identities (ValidateID), and fedbr.manifests lists at most MaxManifests well-formed
// manifest keys, each once. Every record read from storage passes it before any field
// is used (Store); each error names its field.
func (r *Record) ValidateIDs() error {
	if err := errors.Join(r.validateIDs()...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

func (r *Record) validateIDs() []error {
	var errs []error
	stores := r.TiKV.Stores
	if len(stores) > MaxStores {
		return []error{fmt.Errorf("tikv.stores: %d stores, at most %d", len(stores), MaxStores)}
	}
	if r.TiKV.Replicas < 0 || r.TiKV.Replicas > MaxStores {
		errs = append(errs, fmt.Errorf("tikv.replicas %d: want 0 to %d", r.TiKV.Replicas, MaxStores))
	}
	if e := r.Fedbr; e != nil {
		if e.BackupID != "" {
			if err := ValidateID(e.BackupID); err != nil {
				errs = append(errs, fmt.Errorf("fedbr.backup_id: %w", err))
			}
		}
		if e.RestoreID != "" {
			if err := ValidateID(e.RestoreID); err != nil {
				errs = append(errs, fmt.Errorf("fedbr.restore_id: %w", err))
			}
		}
		errs = append(errs, validateManifestKeys(e.Manifests)...)
	}
	seen := map[string]string{} // id → the field that listed it first
	id := func(field, v string, pattern *regexp.Regexp, what string) {
		switch {
		case v == "":
		case !pattern.MatchString(v):
			errs = append(errs, fmt.Errorf("%s %q: not %s id", field, v, what))
		case seen[v] != "":
			errs = append(errs, fmt.Errorf("%s %q: listed twice (also %s)", field, v, seen[v]))
		default:
			seen[v] = field
		}
	}
	storeIDs := map[uint64]bool{}
	for si, s := range stores {
		f := fmt.Sprintf("tikv.stores[%d]", si)
		if storeIDs[s.ID] && s.ID != 0 {
			errs = append(errs, fmt.Errorf("%s.store_id %d: listed twice", f, s.ID))
		}
		storeIDs[s.ID] = true
		if len(s.Volumes) > MaxVolumesPerStore {
			errs = append(errs, fmt.Errorf("%s.volumes: %d volumes, at most %d", f, len(s.Volumes), MaxVolumesPerStore))
			continue
		}
		for vi, v := range s.Volumes {
			vf := fmt.Sprintf("%s.volumes[%d]", f, vi)
			id(vf+".volume_id", v.ID, volumeIDPattern, "an EBS volume")
			id(vf+".snapshot_id", v.SnapshotID, snapshotIDPattern, "an EBS snapshot")
			id(vf+".restore_volume_id", v.RestoreVolumeID, volumeIDPattern, "an EBS volume")
		}
	}
	return errs
}

// validateLayout checks what the snapshot step and a restore need beyond ValidateIDs: stores,
// a volume id for every volume, and (snapshots: a backupmeta) a snapshot id for every volume.
func (r *Record) validateLayout(snapshots bool) []error {
	errs := r.validateIDs()
	stores := r.TiKV.Stores
	if len(stores) == 0 {
		errs = append(errs, errors.New("tikv.stores: store count is 0"))
	}
	if r.TiKV.Replicas < len(stores) {
		errs = append(errs, fmt.Errorf("tikv.replicas %d: want at least the %d stores listed", r.TiKV.Replicas, len(stores)))
	}
	for si, s := range stores {
		f := fmt.Sprintf("tikv.stores[%d]", si)
		if len(s.Volumes) == 0 {
			errs = append(errs, fmt.Errorf("%s (store %d) has no volumes", f, s.ID))
		}
		for vi, v := range s.Volumes {
			vf := fmt.Sprintf("%s.volumes[%d]", f, vi)
			if v.ID == "" {
				errs = append(errs, fmt.Errorf("%s.volume_id is empty", vf))
			}
			if snapshots && v.SnapshotID == "" {
				errs = append(errs, fmt.Errorf("%s.snapshot_id is empty (volume %s)", vf, v.ID))
			}
		}
	}
	return errs
}

// ValidateCluster checks a clustermeta: the input of the snapshot step.
func (r *Record) ValidateCluster() error {
	if err := errors.Join(r.validateLayout(false)...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// ValidateBackup checks a backupmeta the way a restore needs it: BR's checks (cluster_info
// present, semver cluster_version, aws-ebs, resolved_ts set, at least one store) plus a
// snapshot id for every volume, the syntax and uniqueness of every volume and snapshot id, and
// the store and volume counts.
func (r *Record) ValidateBackup() error {
	var errs []error
	if ci := r.ClusterInfo; ci == nil {
		errs = append(errs, errors.New("cluster_info is missing"))
	} else {
		if _, err := ParseVersion(ci.Version); err != nil {
			errs = append(errs, err)
		}
		if ci.FullBackupType != FullBackupTypeEBS {
			errs = append(errs, fmt.Errorf("full_backup_type %q: only %s is supported", ci.FullBackupType, FullBackupTypeEBS))
		}
		if ci.ResolvedTS == 0 {
			errs = append(errs, errors.New("resolved_ts is 0"))
		}
	}
	errs = append(errs, r.validateLayout(true)...)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// SnapshotIDs lists every snapshot id of the record, in store order.
func (r *Record) SnapshotIDs() []string {
	var ids []string
	for _, s := range r.TiKV.Stores {
		for _, v := range s.Volumes {
			if v.SnapshotID != "" {
				ids = append(ids, v.SnapshotID)
			}
		}
	}
	return ids
}

// Volumes lists every volume with its store, in store order.
func (r *Record) Volumes() []StoreVolume {
	var out []StoreVolume
	for _, s := range r.TiKV.Stores {
		for _, v := range s.Volumes {
			out = append(out, StoreVolume{StoreID: s.ID, Volume: v})
		}
	}
	return out
}

// StoreVolume is a volume with the id of its store.
type StoreVolume struct {
	StoreID uint64
	Volume
}

// RestoredVolumes maps each backed-up volume id to its restored volume id (the restoremeta's
// old → new map); volumes not restored are left out.
func (r *Record) RestoredVolumes() map[string]string {
	m := map[string]string{}
	for _, s := range r.TiKV.Stores {
		for _, v := range s.Volumes {
			if v.RestoreVolumeID != "" {
				m[v.ID] = v.RestoreVolumeID
			}
		}
	}
	return m
}

// Version is a parsed semantic version.
type Version struct {
	Major, Minor, Patch int
	Pre                 string
}

func (v Version) String() string {
	s := fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
	if v.Pre != "" {
		s += "-" + v.Pre
	}
	return s
}

var semver = regexp.MustCompile(`^v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$`)

// ParseVersion parses a cluster version as BR normalizes it ("6.5.0", "v7.1.0-alpha").
func ParseVersion(s string) (Version, error) {
	m := semver.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Version{}, fmt.Errorf("cluster_version %q is not a semantic version", s)
	}
	var v Version
	v.Major, _ = strconv.Atoi(m[1])
	v.Minor, _ = strconv.Atoi(m[2])
	v.Patch, _ = strconv.Atoi(m[3])
	v.Pre = m[4]
	return v, nil
}
