// Package cloud is fedbr's vocabulary for the block-storage cloud: snapshot an instance's data
// volumes crash-consistently, wait for them with progress, size them, restore volumes from
// them (optionally with fast snapshot restore), and delete what was created. Implementations
// (package aws) keep every cloud SDK type behind these interfaces, so the engine and its tests
// speak only this package.
package cloud

import (
	"context"
	"strings"
	"time"
)

// SnapshotState is the life cycle state of a snapshot.
type SnapshotState string

// Snapshot states as the cloud reports them.
const (
	SnapshotPending   SnapshotState = "pending"
	SnapshotCompleted SnapshotState = "completed"
	SnapshotError     SnapshotState = "error"
)

// Snapshot is one volume snapshot.
type Snapshot struct {
	ID       string
	VolumeID string
	State    SnapshotState
	// Message explains an error state.
	Message string
	// Progress is the completion percentage, 0–100.
	Progress float64
	// SizeGiB is the size of the source volume.
	SizeGiB int32
	// FullSizeBytes is the written (full, not incremental) size; valid when FullSizeKnown
	// (older AWS answers leave it out and the blocks must be listed).
	FullSizeBytes int64
	FullSizeKnown bool
	Started       time.Time
	// Completed is when AWS completed it (completionTime); zero while it is pending, or when
	// the answer leaves the field out.
	Completed time.Time
	// Tags are the snapshot's tags as this account sees them (a snapshot another account
	// shares shows none of its owner's).
	Tags map[string]string
	// OwnerID is the account that owns the snapshot; Owned says it is the account the
	// provider acts for (what DescribeSnapshots finds with OwnerIds=self). Only an owned
	// snapshot is ever fedbr's to restore from or delete (see meta.Record.CheckSnapshots).
	OwnerID string
	Owned   bool
	// StartCall is how long the call that started it took (its set's CreateSnapshots, with
	// the SDK's retries); zero on snapshots only described. The slowest such call is the
	// physical floor of a GC pause window.
	StartCall time.Duration
	// AfterLostAnswer marks a snapshot its set's call returned only after an earlier attempt of
	// the call lost its answer (CreateSnapshots takes no client token): that attempt may have
	// started a set of its own that AWS does not show yet.
	AfterLostAnswer bool
}

// SnapshotRequest asks for one crash-consistent snapshot set of an instance's data volumes.
type SnapshotRequest struct {
	InstanceID string
	// VolumeIDs are the data volumes to capture; every other volume attached to the instance
	// (root, volumes of other stores) is excluded.
	VolumeIDs []string
	// Tags are added to each snapshot on top of the tags copied from its source volume; they
	// carry fedbr's backup identity.
	Tags        map[string]string
	Description string
}

// SnapshotTagCount is how many tags a snapshot of a volume carrying volumeTags gets when it is
// started with tags: the snapshot copies every tag of its volume, and a tag given for the
// snapshot replaces the copied one of the same key. More than MaxTags fails the snapshot.
func SnapshotTagCount(volumeTags, tags map[string]string) int {
	n := len(volumeTags)
	for k := range tags {
		if _, ok := volumeTags[k]; !ok {
			n++
		}
	}
	return n
}

// Progress is a snapshot of a wait's progress.
type Progress struct {
	Done  int
	Total int
	// Percent averages the per-item progress.
	Percent float64
}

// Volume is one block volume.
type Volume struct {
	ID           string
	AZ           string
	State        string
	SnapshotID   string
	Type         string
	SizeGiB      int32
	IOPS         int32
	Throughput   int32
	Encrypted    bool
	KMSKeyID     string
	FastRestored bool
	Tags         map[string]string
	Attachments  []Attachment
	// Created is when the volume was created (zero when the cloud did not say).
	Created time.Time
}

// Volume states fedbr waits for.
const (
	VolumeAvailable = "available"
	VolumeInUse     = "in-use"
	VolumeError     = "error"
)

// Attachment places a volume on an instance.
type Attachment struct {
	InstanceID string
	VolumeID   string
	Device     string
}

// Instance is a compute instance with its block devices.
type Instance struct {
	ID         string
	AZ         string
	RootDevice string
	Devices    []Attachment
}

// VolumeSpec describes a volume to create from a snapshot.
type VolumeSpec struct {
	SnapshotID string
	AZ         string
	// Type is the volume type (gp3, io1, io2, ...); empty means the cloud default.
	Type string
	// IOPS and Throughput (MiB/s) are left to the cloud default when 0.
	IOPS       int32
	Throughput int32
	Encrypted  bool
	// KMSKeyID selects the encryption key; empty means the account default key.
	KMSKeyID string
	Tags     map[string]string
}

// FSRState is the fast snapshot restore state of a snapshot in one AZ.
type FSRState struct {
	SnapshotID string
	AZ         string
	// State is enabling, optimizing, enabled, disabling or disabled.
	State string
}

// FSRRefusal is a snapshot-AZ pair AWS did not enable fast snapshot restore for: an
// Unsuccessful item of EnableFastSnapshotRestores, with AWS's code and message (the account's
// FSR quota reached, a snapshot over 16 TiB, ...).
type FSRRefusal struct {
	SnapshotID string
	AZ         string
	Code       string
	Message    string
}

// Reason is the refusal in words: AWS's code and message.
func (r FSRRefusal) Reason() string {
	return strings.TrimSpace("AWS refused it: " + r.Code + " " + r.Message)
}

// Size is what a snapshot adds to storage.
type Size struct {
	// FullBytes is the written size of the volume image.
	FullBytes int64
	// IncrementalBytes is the size of the blocks changed since the previous snapshot, or
	// FullBytes when there is none.
	IncrementalBytes int64
	// Elapsed is how long this snapshot's sizing took once its turn came (its block listings
	// and their throttling retries; near zero when the describe gave the full size and no
	// incremental size was asked).
	Elapsed time.Duration
}

// PreparedSnapshots is what starting snapshot sets needs, read ahead of time.
type PreparedSnapshots struct {
	Requests []SnapshotRequest
	// Instances by id, and the tags of the requested volumes by volume id.
	Instances  map[string]Instance
	VolumeTags map[string]map[string]string
}

// Snapshots takes, watches and deletes snapshots.
type Snapshots interface {
	// SnapshotInstance starts one crash-consistent snapshot set for the request's volumes.
	SnapshotInstance(ctx context.Context, req SnapshotRequest) ([]Snapshot, error)
	// SnapshotInstances starts the snapshot sets of many instances with batched describes;
	// the result is in the order of reqs. On error, the sets started so far are returned
	// with it (nil for the others). It is PrepareSnapshotInstances then StartSnapshotInstances.
	SnapshotInstances(ctx context.Context, reqs []SnapshotRequest) ([][]Snapshot, error)
	// PrepareSnapshotInstances reads ahead of time what starting the sets needs (the
	// instances' devices, the volumes' tags) and checks the requests against it, so that a
	// caller holding a pause starts them with nothing but the snapshot calls.
	PrepareSnapshotInstances(ctx context.Context, reqs []SnapshotRequest) (*PreparedSnapshots, error)
	// StartSnapshotInstances starts prepared sets, as SnapshotInstances does. A device
	// attached or detached since the preparation makes the provider's call fail or leaves a
	// volume without a snapshot, which the caller checks; it never snapshots silently less.
	StartSnapshotInstances(ctx context.Context, prep *PreparedSnapshots) ([][]Snapshot, error)
	// WaitSnapshots waits until all snapshots completed, reporting progress; a snapshot in
	// error state fails the wait at once.
	WaitSnapshots(ctx context.Context, ids []string, report func(Progress)) ([]Snapshot, error)
	// DescribeSnapshots returns the snapshots among ids that this account can see, its own
	// and those other accounts share with it (Owned tells them apart); missing ones are left
	// out.
	DescribeSnapshots(ctx context.Context, ids []string) ([]Snapshot, error)
	// ListSnapshots finds the account's snapshots carrying all the given tags (the sweeper's
	// view: what a backup identity left behind).
	ListSnapshots(ctx context.Context, tags map[string]string) ([]Snapshot, error)
	// DeleteSnapshots deletes snapshots; one already gone counts as deleted.
	DeleteSnapshots(ctx context.Context, ids []string) error
	// UntagSnapshots removes the tags with the given keys, whatever their values, from
	// snapshots; a key a snapshot does not carry is no error.
	UntagSnapshots(ctx context.Context, ids, keys []string) error
}

// Volumes creates, watches and deletes volumes.
type Volumes interface {
	CreateVolume(ctx context.Context, spec VolumeSpec) (Volume, error)
	// WaitVolumes waits until all volumes are available; a volume in error state fails it.
	WaitVolumes(ctx context.Context, ids []string) ([]Volume, error)
	DescribeVolumes(ctx context.Context, ids []string) ([]Volume, error)
	// ListVolumes finds the volumes carrying all the given tags.
	ListVolumes(ctx context.Context, tags map[string]string) ([]Volume, error)
	// DeleteVolumes deletes volumes; one already gone counts as deleted.
	DeleteVolumes(ctx context.Context, ids []string) error
	// UntagVolumes removes the tags with the given keys, whatever their values, from volumes;
	// a key a volume does not carry is no error.
	UntagVolumes(ctx context.Context, ids, keys []string) error
	DescribeInstance(ctx context.Context, id string) (Instance, error)
}

// FastRestores manages fast snapshot restore (FSR).
type FastRestores interface {
	// EnableFSR enables FSR for the snapshots in az. A snapshot AWS answers as Unsuccessful
	// (over the account's quota, too large) is returned in refused, not as an error: the
	// error is for a call that failed as a whole.
	EnableFSR(ctx context.Context, az string, snapshotIDs []string) (enabled []FSRState, refused []FSRRefusal, err error)
	// DescribeFSR returns the FSR states of the snapshots in every AZ; no snapshot ids is
	// every FSR of the account-region (what uses its quota).
	DescribeFSR(ctx context.Context, snapshotIDs []string) ([]FSRState, error)
	// WaitFSR waits until FSR is enabled for every snapshot in az with at least one credit
	// each; a snapshot whose FSR is missing, disabling or disabled fails the wait.
	WaitFSR(ctx context.Context, az string, snapshotIDs []string, report func(Progress)) error
	DisableFSR(ctx context.Context, az string, snapshotIDs []string) error
	// FSRCredits is the current credit balance of a snapshot in an AZ.
	FSRCredits(ctx context.Context, snapshotID, az string) (float64, error)
}

// SizeRequest names a completed snapshot to size and, when PreviousID is not empty, the
// previous completed snapshot of the same volume for the incremental size.
type SizeRequest struct {
	SnapshotID string
	PreviousID string
}

// Sizer computes snapshot sizes.
type Sizer interface {
	// SnapshotSizes sizes completed snapshots, in the order of reqs.
	SnapshotSizes(ctx context.Context, reqs []SizeRequest) ([]Size, error)
}

// Provider is everything fedbr needs from a cloud.
type Provider interface {
	Snapshots
	Volumes
	FastRestores
	Sizer
}
