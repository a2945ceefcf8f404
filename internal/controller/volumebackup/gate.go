package volumebackup

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// The pause gate: one TiDB cluster is never paused by two backups at once (two schedules, or a
// schedule and a manual backup). Two backups pause the same cluster when they name the same
// TidbCluster (tcNamespace/tcName) in the same data plane (k8sClusterName). A backup passes
// the gate when it chooses its initializer (status.initializer), before it creates any
// member: a waiting backup runs no Job, and no pause Job's deadline ticks. It waits while
// another backup of the same cluster
//   - has passed the gate and has not lifted its pause (GCPaused not False; a finished backup
//     that never asked for the pause holds none), or
//   - has not passed the gate either but comes first (created earlier, then by
//     namespace/name) and neither finished nor is being deleted,
//
// and fails after spec.pauseWaitTimeout from its start. The order makes two waiting backups
// agree on which goes first.
//
// The manager's cache can miss another backup's pass for a moment (two backups created within
// the same second), so the gate is checked again before the pause starts: a backup that passed
// does not start its pause while another that passed comes first or already asked for its
// pause (GCPaused set).

// gateStage says which check runs: before any member exists, or before the pause starts.
type gateStage int

const (
	beforeMembers gateStage = iota
	beforePause
)

// blocker returns the other backup this one waits for at stage, if any.
func blocker(o Observed, stage gateStage, now time.Time) *fedv1alpha1.VolumeBackup {
	b := o.Backup
	var first *fedv1alpha1.VolumeBackup
	for _, a := range o.Others {
		if a.UID == b.UID && a.Namespace == b.Namespace && a.Name == b.Name || sharedCluster(a, b) == "" || pauseOver(a, now) {
			continue
		}
		passed := a.Status.Initializer != ""
		var waits bool
		switch stage {
		case beforeMembers:
			waits = passed || comesFirst(a, b) && !terminal(a) && a.DeletionTimestamp == nil
		case beforePause:
			waits = passed && (comesFirst(a, b) || pauseAsked(a))
		}
		if waits && (first == nil || comesFirst(a, first)) {
			first = a
		}
	}
	return first
}

// planGate is the gate at stage. When the backup must wait, the Ready condition names the
// backup it waits for and when it gives up, or, once pauseWaitTimeout has passed since its
// start, the backup fails; planGate then returns true and the plan stops there.
func planGate(o Observed, res *Result, now time.Time, stage gateStage) (stop bool) {
	a := blocker(o, stage, now)
	if a == nil {
		return false
	}
	b, st := o.Backup, &res.Status
	limit := b.Spec.EffectivePauseWaitTimeout()
	what := fmt.Sprintf("%s/%s, which pauses the same TiDB cluster (%s)", a.Namespace, a.Name, sharedCluster(a, b))
	if now.Sub(st.TimeStarted.Time) >= limit {
		*res = fail(o, *res, now, fedv1alpha1.VolumeBackupPauseWaitTimeoutReason, fmt.Sprintf("waited %s (pauseWaitTimeout) for %s to lift its pause", limit, what))
		return true
	}
	deadline := st.TimeStarted.Add(limit)
	setProgress(st, now, fedv1alpha1.VolumeBackupWaitingForBackupReason, fmt.Sprintf("waiting for %s to lift its pause before pausing it; failing at %s (pauseWaitTimeout %s)",
		what, deadline.UTC().Format(time.RFC3339), limit))
	res.RequeueAfter = deadline.Sub(now) // the other backup's changes wake this one sooner
	return true
}

// sharedCluster names a TidbCluster both backups name in the same data plane ("" if none).
func sharedCluster(a, b *fedv1alpha1.VolumeBackup) string {
	for _, ca := range a.Spec.Clusters {
		for _, cb := range b.Spec.Clusters {
			if ca == cb {
				return fmt.Sprintf("%s/%s in %s", ca.TCNamespace, ca.TCName, ca.K8sClusterName)
			}
		}
	}
	return ""
}

// SharesCluster says whether two backups pause the same TiDB cluster.
func SharesCluster(a, b *fedv1alpha1.VolumeBackup) bool { return sharedCluster(a, b) != "" }

// comesFirst orders backups for the gate: the earlier created, then by namespace and name.
func comesFirst(a, b *fedv1alpha1.VolumeBackup) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c < 0
	}
	return a.Name < b.Name
}

// pauseOver says a backup holds no pause and will take none: GCPaused is False (lifted), it
// finished without ever asking for the pause, or its pause cannot hold any more whatever its
// status says (an initializer plane gone for good never reports the lift): the pause Job
// started before GCPaused was last set and is stopped at volumeBackupInitJobMaxActiveSeconds,
// and what it held lapses within pauseLapse.
func pauseOver(a *fedv1alpha1.VolumeBackup, now time.Time) bool {
	c := meta.FindStatusCondition(a.Status.Conditions, fedv1alpha1.VolumeBackupGCPausedCondition)
	switch {
	case c == nil:
		return terminal(a)
	case c.Status == metav1.ConditionFalse:
		return true
	}
	return now.After(c.LastTransitionTime.Add(a.Spec.Template.EffectiveInitJobDeadline() + pauseLapse))
}

// pauseLapse is how long what a stopped or killed pause held stays in PD at most: the pause's
// TTL (fedbr br pause --ttl, 2m by default as the agent runs it) and a margin.
const pauseLapse = 3 * time.Minute

// pauseAsked says the backup asked its initializer to pause (GCPaused Unknown) or holds the
// pause (True).
func pauseAsked(a *fedv1alpha1.VolumeBackup) bool {
	c := meta.FindStatusCondition(a.Status.Conditions, fedv1alpha1.VolumeBackupGCPausedCondition)
	return c != nil && c.Status != metav1.ConditionFalse
}

// terminal says the backup completed or failed.
func terminal(a *fedv1alpha1.VolumeBackup) bool {
	return meta.IsStatusConditionTrue(a.Status.Conditions, fedv1alpha1.VolumeBackupCompleteCondition) ||
		meta.IsStatusConditionTrue(a.Status.Conditions, fedv1alpha1.VolumeBackupFailedCondition)
}

// NeedsOthers says whether planning b needs the other backups (the gate has not been passed
// for good: the pause has not been asked for yet).
func NeedsOthers(b *fedv1alpha1.VolumeBackup) bool {
	return b.DeletionTimestamp == nil && !terminal(b) && !pauseAsked(b)
}

// ClusterIndex is the field index of VolumeBackups by the TidbClusters they back up
// (clusterKeys: data plane, namespace and name of each), registered with the manager's cache
// by IndexClusters. The pause gate reads the backups of the same TidbClusters through it
// instead of listing every VolumeBackup of the control plane, which a schedule run for months
// fills with thousands (issue 44). Only a backup the gate may still care about is indexed
// (atTheGate): every backup's status write asks for the others, and reading a cluster's
// finished backups each time is quadratic in them.
const ClusterIndex = "fedbr.spec.clusters.tidbCluster"

// atTheGate says the pause gate may care about the backup: it has not finished (it may wait, or
// pause), or it holds a pause or may still (GCPaused True or Unknown; pauseOver judges the
// time it could still hold). A finished backup whose pause was lifted, or that never asked
// for one, never counts again: nothing moves a finished backup's conditions back.
func atTheGate(b *fedv1alpha1.VolumeBackup) bool { return !terminal(b) || pauseAsked(b) }

// clusterKeys are the index values of a VolumeBackup at the gate: one per cluster it names.
func clusterKeys(o client.Object) []string {
	b, ok := o.(*fedv1alpha1.VolumeBackup)
	if !ok || !atTheGate(b) {
		return nil
	}
	keys := make([]string, 0, len(b.Spec.Clusters))
	for _, c := range b.Spec.Clusters {
		keys = append(keys, clusterKey(c))
	}
	return keys
}

// clusterKey is the index value of one cluster: its plane, namespace and TidbCluster, none of
// which can hold a slash.
func clusterKey(c fedv1alpha1.VolumeBackupMemberCluster) string {
	return c.K8sClusterName + "/" + c.TCNamespace + "/" + c.TCName
}

// IndexClusters registers ClusterIndex with the manager's cache; call it before the cache starts.
func IndexClusters(ctx context.Context, i client.FieldIndexer) error {
	return i.IndexField(ctx, &fedv1alpha1.VolumeBackup{}, ClusterIndex, clusterKeys)
}

// sharing lists the backups other than b at the gate (atTheGate) that name one of b's
// TidbClusters (SharesCluster), through ClusterIndex, each once.
func sharing(ctx context.Context, c client.Reader, b *fedv1alpha1.VolumeBackup) ([]*fedv1alpha1.VolumeBackup, error) {
	var out []*fedv1alpha1.VolumeBackup
	seen := map[types.UID]bool{b.UID: true}
	for _, cl := range b.Spec.Clusters {
		var list fedv1alpha1.VolumeBackupList
		if err := c.List(ctx, &list, client.MatchingFields{ClusterIndex: clusterKey(cl)}); err != nil {
			return nil, err
		}
		for i := range list.Items {
			if a := &list.Items[i]; !seen[a.UID] && SharesCluster(a, b) {
				seen[a.UID] = true
				out = append(out, a)
			}
		}
	}
	return out, nil
}
