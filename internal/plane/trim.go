package plane

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
)

// What a data plane's cache keeps.
//
// A plane's cache holds every VolumeBackupMember and VolumeRestoreMember of that cluster, and what
// a member holds is written by others: its status by the agent and, in status.steps, by the steps,
// whose service account a namespace editor can act as. The CRDs bound most of it, but a member can
// still be as large as the API server stores (about 1.5 MiB: status.steps' schemaless backup and
// result, 20,000 status.tikvVolumes, 16 conditions of 32 KiB, labels, annotations, managedFields).
// So the cache keeps of a member only what the manager reads, and every other field is dropped as
// the object enters the cache (TrimBackupMember, TrimRestoreMember): a padded member costs the
// manager its decoding, once per event, never its size for as long as it exists.
//
// What is kept, and who reads it (internal/controller):
//   - metadata: name, namespace, uid, resourceVersion, generation, creation and deletion
//     timestamps; the three owner labels (federation.OwnerRequest, CheckOwner); the phase-since
//     annotation (federation.PhaseSince), rewritten in its shortest RFC 3339 form (the same
//     instant: an RFC 3339 time may carry any number of fraction digits) or dropped when it is no
//     time, which PhaseSince reads as no time either.
//   - spec: phase, backupTS, startPause, resumeGC, backupFailed (backup); phase, dataMember,
//     resolvedTS (restore): what observe copies into the planners' Member.
//   - status of a backup member: phase, backupPath, commitTs, backupSize, incrementalBackupSize
//     (volumebackup.aggregate); the conditions Failed and Cleaned with their reason and message,
//     Complete and GCResumed with their status only; the pause step's phase, backupTS,
//     gcPausedAt and liftedAt (pausedTS, aggregate) and the snapshot step's phase and startedAt
//     (snapshotArmed, SnapshotsStarted).
//   - status of a restore member: phase, commitTs (volumerestore.aggregate, dataMember),
//     restoredTS (planData's check of restore-data's echo; the CRD bounds it to 20 bytes); the
//     conditions Failed, WarmUpComplete and Checked (volumerestore.checked) with their reason and
//     message, WarmUpStarted,
//     TikvComplete, DataComplete and Complete with their status only. The manager reads no step
//     of a restore member.
//
// Everything else is dropped: managedFields, finalizers, owner references, other labels and
// annotations, the spec's template and storage, status.tikvVolumes, counts and times, other
// conditions, other steps and every other field of the two kept steps (error, backup, result, the
// pause's identity).
//
// Of what is kept, the CRDs bound every string (a condition's reason 1 KiB and message 32 KiB, a
// step's phase 32 bytes, label values 63) but three that the manager copies whole: status.phase,
// status.commitTs and a backup member's status.backupPath. A member whose one of those is longer
// than MaxMemberPhase, MaxMemberCommitTs or MaxMemberBackupPath is refused: its cached status is
// only a Failed condition with reason StatusTooLargeReason naming the field, so its backup or
// restore fails saying why, and nothing else of its status is kept. So a cached member holds at
// most about 80 KiB whatever it is padded with (plane's TestPaddedMembersKeepTheCacheSmall).
//
// A cached member is a partial view: it is never written back (the controllers create members,
// patch fields of a reference holding only name and namespace, and read the member again from
// the API server where they need it whole).

// The longest status.phase, status.commitTs and (backup members) status.backupPath the manager
// keeps of a member. What the agent writes is far shorter: a one-word phase, a decimal TSO (at
// most 20 digits), and the step's --storage (s3://<bucket ≤255>/<prefix ≤1024>, or a local mount
// path and prefix).
const (
	MaxMemberPhase      = 64
	MaxMemberCommitTs   = 32
	MaxMemberBackupPath = 8192
)

// StatusTooLargeReason is the reason of the Failed condition a cached member carries in place of
// a status with a field longer than the manager keeps.
const StatusTooLargeReason = "StatusTooLarge"

// CacheOptions are a data plane's cache options for scheme: managedFields stripped from every
// object, and members trimmed to what the manager reads (for the member kinds scheme knows).
func CacheOptions(scheme *runtime.Scheme) cache.Options {
	o := cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: map[client.Object]cache.ByObject{}}
	for obj, f := range map[client.Object]toolscache.TransformFunc{
		&dpv1alpha1.VolumeBackupMember{}:  trimming(TrimBackupMember),
		&dpv1alpha1.VolumeRestoreMember{}: trimming(TrimRestoreMember),
	} {
		if _, _, err := scheme.ObjectKinds(obj); err == nil {
			o.ByObject[obj] = cache.ByObject{Transform: f}
		}
	}
	return o
}

// trimming makes trim a cache transform; anything but a *T (a deletion tombstone, whose object
// was trimmed when it entered the cache) passes as it is.
func trimming[T any](trim func(*T) *T) toolscache.TransformFunc {
	return func(in any) (any, error) {
		if m, ok := in.(*T); ok {
			return trim(m), nil
		}
		return in, nil
	}
}

// TrimBackupMember returns what the manager keeps of m (see above). It shares m's strings and
// times, and trimming its result again returns the same.
func TrimBackupMember(m *dpv1alpha1.VolumeBackupMember) *dpv1alpha1.VolumeBackupMember {
	out := &dpv1alpha1.VolumeBackupMember{TypeMeta: m.TypeMeta, ObjectMeta: keptMeta(&m.ObjectMeta),
		Spec: dpv1alpha1.VolumeBackupMemberSpec{Phase: m.Spec.Phase, BackupTS: m.Spec.BackupTS, StartPause: m.Spec.StartPause,
			ResumeGC: m.Spec.ResumeGC, BackupFailed: m.Spec.BackupFailed}}
	st := &m.Status
	if c := tooLarge(dpv1alpha1.BackupMemberFailedCondition, []field{{"phase", st.Phase, MaxMemberPhase},
		{"commitTs", st.CommitTs, MaxMemberCommitTs}, {"backupPath", st.BackupPath, MaxMemberBackupPath}}); c != nil {
		out.Status.Conditions = []metav1.Condition{*c}
		return out
	}
	out.Status = dpv1alpha1.VolumeBackupMemberStatus{Phase: st.Phase, BackupPath: st.BackupPath, CommitTs: st.CommitTs,
		BackupSize: st.BackupSize, IncrementalBackupSize: st.IncrementalBackupSize,
		Conditions: keptConditions(st.Conditions, map[string]bool{
			dpv1alpha1.BackupMemberFailedCondition:    true,
			dpv1alpha1.BackupMemberCleanedCondition:   true,
			dpv1alpha1.BackupMemberCompleteCondition:  false,
			dpv1alpha1.BackupMemberGCResumedCondition: false,
		})}
	if s, ok := dpv1alpha1.Step(st.Steps, dpv1alpha1.StepPause); ok {
		out.Status.Steps = append(out.Status.Steps, dpv1alpha1.StepReport{Name: s.Name, Phase: s.Phase, BackupTS: s.BackupTS,
			GCPausedAt: s.GCPausedAt, LiftedAt: s.LiftedAt})
	}
	if s, ok := dpv1alpha1.Step(st.Steps, dpv1alpha1.StepSnapshot); ok {
		out.Status.Steps = append(out.Status.Steps, dpv1alpha1.StepReport{Name: s.Name, Phase: s.Phase, StartedAt: s.StartedAt})
	}
	return out
}

// TrimRestoreMember returns what the manager keeps of m (see above), as TrimBackupMember.
func TrimRestoreMember(m *dpv1alpha1.VolumeRestoreMember) *dpv1alpha1.VolumeRestoreMember {
	out := &dpv1alpha1.VolumeRestoreMember{TypeMeta: m.TypeMeta, ObjectMeta: keptMeta(&m.ObjectMeta),
		Spec: dpv1alpha1.VolumeRestoreMemberSpec{Phase: m.Spec.Phase, DataMember: m.Spec.DataMember, ResolvedTS: m.Spec.ResolvedTS}}
	st := &m.Status
	if c := tooLarge(dpv1alpha1.RestoreMemberFailedCondition, []field{{"phase", st.Phase, MaxMemberPhase},
		{"commitTs", st.CommitTs, MaxMemberCommitTs}}); c != nil {
		out.Status.Conditions = []metav1.Condition{*c}
		return out
	}
	out.Status = dpv1alpha1.VolumeRestoreMemberStatus{Phase: st.Phase, CommitTs: st.CommitTs, RestoredTS: st.RestoredTS,
		Conditions: keptConditions(st.Conditions, map[string]bool{
			dpv1alpha1.RestoreMemberFailedCondition:         true,
			dpv1alpha1.RestoreMemberWarmUpCompleteCondition: true,
			dpv1alpha1.RestoreMemberWarmUpStartedCondition:  false,
			dpv1alpha1.RestoreMemberTikvCompleteCondition:   false,
			dpv1alpha1.RestoreMemberDataCompleteCondition:   false,
			dpv1alpha1.RestoreMemberCompleteCondition:       false,
			dpv1alpha1.RestoreMemberCheckedCondition:        true,
		})}
	return out
}

// keptMeta is what the manager keeps of a member's metadata.
func keptMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp}
	for _, k := range []string{dpv1alpha1.LabelOwnerName, dpv1alpha1.LabelOwnerNamespace, dpv1alpha1.LabelOwnerUID} {
		if v, ok := m.Labels[k]; ok {
			if out.Labels == nil {
				out.Labels = map[string]string{}
			}
			out.Labels[k] = v
		}
	}
	if t, err := time.Parse(time.RFC3339, m.Annotations[dpv1alpha1.AnnotationPhaseSince]); err == nil {
		out.Annotations = map[string]string{dpv1alpha1.AnnotationPhaseSince: t.Format(time.RFC3339Nano)}
	}
	return out
}

// keptConditions keeps the first condition of each type in keep, its type and status, and its
// reason and message where keep says the manager reads them.
func keptConditions(cs []metav1.Condition, keep map[string]bool) []metav1.Condition {
	var out []metav1.Condition
	seen := map[string]bool{}
	for _, c := range cs {
		text, ok := keep[c.Type]
		if !ok || seen[c.Type] {
			continue
		}
		seen[c.Type] = true
		k := metav1.Condition{Type: c.Type, Status: c.Status}
		if text {
			k.Reason, k.Message = c.Reason, c.Message
		}
		out = append(out, k)
	}
	return out
}

// field is a status string the manager copies whole, with the longest it keeps.
type field struct {
	name  string
	value string
	max   int
}

// tooLarge returns the Failed condition (of type failed) that refuses a status with a field
// longer than its bound, nil when every field fits.
func tooLarge(failed string, fields []field) *metav1.Condition {
	for _, f := range fields {
		if len(f.value) > f.max {
			return &metav1.Condition{Type: failed, Status: metav1.ConditionTrue, Reason: StatusTooLargeReason,
				Message: fmt.Sprintf("status.%s is %d bytes, more than the %d the manager reads of it: the manager ignores this member's status", f.name, len(f.value), f.max)}
		}
	}
	return nil
}
