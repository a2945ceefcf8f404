package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
)

// storage is the S3 location of backup name in the AWS double, under the control-plane
// namespace's prefix as the agents' default policy wants it (--allowed-storage): the agents and
// steps reach it through their --aws-endpoint (s3.endpoint is refused at admission).
func (d *Harness) storage(name string) fedv1alpha1.StorageProvider {
	return fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: Bucket, Prefix: ControlNamespace + "/" + name,
		Region: d.lab.AWS.Region}}
}

// NewBackup is a VolumeBackup of the source cluster named name, cleanPolicy Delete.
func (d *Harness) NewBackup(name string) *fedv1alpha1.VolumeBackup {
	b := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ControlNamespace}}
	for _, dp := range d.lab.DataPlanes {
		b.Spec.Clusters = append(b.Spec.Clusters, fedv1alpha1.VolumeBackupMemberCluster{K8sClusterName: dp.Cluster, TCName: d.o.TCName, TCNamespace: d.o.Namespace})
	}
	b.Spec.Template.StorageProvider = d.storage(name)
	b.Spec.Template.CleanPolicy = fedv1alpha1.CleanPolicyDelete
	return b
}

// Backup runs a VolumeBackup of the source cluster to completion.
func (d *Harness) Backup(ctx context.Context) (*fedv1alpha1.VolumeBackup, error) {
	// The bucket is a directory of the AWS double's S3.
	if err := os.MkdirAll(filepath.Join(d.lab.AWS.Dir, "s3", Bucket), 0o755); err != nil {
		return nil, err
	}
	name := "demo-" + time.Now().UTC().Format("20060102-150405")
	b := d.NewBackup(name)
	c := d.kube[d.lab.Control]
	if err := c.Create(ctx, b); err != nil {
		return nil, fmt.Errorf("create VolumeBackup: %w", err)
	}
	created := time.Now()
	d.backupCreated = created
	d.Say("VolumeBackup %s/%s created over %d data planes", ControlNamespace, name, len(d.lab.DataPlanes))
	err := d.Poll(ctx, "VolumeBackup "+name, func() (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, "", err
		}
		switch b.Status.Phase {
		case fedv1alpha1.VolumeBackupComplete:
			d.report.BackupWall = time.Since(created)
			return true, "", nil
		case fedv1alpha1.VolumeBackupFailed:
			return false, "", fmt.Errorf("backup %w: %s", ErrFailed, ConditionMessage(b.Status.Conditions, fedv1alpha1.VolumeBackupFailedCondition))
		}
		return false, fmt.Sprintf("backup %s: %s", b.Status.Phase, ConditionMessage(b.Status.Conditions, fedv1alpha1.VolumeBackupReadyCondition)), nil
	})
	if err != nil {
		return b, err
	}
	// Completion does not wait for the initializer to confirm the pause is lifted (the
	// snapshots are done either way); the pause window is known once it has.
	err = d.Poll(ctx, "GC resumed after "+name, func() (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, "", err
		}
		return meta.IsStatusConditionFalse(b.Status.Conditions, fedv1alpha1.VolumeBackupGCPausedCondition) && b.Status.GCPauseSeconds != "",
			"waiting for the initializer to report GC resumed", nil
	})
	if err != nil {
		return b, err
	}
	d.report.Backup = b.DeepCopy()
	if err := d.backupTimeline(ctx, b); err != nil {
		return b, err
	}
	d.Say("backup complete: commit ts %s, GC paused %ss", b.Status.CommitTs, b.Status.GCPauseSeconds)
	return b, nil
}

// sizes waits for every member to size its snapshots (after completion, off the backup's
// path) and for the backup to sum them.
func (d *Harness) sizes(ctx context.Context, b *fedv1alpha1.VolumeBackup) error {
	var full, incremental int64
	err := d.Poll(ctx, "sizes of "+b.Name, func() (bool, string, error) {
		full, incremental = 0, 0
		for _, dp := range d.lab.DataPlanes {
			var m dpv1alpha1.VolumeBackupMember
			if err := d.kube[dp.Cluster].Get(ctx, client.ObjectKey{Namespace: d.o.Namespace, Name: fedv1alpha1.MemberName(b.Name)}, &m); err != nil {
				return false, "", err
			}
			c := meta.FindStatusCondition(m.Status.Conditions, dpv1alpha1.BackupMemberSizedCondition)
			switch {
			case c == nil || c.Status != metav1.ConditionTrue && c.Reason == dpv1alpha1.BackupMemberSizingReason:
				return false, "sizing the snapshots in " + dp.Cluster, nil
			case c.Status != metav1.ConditionTrue:
				return false, "", fmt.Errorf("%s: %s: %s", dp.Cluster, c.Reason, c.Message)
			}
			full += m.Status.BackupSize
			incremental += m.Status.IncrementalBackupSize
		}
		if err := d.kube[d.lab.Control].Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, "", err
		}
		return b.Status.BackupSize == full && b.Status.IncrementalBackupSize == incremental, "summing the members' sizes", nil
	})
	if err != nil {
		return err
	}
	d.report.BackupSize, d.report.IncrementalBackupSize = full, incremental
	d.Say("backup size: full %s, incremental %s", b.Status.BackupSizeReadable, b.Status.IncrementalBackupSizeReadable)
	return nil
}

// backupTimeline reads the members' conditions and the snapshots' start times.
func (d *Harness) backupTimeline(ctx context.Context, b *fedv1alpha1.VolumeBackup) error {
	r := d.report
	r.add("backup", b.Status.TimeStarted, b.Status.TimeCompleted)
	var starts []time.Time
	for _, dp := range d.lab.DataPlanes {
		var m dpv1alpha1.VolumeBackupMember
		if err := d.kube[dp.Cluster].Get(ctx, client.ObjectKey{Namespace: d.o.Namespace, Name: fedv1alpha1.MemberName(b.Name)}, &m); err != nil {
			return fmt.Errorf("member in %s: %w", dp.Cluster, err)
		}
		r.backupMembers = append(r.backupMembers, memberRef{cluster: dp.Cluster, uid: string(m.UID)})
		if dp.Cluster == b.Status.Initializer {
			r.add("  GC and PD paused ("+dp.Cluster+")", condTime(m.Status.Conditions, dpv1alpha1.BackupMemberInitializedCondition), condTime(m.Status.Conditions, dpv1alpha1.BackupMemberGCResumedCondition))
		}
		r.add("  snapshots "+dp.Cluster, m.Status.TimeStarted, condTime(m.Status.Conditions, dpv1alpha1.BackupMemberCompleteCondition))
		if s, ok := dpv1alpha1.Step(m.Status.Steps, dpv1alpha1.StepSnapshot); ok && dpv1alpha1.SnapshotsStarted(s) && dpv1alpha1.SnapshotsCompleted(s) {
			r.SelfReported++
		}
		snaps, err := d.aws.ListSnapshots(ctx, map[string]string{"fedbr.io/backup": string(m.UID)})
		if err != nil {
			return err
		}
		for _, s := range snaps {
			starts = append(starts, s.Started)
		}
		r.Snapshots += len(snaps)
	}
	if len(starts) > 0 {
		sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
		r.SnapshotSkew = starts[len(starts)-1].Sub(starts[0])
	}
	if s, err := time.ParseDuration(b.Status.GCPauseSeconds + "s"); err == nil {
		r.GCPause = s
	}
	return d.pauseBreakdown(ctx, b)
}

// stepTimes are the timestamps the steps report in their members' status.steps (each step the
// ones it has).
type stepTimes struct {
	GCPausedAt, ReadyAt, LiftedAt      time.Time
	BackupTSAt, StartedAt, CompletedAt time.Time
	// SlowestStartSeconds is the snapshot step's slowest CreateSnapshots call.
	SlowestStartSeconds float64
}

// timesOf reads the times of step out of steps; false when the step did not report.
func timesOf(steps []dpv1alpha1.StepReport, step string) (stepTimes, bool) {
	s, ok := dpv1alpha1.Step(steps, step)
	at := func(t *metav1.MicroTime) time.Time {
		if t == nil {
			return time.Time{}
		}
		return t.Time
	}
	return stepTimes{GCPausedAt: at(s.GCPausedAt), ReadyAt: at(s.ReadyAt), LiftedAt: at(s.LiftedAt),
		BackupTSAt: at(s.BackupTSAt), StartedAt: at(s.StartedAt), CompletedAt: at(s.CompletedAt),
		SlowestStartSeconds: s.SlowestStartSeconds}, ok
}

// pauseBreakdown splits the GC pause window by what happened in it, from the steps' own
// clocks: the pause taking hold (leases, wait-apply, schedulers), the backup ts travelling to
// the armed snapshot steps, the snapshots starting, and the pause being released.
func (d *Harness) pauseBreakdown(ctx context.Context, b *fedv1alpha1.VolumeBackup) error {
	var pause stepTimes
	var lastTS, firstTS, lastStarted, lastCompleted, awsCompleted time.Time
	for _, dp := range d.lab.DataPlanes {
		var m dpv1alpha1.VolumeBackupMember
		key := client.ObjectKey{Namespace: d.o.Namespace, Name: fedv1alpha1.MemberName(b.Name)}
		if err := d.kube[dp.Cluster].Get(ctx, key, &m); err != nil {
			return fmt.Errorf("backup member in %s: %w", dp.Cluster, err)
		}
		if p, ok := timesOf(m.Status.Steps, job.StepPause); ok {
			pause = p
		}
		snap, ok := timesOf(m.Status.Steps, job.StepSnapshot)
		if !ok {
			return fmt.Errorf("the snapshot step in %s did not report", dp.Cluster)
		}
		if snap.BackupTSAt.After(lastTS) {
			lastTS = snap.BackupTSAt
		}
		if firstTS.IsZero() || (!snap.BackupTSAt.IsZero() && snap.BackupTSAt.Before(firstTS)) {
			firstTS = snap.BackupTSAt
		}
		if snap.StartedAt.After(lastStarted) {
			lastStarted = snap.StartedAt
		}
		if snap.CompletedAt.After(lastCompleted) {
			lastCompleted = snap.CompletedAt
		}
		d.report.SlowestCreateSnapshots = max(d.report.SlowestCreateSnapshots, time.Duration(snap.SlowestStartSeconds*float64(time.Second)))
		// When AWS completed the member's last snapshot: the end of the snapshots' own work.
		snaps, err := d.aws.ListSnapshots(ctx, map[string]string{"fedbr.io/backup": string(m.UID)})
		if err != nil {
			return fmt.Errorf("snapshots of the backup member in %s: %w", dp.Cluster, err)
		}
		for _, s := range snaps {
			if s.Completed.IsZero() {
				return fmt.Errorf("snapshot %s of the backup member in %s has no completion time", s.ID, dp.Cluster)
			}
			if s.Completed.After(awsCompleted) {
				awsCompleted = s.Completed
			}
		}
	}
	r := d.report
	// The work of the backup proper: the pause taking hold on PD and TiKV, and the snapshot
	// steps' cluster check and cloud calls until AWS completed the last snapshot (first ts
	// received → last completionTime). The rest of the wall time is orchestration: Jobs, pods,
	// hops between the controllers, and how late the steps saw the snapshots complete.
	if !pause.ReadyAt.IsZero() && !firstTS.IsZero() && !awsCompleted.IsZero() {
		r.BackupWork = []Step{
			{Name: "pause takes hold (PD, TiKV)", Start: pause.GCPausedAt, End: pause.ReadyAt},
			{Name: "snapshots (check, cloud calls, AWS completing them)", Start: firstTS, End: awsCompleted},
		}
	}
	r.SnapshotsSeenLate = lastCompleted.Sub(awsCompleted)
	r.PauseBreakdown = []Step{
		{Name: "pause takes hold (GC pinned → ready)", Start: pause.GCPausedAt, End: pause.ReadyAt},
		{Name: "backup ts reaches every armed step", Start: pause.ReadyAt, End: lastTS},
		{Name: "cluster check, snapshots start", Start: firstTS, End: lastStarted},
		{Name: "pause released (all started → lifted)", Start: lastStarted, End: pause.LiftedAt},
	}
	r.OverheadHops = d.overheadHops(b, pause.GCPausedAt, awsCompleted)
	if !pause.GCPausedAt.IsZero() && !awsCompleted.IsZero() && r.BackupWall > 0 {
		r.BeforePause = pause.GCPausedAt.Sub(d.backupCreated)
		r.AfterAWS = d.backupCreated.Add(r.BackupWall).Sub(awsCompleted)
	}
	if !pause.GCPausedAt.IsZero() && !pause.LiftedAt.IsZero() {
		r.WindowWrites = d.writes.within(fedv1alpha1.MemberName(b.Name), pause.GCPausedAt, pause.LiftedAt)
		r.InitializerWrites = d.writes.log(b.Status.Initializer, fedv1alpha1.MemberName(b.Name), pause.GCPausedAt, pause.LiftedAt)
	}
	return nil
}

// overheadHops splits the backup's orchestration into its hops before the pause took hold
// (gcPausedAt) and after AWS completed the last snapshot (awsCompleted), each timed as the
// last data plane was seen past it: the critical path, where every plane waits for the
// slowest.
func (d *Harness) overheadHops(b *fedv1alpha1.VolumeBackup, gcPausedAt, awsCompleted time.Time) []Step {
	name := fedv1alpha1.MemberName(b.Name)
	planes := len(d.lab.DataPlanes)
	last := func(fact func(*dpv1alpha1.VolumeBackupMember) bool) time.Time {
		seen := d.writes.firstSeen(name, fact)
		var t time.Time
		if len(seen) < planes {
			return t
		}
		for _, at := range seen {
			if at.After(t) {
				t = at
			}
		}
		return t
	}
	entry := func(m *dpv1alpha1.VolumeBackupMember) dpv1alpha1.StepReport {
		s, _ := dpv1alpha1.Step(m.Status.Steps, job.StepSnapshot)
		return s
	}
	members := last(func(*dpv1alpha1.VolumeBackupMember) bool { return true })
	armed := last(func(m *dpv1alpha1.VolumeBackupMember) bool { return dpv1alpha1.SnapshotArmed(entry(m)) })
	reported := last(func(m *dpv1alpha1.VolumeBackupMember) bool { return entry(m).CompletedAt != nil })
	confirmed := last(func(m *dpv1alpha1.VolumeBackupMember) bool {
		return meta.IsStatusConditionTrue(m.Status.Conditions, dpv1alpha1.BackupMemberCompleteCondition)
	})
	startPause := d.writes.firstSeen(name, func(m *dpv1alpha1.VolumeBackupMember) bool { return m.Spec.StartPause })[b.Status.Initializer]
	// The pause pod and the snapshot pods start together; the later of each counts.
	created, scheduled, running := d.lastStepPod(d.o.Namespace, job.LabelValue(name), job.StepSnapshot)
	pc, ps, pr := d.lastStepPod(d.o.Namespace, job.LabelValue(name), job.StepPause)
	later := func(a, b time.Time) time.Time {
		if a.IsZero() || b.IsZero() {
			return time.Time{}
		}
		if b.After(a) {
			return b
		}
		return a
	}
	created, scheduled, running = later(created, pc), later(scheduled, ps), later(running, pr)
	return []Step{
		{Name: "manager creates the members", Start: d.backupCreated, End: members},
		{Name: "agents create the step Jobs, Jobs their pods", Start: members, End: created},
		{Name: "scheduler binds the step pods", Start: created, End: scheduled},
		{Name: "kubelet runs them", Start: scheduled, End: running},
		{Name: "snapshot steps start and report armed", Start: running, End: armed},
		{Name: "manager asks the pause to start", Start: armed, End: startPause},
		{Name: "the pause pins GC", Start: startPause, End: gcPausedAt},
		{Name: "(work: the pause window and the snapshots in AWS)", Start: gcPausedAt, End: awsCompleted},
		{Name: "snapshot steps see AWS complete them", Start: awsCompleted, End: reported},
		{Name: "agents confirm them in AWS", Start: reported, End: confirmed},
		{Name: "manager completes the backup, the demo sees it", Start: confirmed, End: d.backupCreated.Add(d.report.BackupWall)},
	}
}

// deleteBackup deletes the VolumeBackup (cleanPolicy Delete) and counts what is left behind:
// snapshots of its members, and restored volumes that no PV uses.
func (d *Harness) deleteBackup(ctx context.Context, b *fedv1alpha1.VolumeBackup) error {
	c := d.kube[d.lab.Control]
	if err := client.IgnoreNotFound(c.Delete(ctx, b)); err != nil {
		return err
	}
	d.Say("VolumeBackup deleted: cleaning its snapshots")
	err := d.Poll(ctx, "VolumeBackup deletion", func() (bool, string, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(b), b)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, fmt.Sprintf("backup %s", b.Status.Phase), err
	})
	if err != nil {
		return err
	}
	for _, m := range d.report.backupMembers {
		snaps, err := d.aws.ListSnapshots(ctx, map[string]string{"fedbr.io/backup": m.uid})
		if err != nil {
			return err
		}
		d.report.OrphanSnapshots += len(snaps)
	}
	for _, m := range d.report.restoreMembers {
		vols, err := d.aws.ListVolumes(ctx, map[string]string{"fedbr.io/restore": m.uid})
		if err != nil {
			return err
		}
		var pvs corev1.PersistentVolumeList
		if err := d.kube[m.cluster].List(ctx, &pvs); err != nil {
			return err
		}
		used := map[string]bool{}
		for _, pv := range pvs.Items {
			if pv.Spec.CSI != nil {
				used[pv.Spec.CSI.VolumeHandle] = true
			}
		}
		for _, v := range vols {
			if !used[v.ID] {
				d.report.OrphanVolumes++
			}
		}
	}
	if d.report.OrphanSnapshots > 0 || d.report.OrphanVolumes > 0 {
		return fmt.Errorf("left behind: %d snapshots, %d volumes no PV uses", d.report.OrphanSnapshots, d.report.OrphanVolumes)
	}
	d.Say("nothing left behind: 0 snapshots of the backup, 0 restored volumes without a PV")
	return nil
}

func condTime(cs []metav1.Condition, t string) *metav1.Time {
	for i := range cs {
		if cs[i].Type == t && cs[i].Status == metav1.ConditionTrue {
			return &cs[i].LastTransitionTime
		}
	}
	return nil
}
