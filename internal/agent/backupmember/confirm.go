package backupmember

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	brsnapshot "github.com/fedbr/fedbr/internal/br/snapshot"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/meta"
)

// A step's report in status.steps is written with the step's service account, which anyone who
// can run a pod as it, or impersonate it, can use too. So the agent completes a member only
// once it found, itself, that the snapshots the report names are this backup's and completed:
// it describes them in AWS and rediscovers the TidbCluster's TiKV volumes.

// Snapshots describes EBS snapshots: the ones among ids that exist, the account's own marked
// Owned (internal/cloud/aws's Provider, in batches of at most 200 ids per call).
type Snapshots interface {
	DescribeSnapshots(ctx context.Context, ids []string) ([]cloud.Snapshot, error)
}

// Confirmation is what the agent itself observed to judge a snapshot step's completion report.
type Confirmation struct {
	// Volumes are the EBS volumes of the TidbCluster's TiKV pods (their claims' PVs), as the
	// agent discovered them for this observation.
	Volumes []string
	// Snapshots are what AWS describes of the snapshots the report names.
	Snapshots []cloud.Snapshot
	// DiscoveryErr: the TiKV volumes could not be discovered; CloudErr: the snapshots could not
	// be described. Either is retried.
	DiscoveryErr, CloudErr error
}

// confirmSkew is the clock skew allowed between PD's TSO, AWS's snapshot start times and the
// API server's creation timestamps (PD's TSO may also run up to its 3 s save window ahead of
// the wall clock after a PD restart).
const confirmSkew = 5 * time.Second

// confirmRecheck is how soon a confirmation that could not be made is tried again.
const confirmRecheck = 10 * time.Second

// maxMismatches bounds the mismatches a message names (a cluster has up to 10,000 stores).
const maxMismatches = 10

// NeedsConfirmation says Plan is about to judge the snapshot step's report that every snapshot
// completed, and needs Observed.Confirm.
func NeedsConfirmation(m *dpv1alpha1.VolumeBackupMember, snapshot job.State, r job.Report) bool {
	if m.DeletionTimestamp != nil || apimeta.IsStatusConditionTrue(m.Status.Conditions, dpv1alpha1.BackupMemberCompleteCondition) ||
		apimeta.IsStatusConditionTrue(m.Status.Conditions, dpv1alpha1.BackupMemberFailedCondition) {
		return false
	}
	st, reported := r.Step(job.StepSnapshot)
	_, hasResult := r.Results[job.StepSnapshot]
	return hasResult && (snapshot.Phase == job.Succeeded || reported && st.Phase == job.PhaseCompleted)
}

// ObserveConfirmation takes the TiKV volumes the agent handed the snapshot step (the member's
// status.tikvVolumes; rediscovered from the TidbCluster for a member that has none recorded)
// and describes the snapshots a completion report names. Errors are recorded in it, for Plan to
// retry.
func ObserveConfirmation(ctx context.Context, reader client.Reader, snaps Snapshots, o Observed) *Confirmation {
	c := &Confirmation{}
	var sum brsnapshot.Result
	if _, err := o.Report.Result(job.StepSnapshot, &sum); err != nil {
		return c // Plan fails the member on the unreadable result
	}
	if recorded := o.Member.Status.TiKVVolumes; len(recorded) > 0 {
		c.Volumes = slices.Clone(recorded) // what the step was handed, whatever TiKV became since
	} else if o.TC == nil {
		m := o.Member
		c.DiscoveryErr = fmt.Errorf("TidbCluster %s/%s not found", m.Spec.TCNamespace, m.Spec.TCName)
	} else if cl, err := observeCluster(ctx, reader, o.TC, false); err != nil {
		c.DiscoveryErr = err
	} else if rec, err := Discover(*cl, o.Member.Spec.K8sClusterName, string(o.Member.UID)); err != nil {
		c.DiscoveryErr = err
	} else {
		for _, v := range rec.Volumes() {
			c.Volumes = append(c.Volumes, v.ID)
		}
	}
	if snaps == nil {
		c.CloudErr = errors.New("the agent has no AWS access configured")
		return c
	}
	var ids []string
	for _, s := range sum.Snapshots {
		if s.SnapshotID != "" && !slices.Contains(ids, s.SnapshotID) {
			ids = append(ids, s.SnapshotID)
		}
	}
	if len(ids) > 0 {
		c.Snapshots, c.CloudErr = snaps.DescribeSnapshots(ctx, ids)
	}
	return c
}

// confirm judges the completion report sum against what the agent found (c): nil when it
// matches, else every mismatch (the first maxMismatches named).
func confirm(m *dpv1alpha1.VolumeBackupMember, c *Confirmation, reportTS uint64, sum brsnapshot.Result) []string {
	var bad []string
	uid := string(m.UID)
	ts, err := strconv.ParseUint(m.Spec.BackupTS, 10, 64)
	if err != nil || ts == 0 {
		bad = append(bad, fmt.Sprintf("spec.backupTS %q is not the TSO the manager asked for", m.Spec.BackupTS))
	}
	if sum.BackupID != uid {
		bad = append(bad, fmt.Sprintf("the result names backup %q, not this member's %s", sum.BackupID, uid))
	}
	if ts != 0 && (sum.ResolvedTS != ts || reportTS != 0 && reportTS != ts) {
		bad = append(bad, fmt.Sprintf("the step reports backup ts %d (result %d), the member's spec.backupTS is %d", reportTS, sum.ResolvedTS, ts))
	}
	if len(sum.Snapshots) == 0 {
		bad = append(bad, "the result names no snapshot")
	}
	described := map[string]cloud.Snapshot{}
	for _, s := range c.Snapshots {
		described[s.ID] = s
	}
	tikv := map[string]int{} // snapshots per TiKV volume
	for _, v := range c.Volumes {
		tikv[v] = 0
	}
	var earliest, latest cloud.Snapshot
	seen := map[string]bool{}
	for _, claimed := range sum.Snapshots {
		id := claimed.SnapshotID
		if seen[id] {
			bad = append(bad, fmt.Sprintf("snapshot %s: named twice", id))
			continue
		}
		seen[id] = true
		s, ok := described[id]
		if !ok {
			bad = append(bad, fmt.Sprintf("snapshot %q: not found in AWS", id))
			continue
		}
		if err := meta.CheckSnapshot(s, uid, claimed.VolumeID); err != nil {
			bad = append(bad, strings.TrimSuffix(err.Error(), ": "+meta.ErrNotOwned.Error()))
			continue
		}
		if s.State != cloud.SnapshotCompleted {
			bad = append(bad, fmt.Sprintf("snapshot %s: %s, not completed", id, s.State))
		}
		n, ok := tikv[s.VolumeID]
		if !ok {
			bad = append(bad, fmt.Sprintf("snapshot %s: of volume %s, which is not a TiKV volume of TidbCluster %s/%s", id, s.VolumeID, m.Spec.TCNamespace, m.Spec.TCName))
			continue
		}
		tikv[s.VolumeID] = n + 1
		if earliest.ID == "" || s.Started.Before(earliest.Started) {
			earliest = s
		}
		if latest.ID == "" || s.Started.After(latest.Started) {
			latest = s
		}
	}
	for _, v := range c.Volumes {
		if n := tikv[v]; n != 1 {
			bad = append(bad, fmt.Sprintf("TiKV volume %s: %d snapshots, want exactly one", v, n))
		}
	}
	if ts != 0 {
		// A TSO is physical milliseconds << 18 | logical.
		physical := time.UnixMilli(int64(ts >> 18)).UTC()
		if earliest.ID != "" && physical.After(earliest.Started.Add(confirmSkew)) {
			bad = append(bad, fmt.Sprintf("backup ts %d (%s) is after snapshot %s started (%s): the snapshots were not taken at it",
				ts, physical.Format(time.RFC3339Nano), earliest.ID, earliest.Started.UTC().Format(time.RFC3339Nano)))
		}
		// The pause takes its ts after its Job started, and every snapshot starts while it holds,
		// so before the Job's deadline: no snapshot starts more than that deadline after the ts.
		// (Not the member's creation: a member whose plane answered late is created with the ts
		// already chosen.)
		if hold := m.Spec.Template.EffectiveInitJobDeadline(); latest.ID != "" && physical.Before(latest.Started.Add(-hold-confirmSkew)) {
			bad = append(bad, fmt.Sprintf("backup ts %d (%s) is more than the pause's deadline (%s) before snapshot %s started (%s): no pause held the snapshots at it",
				ts, physical.Format(time.RFC3339Nano), hold, latest.ID, latest.Started.UTC().Format(time.RFC3339Nano)))
		}
	}
	if len(bad) > maxMismatches {
		bad = append(bad[:maxMismatches], fmt.Sprintf("and %d more", len(bad)-maxMismatches))
	}
	return bad
}

// confirmed checks the completion report sum with the agent's own observation and says
// whether the member may complete: on a mismatch it fails the member (SnapshotsNotConfirmed);
// when the observation could not be made it says so in Failed=False and looks again soon.
func (p *plan) confirmed(sum brsnapshot.Result) bool {
	c := p.o.Confirm
	if c == nil {
		c = &Confirmation{CloudErr: errors.New("the snapshots were not described")}
	}
	retry := func(reason, msg string) bool {
		p.set(dpv1alpha1.BackupMemberFailedCondition, metav1.ConditionFalse, reason, msg, time.Time{})
		p.res.RequeueAfter = confirmRecheck
		return false
	}
	switch {
	case c.DiscoveryErr != nil:
		return retry(dpv1alpha1.BackupMemberVolumeDiscoveryFailedReason,
			fmt.Sprintf("the snapshot step reports every snapshot completed; discovering the TiKV volumes to confirm it: %v; retrying every %s", c.DiscoveryErr, confirmRecheck))
	case c.CloudErr != nil:
		return retry(dpv1alpha1.BackupMemberCloudUnreachableReason,
			fmt.Sprintf("the snapshot step reports every snapshot completed; describing its snapshots to confirm it: %v; retrying every %s", c.CloudErr, confirmRecheck))
	}
	st, _ := p.o.Report.Step(job.StepSnapshot)
	if bad := confirm(p.m, c, st.BackupTS, sum); len(bad) > 0 {
		p.fail(dpv1alpha1.BackupMemberSnapshotsNotConfirmedReason, fmt.Sprintf("the snapshot step reports %d snapshots completed, but AWS and the TidbCluster do not confirm it: %s",
			len(sum.Snapshots), strings.Join(bad, "; ")))
		return false
	}
	// A retry that succeeded leaves no Failed=False behind.
	if f := findCondition(p.res.Status.Conditions, dpv1alpha1.BackupMemberFailedCondition); f != nil && f.Status != metav1.ConditionTrue {
		apimeta.RemoveStatusCondition(&p.res.Status.Conditions, dpv1alpha1.BackupMemberFailedCondition)
	}
	return true
}
