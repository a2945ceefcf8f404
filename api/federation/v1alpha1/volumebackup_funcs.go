package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of optional template fields. They live here, not in the CRD schema, so that a
// manifest round-trips unchanged and the defaults can be documented in one place.
const (
	DefaultInitJobMaxActiveSeconds = 600
	DefaultSnapshotsDeleteRatio    = 1.0
	// DefaultStepTimeout is the ceiling on a member step and a member phase: a sync warm-up of
	// 16 TiB at gp3's baseline 125 MiB/s takes about 37 h, and fits with room to spare.
	DefaultStepTimeout = 72 * time.Hour
	// DefaultStallTimeout is how long a long step (the snapshot step's wait, a warm-up TiKV
	// waits for) may report no progress. EBS reports a snapshot's progress in whole percents:
	// one percent of a 16 TiB first snapshot at the 33-56 MB/s first snapshots were measured
	// at is 50 min to 1.5 h, and AWS's progress is not linear; 6 h is four times that.
	DefaultStallTimeout     = 6 * time.Hour
	DefaultPauseWaitTimeout = 30 * time.Minute
	DefaultCleanPolicy      = CleanPolicyRetain
	DefaultCalcSizeLevel    = CalcSizeAll
	DefaultWarmupStrategy   = RestoreWarmupStrategyHybrid
)

// AnnotationForceRemove on a deleted VolumeBackup or VolumeRestore lets it go although some data
// planes could not confirm that their members (and what those hold) are gone.
const AnnotationForceRemove = "fedbr.io/force-remove"

// MemberName is the name of the member object a VolumeBackup or VolumeRestore creates in every
// data plane. It is deterministic, so a stale cache yields AlreadyExists, never a duplicate.
func MemberName(name string) string {
	return "fed-" + name
}

// Started says the operation has started; from then on its clusters and storage are frozen.
func (b *VolumeBackup) Started() bool {
	return b.Status.TimeStarted != nil
}

// RestoreClusters are the clusters of a restore of b into namespace into of every plane: one per
// cluster of b, each restoring from the storage its member wrote into the TidbCluster tcName
// ("": the backed-up one's name).
func (b *VolumeBackup) RestoreClusters(into, tcName string) []VolumeRestoreMemberCluster {
	out := make([]VolumeRestoreMemberCluster, 0, len(b.Spec.Clusters))
	for _, c := range b.Spec.Clusters {
		tc := tcName
		if tc == "" {
			tc = c.TCName
		}
		out = append(out, VolumeRestoreMemberCluster{K8sClusterName: c.K8sClusterName, TCName: tc, TCNamespace: into,
			Backup: b.Spec.Template.MemberStorage(c.K8sClusterName)})
	}
	return out
}

// MemberStorage is where the member in cluster k8sClusterName writes: the template's storage
// with the prefix suffixed by -<k8sClusterName>, so that members never overwrite each other's
// metadata. Upstream did this for S3 only; fedbr does it for every provider.
func (t *VolumeBackupMemberSpec) MemberStorage(k8sClusterName string) StorageProvider {
	return t.WithPrefix(func(p string) string {
		if p == "" {
			return k8sClusterName
		}
		return p + "-" + k8sClusterName
	})
}

// WithPrefix is a copy of sp whose provider's prefix is f of the prefix it has.
func (sp *StorageProvider) WithPrefix(f func(string) string) StorageProvider {
	out := *sp.DeepCopy()
	switch {
	case out.S3 != nil:
		out.S3.Prefix = f(out.S3.Prefix)
	case out.Gcs != nil:
		out.Gcs.Prefix = f(out.Gcs.Prefix)
	case out.Azblob != nil:
		out.Azblob.Prefix = f(out.Azblob.Prefix)
	case out.Local != nil:
		out.Local.Prefix = f(out.Local.Prefix)
	}
	return out
}

// EffectiveCleanPolicy is CleanPolicy with its default applied.
func (t *VolumeBackupMemberSpec) EffectiveCleanPolicy() CleanPolicyType {
	if t.CleanPolicy == "" {
		return DefaultCleanPolicy
	}
	return t.CleanPolicy
}

// EffectiveCalcSizeLevel is CalcSizeLevel with its default applied.
func (t *VolumeBackupMemberSpec) EffectiveCalcSizeLevel() CalcSizeLevel {
	if t.CalcSizeLevel == "" {
		return DefaultCalcSizeLevel
	}
	return t.CalcSizeLevel
}

// EffectiveInitJobDeadline is how long the pause may be held.
func (t *VolumeBackupMemberSpec) EffectiveInitJobDeadline() time.Duration {
	if t.VolumeBackupInitJobMaxActiveSeconds == nil {
		return DefaultInitJobMaxActiveSeconds * time.Second
	}
	return time.Duration(*t.VolumeBackupInitJobMaxActiveSeconds) * time.Second
}

// EffectiveSnapshotsDeleteRatio is the snapshot deletions per second per member.
func (t *VolumeBackupMemberSpec) EffectiveSnapshotsDeleteRatio() float64 {
	if t.SnapshotsDeleteRatio == nil {
		return DefaultSnapshotsDeleteRatio
	}
	return *t.SnapshotsDeleteRatio
}

// EffectiveStepTimeout is the bound on one member step.
func (t *VolumeBackupMemberSpec) EffectiveStepTimeout() time.Duration {
	return stepTimeout(t.StepTimeout)
}

// EffectivePauseWaitTimeout is how long the backup waits for another backup's pause of the
// same TiDB cluster.
func (s *VolumeBackupSpec) EffectivePauseWaitTimeout() time.Duration {
	if s.PauseWaitTimeout == nil || s.PauseWaitTimeout.Duration <= 0 {
		return DefaultPauseWaitTimeout
	}
	return s.PauseWaitTimeout.Duration
}

// Started says the restore has started; from then on its clusters are frozen.
func (r *VolumeRestore) Started() bool {
	return r.Status.TimeStarted != nil
}

// EffectiveWarmupStrategy is WarmupStrategy with its default applied.
func (t *VolumeRestoreMemberSpec) EffectiveWarmupStrategy() RestoreWarmupStrategy {
	if t.WarmupStrategy == "" {
		return DefaultWarmupStrategy
	}
	return t.WarmupStrategy
}

// WarmsUpBeforeTiKV says TiKV waits for the warm-up: a sync warm-up, and any check-wal-only
// warm-up (TiKV must not start on a log that fails the check).
func (t *VolumeRestoreMemberSpec) WarmsUpBeforeTiKV() bool {
	return t.Warmup == RestoreWarmupSync || t.Warmup != RestoreWarmupNone && t.EffectiveWarmupStrategy() == RestoreWarmupStrategyCheckWALOnly
}

// EffectiveStepTimeout is the bound on one member step.
func (t *VolumeRestoreMemberSpec) EffectiveStepTimeout() time.Duration {
	return stepTimeout(t.StepTimeout)
}

// EffectiveStallTimeout is how long the snapshot step's wait may go without progress.
func (t *VolumeBackupMemberSpec) EffectiveStallTimeout() time.Duration {
	return positiveOr(t.StallTimeout, DefaultStallTimeout)
}

// EffectiveStallTimeout is how long a warm-up TiKV waits for may go without progress.
func (t *VolumeRestoreMemberSpec) EffectiveStallTimeout() time.Duration {
	return positiveOr(t.StallTimeout, DefaultStallTimeout)
}

func stepTimeout(d *metav1.Duration) time.Duration {
	return positiveOr(d, DefaultStepTimeout)
}

// positiveOr is d, or def when d is unset or not positive.
func positiveOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return def
	}
	return d.Duration
}
