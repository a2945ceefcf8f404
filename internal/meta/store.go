package meta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/fedbr/fedbr/internal/cloud/blob"
)

// Object names in a backup's storage prefix. clustermeta, backupmeta and manifests/ are
// upstream's names, so either tool finds the other's backups.
//
// restoremeta is per restore (RestoreMetaPrefix + restore id) instead of upstream's single
// restoremeta object: two restores of one backup then never overwrite each other's old → new
// volume map, and cleaning up after a failed restore can only delete that restore's volumes
// (upstream weak point: a failed second restore could delete the first restore's volumes).
// It stays in the backup's prefix because a restore has no storage of its own, and so the
// backup's prefix lists every restore made from it.
const (
	ClusterMetaKey    = "clustermeta"
	BackupMetaKey     = "backupmeta"
	RestoreMetaPrefix = "restoremeta/"
	ManifestsPrefix   = "manifests/"
	// LogsPrefix holds the steps' saved logs (StepLogKey), with the agent's --save-step-logs.
	LogsPrefix = "logs/"
	// TombstoneKey is left by clean after it deleted everything else, so a retried clean
	// can tell "already cleaned" from "backupmeta lost".
	TombstoneKey = "cleaned"
)

// Size bounds of the objects read from storage: metadata is untrusted, and a reader never
// reads more than its object's bound plus one byte (blob.ErrTooLarge beyond it). They are far
// above what a real backup writes (a record of 1,000 stores with their Kubernetes objects is
// a few MiB).
const (
	// MaxRecordBytes bounds clustermeta, backupmeta and restoremeta.
	MaxRecordBytes = 32 << 20
	// MaxTombstoneBytes bounds the clean tombstone.
	MaxTombstoneBytes = 16 << 20
	// MaxManifestBytes bounds a saved Kubernetes manifest (etcd's own object limit is 1.5 MiB).
	MaxManifestBytes = 8 << 20
)

// ErrNotFound is returned (wrapped) for a missing object; it is blob.ErrNotFound.
var ErrNotFound = blob.ErrNotFound

// ErrExists is returned when a write-once object already holds different content.
var ErrExists = errors.New("a different object already exists")

// Store keeps a backup's metadata objects in one storage prefix (a blob.Store). Writes are
// atomic (the blob store's put), and the durable records are write-once: writing content
// equal to what is stored (ignoring fedbr.written_at) succeeds, so a retried step is not a
// failure, while different content is refused with ErrExists rather than overwriting it. The
// check and the write are two calls: fedbr runs one writer per prefix, so there is no race
// to lose in practice, but two concurrent writers of different content could both succeed.
type Store struct {
	blob blob.Store
	now  func() time.Time
}

// NewStore returns a store over b; now stamps fedbr.written_at (nil: time.Now).
func NewStore(b blob.Store, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{blob: b, now: now}
}

// Blob is the underlying byte store.
func (s *Store) Blob() blob.Store { return s.blob }

// PutClusterMeta writes the clustermeta. It is the snapshot step's input and may be replaced
// until a backupmeta exists (so a transient failure after writing it is retried, unlike
// upstream, which failed the backup for good); after that it is write-once.
func (s *Store) PutClusterMeta(ctx context.Context, r *Record) error {
	if err := r.ValidateCluster(); err != nil {
		return fmt.Errorf("put %s: %w", ClusterMetaKey, err)
	}
	_, err := s.blob.Get(ctx, BackupMetaKey, MaxRecordBytes)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return s.put(ctx, ClusterMetaKey, s.stamp(r))
	case err != nil:
		return fmt.Errorf("put %s: check for %s: %w", ClusterMetaKey, BackupMetaKey, err)
	}
	return s.putOnce(ctx, ClusterMetaKey, s.stamp(r))
}

// ClusterMeta reads and validates the clustermeta.
func (s *Store) ClusterMeta(ctx context.Context) (*Record, error) {
	r, err := s.get(ctx, ClusterMetaKey)
	if err != nil {
		return nil, err
	}
	if err := r.ValidateCluster(); err != nil {
		return nil, fmt.Errorf("read %s: %w", ClusterMetaKey, err)
	}
	return r, nil
}

// PutBackupMeta writes the backupmeta once: the "snapshots created" signal and the durable
// record of the backup. The snapshot step writes it pending (Extension.Snapshots) as soon as
// every snapshot started and then completes it with CompleteBackupMeta.
func (s *Store) PutBackupMeta(ctx context.Context, r *Record) error {
	if err := r.ValidateBackup(); err != nil {
		return fmt.Errorf("put %s: %w", BackupMetaKey, err)
	}
	return s.putOnce(ctx, BackupMetaKey, s.stamp(r))
}

// CompleteBackupMeta marks a pending backupmeta completed and returns it. This is the one
// rewrite the write-once rule allows: only the snapshots state changes, only from pending to
// completed, so nothing a reader already acted on (snapshot ids, resolved ts) can change.
// A backupmeta that is not pending is returned as it is, so a retried step succeeds.
func (s *Store) CompleteBackupMeta(ctx context.Context) (*Record, error) {
	r, err := s.get(ctx, BackupMetaKey)
	if err != nil {
		return nil, fmt.Errorf("complete %s: %w", BackupMetaKey, err)
	}
	if !r.Pending() {
		return r, nil
	}
	if err := r.ValidateBackup(); err != nil {
		return nil, fmt.Errorf("complete %s: %w", BackupMetaKey, err)
	}
	r.Fedbr.Snapshots = SnapshotsCompleted
	c := s.stamp(r)
	if err := s.put(ctx, BackupMetaKey, c); err != nil {
		return nil, fmt.Errorf("complete %s: %w", BackupMetaKey, err)
	}
	return c, nil
}

// AbandonBackupMeta deletes a pending backupmeta, after the snapshot step deleted the
// snapshots it lists, so a retry starts afresh and no reader takes it for a backup. A missing
// backupmeta is success; a completed one is refused with ErrExists.
func (s *Store) AbandonBackupMeta(ctx context.Context) error {
	r, err := s.get(ctx, BackupMetaKey)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("abandon %s: %w", BackupMetaKey, err)
	case !r.Pending():
		return fmt.Errorf("abandon %s: it is completed: %w", BackupMetaKey, ErrExists)
	}
	if err := s.blob.Delete(ctx, BackupMetaKey); err != nil {
		return fmt.Errorf("abandon %s: %w", BackupMetaKey, err)
	}
	return nil
}

// ErrIncomplete marks a backupmeta whose snapshots have not all completed.
var ErrIncomplete = errors.New("the backup's snapshots have not all completed")

// BackupMeta reads and validates the backupmeta of a completed backup; a pending one is
// ErrIncomplete (BackupMetaAsIs reads it).
func (s *Store) BackupMeta(ctx context.Context) (*Record, error) {
	r, err := s.get(ctx, BackupMetaKey)
	if err != nil {
		return nil, err
	}
	if err := r.ValidateBackup(); err != nil {
		return nil, fmt.Errorf("read %s: %w", BackupMetaKey, err)
	}
	if r.Pending() {
		return nil, fmt.Errorf("read %s of backup %s: %w", BackupMetaKey, r.Fedbr.BackupID, ErrIncomplete)
	}
	return r, nil
}

// BackupMetaAsIs reads the backupmeta without validating it, for clean, which needs only
// the snapshot ids of whatever was recorded (even a record a restore would refuse).
func (s *Store) BackupMetaAsIs(ctx context.Context) (*Record, error) {
	return s.get(ctx, BackupMetaKey)
}

// PutRestoreMeta writes the restoremeta of one restore once, recording restoreID in it.
func (s *Store) PutRestoreMeta(ctx context.Context, restoreID string, r *Record) error {
	if err := ValidateID(restoreID); err != nil {
		return fmt.Errorf("put restoremeta: %w", err)
	}
	key := RestoreMetaPrefix + restoreID
	if err := r.ValidateBackup(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if len(r.RestoredVolumes()) == 0 {
		return fmt.Errorf("put %s: %w: no restore_volume_id is set", key, ErrInvalid)
	}
	c := s.stamp(r)
	c.Fedbr.RestoreID = restoreID
	return s.putOnce(ctx, key, c)
}

// RestoreMeta reads the restoremeta of one restore.
func (s *Store) RestoreMeta(ctx context.Context, restoreID string) (*Record, error) {
	if err := ValidateID(restoreID); err != nil {
		return nil, fmt.Errorf("read restoremeta: %w", err)
	}
	return s.get(ctx, RestoreMetaPrefix+restoreID)
}

// Restores lists the ids of the restores that wrote a restoremeta.
func (s *Store) Restores(ctx context.Context) ([]string, error) {
	keys, err := s.blob.List(ctx, RestoreMetaPrefix)
	if err != nil {
		return nil, fmt.Errorf("list restores: %w", err)
	}
	ids := make([]string, 0, len(keys))
	for _, k := range keys {
		ids = append(ids, strings.TrimPrefix(k, RestoreMetaPrefix))
	}
	return ids, nil
}

// ManifestKey is the object name of a saved Kubernetes manifest.
func ManifestKey(namespace, kind, name string) string {
	return ManifestsPrefix + path.Join(namespace, kind, name+".yaml")
}

// PutManifest saves a Kubernetes manifest once; an existing one is kept (the first copy is
// the one taken with the backup) and its key returned.
func (s *Store) PutManifest(ctx context.Context, namespace, kind, name string, yaml []byte) (string, error) {
	for _, p := range []string{namespace, kind, name} {
		if p == "" || strings.ContainsAny(p, "/\\") || p == "." || p == ".." {
			return "", fmt.Errorf("put manifest %s/%s/%s: every part must be a non-empty name without slashes", namespace, kind, name)
		}
	}
	key := ManifestKey(namespace, kind, name)
	if len(yaml) > MaxManifestBytes {
		return "", fmt.Errorf("put manifest %s: %d bytes, more than %d", key, len(yaml), MaxManifestBytes)
	}
	_, err := s.blob.Get(ctx, key, MaxManifestBytes)
	switch {
	case err == nil:
		return key, nil
	case !errors.Is(err, blob.ErrNotFound):
		return "", fmt.Errorf("put manifest %s: %w", key, err)
	}
	if err := s.blob.Put(ctx, key, yaml); err != nil {
		return "", fmt.Errorf("put manifest %s: %w", key, err)
	}
	return key, nil
}

// Tombstone records that a backup was cleaned.
type Tombstone struct {
	BackupID string `json:"backup_id,omitempty"`
	// Snapshots are the snapshot ids the clean deleted (listed or found by tag).
	Snapshots []string  `json:"snapshots"`
	CleanedAt time.Time `json:"cleaned_at"`
}

// PutTombstone writes the tombstone (overwriting an older one).
func (s *Store) PutTombstone(ctx context.Context, t Tombstone) error {
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return fmt.Errorf("put %s: %w", TombstoneKey, err)
	}
	if err := s.blob.Put(ctx, TombstoneKey, append(b, '\n')); err != nil {
		return fmt.Errorf("put %s: %w", TombstoneKey, err)
	}
	return nil
}

// Tombstone reads the tombstone.
func (s *Store) Tombstone(ctx context.Context) (Tombstone, error) {
	b, err := s.blob.Get(ctx, TombstoneKey, MaxTombstoneBytes)
	if err != nil {
		return Tombstone{}, fmt.Errorf("read %s: %w", TombstoneKey, err)
	}
	t, err := ParseTombstone(b)
	if err != nil {
		return Tombstone{}, fmt.Errorf("read %s: %w", TombstoneKey, err)
	}
	return t, nil
}

// ParseTombstone reads a tombstone; its snapshot ids must be snapshot ids.
func ParseTombstone(b []byte) (Tombstone, error) {
	var t Tombstone
	if err := json.Unmarshal(b, &t); err != nil {
		return Tombstone{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	for i, id := range t.Snapshots {
		if !snapshotIDPattern.MatchString(id) {
			return Tombstone{}, fmt.Errorf("%w: snapshots[%d] %q: not an EBS snapshot id", ErrInvalid, i, id)
		}
	}
	return t, nil
}

// Keys lists every object of the prefix.
func (s *Store) Keys(ctx context.Context) ([]string, error) {
	keys, err := s.blob.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list metadata: %w", err)
	}
	return keys, nil
}

// StepLogKey is where the step running in pod saves its log (logs/<pod>.log); pod must be a
// valid identity (ValidateID).
func StepLogKey(pod string) (string, error) {
	if err := ValidateID(pod); err != nil {
		return "", fmt.Errorf("step log of pod %q: %w", pod, err)
	}
	return LogsPrefix + pod + ".log", nil
}

// MaxStepLogBytes bounds a saved step log read back: a step saves at most 1 MiB of its lines
// and a few lines about what it left out and how it ended.
const MaxStepLogBytes = 2 << 20

// StepLogs lists the pods whose saved logs are under the prefix, sorted.
func (s *Store) StepLogs(ctx context.Context) ([]string, error) {
	keys, err := s.blob.List(ctx, LogsPrefix)
	if err != nil {
		return nil, fmt.Errorf("list saved step logs: %w", err)
	}
	var pods []string
	for _, k := range keys {
		if name, ok := strings.CutPrefix(k, LogsPrefix); ok && Written(k) {
			pods = append(pods, strings.TrimSuffix(name, ".log"))
		}
	}
	return pods, nil
}

// StepLog reads the log the step running in pod saved, at most MaxStepLogBytes.
func (s *Store) StepLog(ctx context.Context, pod string) ([]byte, error) {
	key, err := StepLogKey(pod)
	if err != nil {
		return nil, err
	}
	b, err := s.blob.Get(ctx, key, MaxStepLogBytes)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	return b, nil
}

// Written says whether key (relative to the prefix) is an object fedbr writes for a backup:
// clustermeta, backupmeta, a manifest (manifests/<namespace>/<kind>/<name>.yaml), a restore's
// restoremeta (restoremeta/<restore id>) or a step's saved log (logs/<pod>.log). The tombstone
// is not among them (a clean keeps it).
func Written(key string) bool {
	switch key {
	case ClusterMetaKey, BackupMetaKey:
		return true
	}
	if name, ok := strings.CutPrefix(key, LogsPrefix); ok {
		pod, ok := strings.CutSuffix(name, ".log")
		return ok && ValidateID(pod) == nil
	}
	if id, ok := strings.CutPrefix(key, RestoreMetaPrefix); ok {
		return id != "" && !strings.Contains(id, "/")
	}
	if m, ok := strings.CutPrefix(key, ManifestsPrefix); ok {
		parts := strings.Split(m, "/")
		return len(parts) == 3 && parts[0] != "" && parts[1] != "" && strings.HasSuffix(parts[2], ".yaml") && parts[2] != ".yaml"
	}
	return false
}

// DeleteWritten deletes the objects of the prefix fedbr writes for a backup (Written),
// backupmeta last, so an interrupted delete still has the backupmeta to retry with. Everything
// else under the prefix stays: the prefix is a tenant's word, and may hold another backup's
// objects below it (a prefix naming another's parent folder) or objects no fedbr wrote. It
// returns the deleted keys and those it left (the tombstone not among them).
func (s *Store) DeleteWritten(ctx context.Context) (deleted, left []string, err error) {
	keys, err := s.Keys(ctx)
	if err != nil {
		return nil, nil, err
	}
	last := false
	for _, k := range keys {
		switch {
		case k == TombstoneKey:
			continue
		case !Written(k):
			left = append(left, k)
			continue
		case k == BackupMetaKey:
			last = true
			continue
		}
		if err := s.blob.Delete(ctx, k); err != nil {
			return deleted, left, fmt.Errorf("delete metadata %s: %w", k, err)
		}
		deleted = append(deleted, k)
	}
	if last {
		if err := s.blob.Delete(ctx, BackupMetaKey); err != nil {
			return deleted, left, fmt.Errorf("delete metadata %s: %w", BackupMetaKey, err)
		}
		deleted = append(deleted, BackupMetaKey)
	}
	return deleted, left, nil
}

// stamp returns a copy of r with fedbr's extension set and stamped.
func (s *Store) stamp(r *Record) *Record {
	c := r.Clone()
	if c.Fedbr == nil {
		c.Fedbr = &Extension{}
	}
	c.Fedbr.Version = FormatVersion
	c.Fedbr.WrittenAt = s.now().UTC().Truncate(time.Millisecond)
	return c
}

func (s *Store) get(ctx context.Context, key string) (*Record, error) {
	b, err := s.blob.Get(ctx, key, MaxRecordBytes)
	if errors.Is(err, blob.ErrTooLarge) {
		// too large is invalid, not unreachable: a retry reads the same object
		return nil, fmt.Errorf("read %s: %w: %w", key, ErrInvalid, err)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	r, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	if err := r.ValidateIDs(); err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	return r, nil
}

func (s *Store) put(ctx context.Context, key string, r *Record) error {
	b, err := r.Marshal()
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := s.blob.Put(ctx, key, b); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// putOnce writes key unless it exists; an existing object equal to r apart from its write
// time is success, anything else ErrExists.
func (s *Store) putOnce(ctx context.Context, key string, r *Record) error {
	old, err := s.blob.Get(ctx, key, MaxRecordBytes)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return s.put(ctx, key, r)
	case err != nil:
		return fmt.Errorf("put %s: %w", key, err)
	}
	prev, err := Parse(old)
	if err == nil && Equivalent(prev, r) {
		return nil
	}
	return fmt.Errorf("put %s: %w", key, ErrExists)
}

// Equivalent reports whether two records hold the same content, ignoring when they were
// written.
func Equivalent(a, b *Record) bool {
	return bytes.Equal(canonical(a), canonical(b))
}

func canonical(r *Record) []byte {
	c := r.Clone()
	if c.Fedbr != nil {
		c.Fedbr.WrittenAt = time.Time{}
		if e := c.Fedbr; e.BackupID == "" && e.RestoreID == "" && e.Cluster == "" && e.PDClusterID == 0 &&
			e.BackupStartTS == 0 && len(e.Manifests) == 0 && e.Snapshots == "" && len(e.Extra) == 0 {
			c.Fedbr = nil // an extension holding only its version adds nothing
		}
	}
	b, _ := json.Marshal(c)
	return b
}
