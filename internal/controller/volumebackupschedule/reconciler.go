package volumebackupschedule

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/loop"
	"github.com/fedbr/fedbr/internal/metrics"
)

// Reconciler is the VolumeBackupSchedule controller: observe the schedule and the backups it
// created, Plan, apply.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Now      func() time.Time
}

// SetupWithManager registers the controller. A backup's changes wake its schedule through the
// schedule label. The backups carry no owner reference on purpose: deleting a schedule must not
// garbage-collect its backups (and, with cleanPolicy Delete, their snapshots).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&fedv1alpha1.VolumeBackupSchedule{}).
		Watches(&fedv1alpha1.VolumeBackup{}, handler.EnqueueRequestsFromMapFunc(byLabel(ScheduleLabel))).
		Watches(&fedv1alpha1.VolumeRestore{}, handler.EnqueueRequestsFromMapFunc(byLabel(DrillLabel))).
		Named("volumebackupschedule").
		Complete(r)
}

// byLabel maps an object to the schedule its label names.
func byLabel(label string) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[label]
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	}
}

// Reconcile drives one schedule through the reconcile skeleton (loop.Loop). A schedule has no
// finalizer: its backups outlive it (see SetupWithManager).
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	l := loop.Loop[*fedv1alpha1.VolumeBackupSchedule, Result]{
		Client: r.Client, Now: r.Now,
		New:                func() *fedv1alpha1.VolumeBackupSchedule { return &fedv1alpha1.VolumeBackupSchedule{} },
		ObservedGeneration: func(s *fedv1alpha1.VolumeBackupSchedule) *int64 { return &s.Status.ObservedGeneration },
		Gone:               func(req reconcile.Request) { forget(req.Namespace, req.Name) },
		Skip: func(_ context.Context, s *fedv1alpha1.VolumeBackupSchedule) bool {
			if s.DeletionTimestamp != nil {
				forget(s.Namespace, s.Name)
				return true
			}
			return false
		},
		Decide: r.decide,
		Apply: func(ctx context.Context, s *fedv1alpha1.VolumeBackupSchedule, plans []Result, _ time.Time) error {
			for _, res := range plans {
				if err := r.apply(ctx, s, res); err != nil {
					return err
				}
			}
			return nil
		},
	}
	return l.Reconcile(ctx, req)
}

// Observe is what Plan decides from: the schedule, the VolumeBackups it created and its drills.
func Observe(s *fedv1alpha1.VolumeBackupSchedule, backups []fedv1alpha1.VolumeBackup, drills []fedv1alpha1.VolumeRestore) Observed {
	o := Observed{Schedule: s}
	for i := range drills {
		o.Drills = append(o.Drills, observeDrill(&drills[i]))
	}
	for i := range backups {
		b := &backups[i]
		at, err := time.Parse(time.RFC3339, b.Annotations[ScheduledAnnotation])
		if err != nil {
			at = b.CreationTimestamp.Time
		}
		ob := Backup{Name: b.Name, Scheduled: at, SkipGC: b.SkipGC,
			Complete: meta.IsStatusConditionTrue(b.Status.Conditions, fedv1alpha1.VolumeBackupCompleteCondition),
			Failed:   meta.IsStatusConditionTrue(b.Status.Conditions, fedv1alpha1.VolumeBackupFailedCondition),
			Deleting: b.DeletionTimestamp != nil, CleanFailure: cleanFailure(b), Size: b.Status.BackupSize}
		if b.Status.TimeStarted != nil {
			ob.Started = b.Status.TimeStarted.Time
		}
		if b.Status.TimeCompleted != nil {
			ob.Completed = b.Status.TimeCompleted.Time
		}
		ob.Verdict = verdict(b)
		o.Backups = append(o.Backups, ob)
	}
	return o
}

// decide observes the schedule's backups and plans.
func (r *Reconciler) decide(ctx context.Context, s *fedv1alpha1.VolumeBackupSchedule, now time.Time) (loop.Decision[*fedv1alpha1.VolumeBackupSchedule, Result], error) {
	var list fedv1alpha1.VolumeBackupList
	if err := r.Client.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingLabels{ScheduleLabel: s.Name}); err != nil {
		return loop.Decision[*fedv1alpha1.VolumeBackupSchedule, Result]{}, err
	}
	var drills fedv1alpha1.VolumeRestoreList
	if err := r.Client.List(ctx, &drills, client.InNamespace(s.Namespace), client.MatchingLabels{DrillLabel: s.Name}); err != nil {
		return loop.Decision[*fedv1alpha1.VolumeBackupSchedule, Result]{}, err
	}
	o := Observe(s, list.Items, drills.Items)
	res := Plan(o, now)
	if res.CreateDrill != "" {
		for i := range list.Items {
			if list.Items[i].Name == res.CreateDrill {
				res.drillOf = &list.Items[i]
			}
		}
	}
	report(s, res)
	// The plan is the one action: its deletions and creations, each idempotent.
	return loop.Decision[*fedv1alpha1.VolumeBackupSchedule, Result]{Actions: []Result{res}, RequeueAfter: res.RequeueAfter,
		SetStatus: func(s *fedv1alpha1.VolumeBackupSchedule) { s.Status = res.Status }}, nil
}

// observeDrill is what Plan needs of a drill: judged once its restore failed, or completed with
// its checks judged (Checked); the backup then holds the verdict.
func observeDrill(r *fedv1alpha1.VolumeRestore) Drill {
	d := Drill{Name: r.Name, Backup: r.Annotations[DrillBackupAnnotation], Created: r.CreationTimestamp.Time, Deleting: r.DeletionTimestamp != nil}
	checked := meta.FindStatusCondition(r.Status.Conditions, fedv1alpha1.VolumeRestoreCheckedCondition)
	switch {
	case meta.IsStatusConditionTrue(r.Status.Conditions, fedv1alpha1.VolumeRestoreFailedCondition):
		d.Judged, d.Outcome = true, "failed"
	case r.Status.Phase == fedv1alpha1.VolumeRestoreComplete && checked != nil && checked.Status == metav1.ConditionTrue:
		d.Judged, d.Outcome = true, "passed its checks"
	case r.Status.Phase == fedv1alpha1.VolumeRestoreComplete && checked != nil:
		d.Judged, d.Outcome = true, "failed its checks ("+checked.Reason+")"
	}
	return d
}

// NewDrill is the drill of backup b schedule s creates: a scratch restore with verify (the
// schedule's verify.template otherwise) of every plane of b into verify.namespace, in b's
// namespace, labelled DrillLabel, annotated with the backup, owned by the schedule.
func NewDrill(s *fedv1alpha1.VolumeBackupSchedule, b *fedv1alpha1.VolumeBackup) *fedv1alpha1.VolumeRestore {
	v := s.Spec.Verify
	r := &fedv1alpha1.VolumeRestore{
		ObjectMeta: metav1.ObjectMeta{Name: DrillName(b.Name), Namespace: s.Namespace,
			Labels:      map[string]string{DrillLabel: s.Name},
			Annotations: map[string]string{DrillBackupAnnotation: b.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: fedv1alpha1.GroupVersion.String(), Kind: "VolumeBackupSchedule",
				Name: s.Name, UID: s.UID, Controller: ptr.To(true)}}},
		Spec: fedv1alpha1.VolumeRestoreSpec{Clusters: b.RestoreClusters(v.Namespace, ""), Template: *v.Template.DeepCopy()},
	}
	r.Spec.Template.Scratch, r.Spec.Template.Verify = true, true
	return r
}

// apply deletes what retention deletes and creates the tick's backup, and deletes and creates
// drills.
func (r *Reconciler) apply(ctx context.Context, s *fedv1alpha1.VolumeBackupSchedule, res Result) error {
	for _, name := range res.DeleteDrills {
		d := &fedv1alpha1.VolumeRestore{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace}}
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, d)); err != nil {
			return err
		}
		r.Recorder.Eventf(s, nil, "Normal", "DrillDeleted", "Delete", "deleted drill %s: its agents remove what it made", name)
	}
	if res.drillOf != nil {
		d := NewDrill(s, res.drillOf)
		if err := r.Client.Create(ctx, d); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		r.Recorder.Eventf(s, nil, "Normal", "DrillCreated", "Create", "created drill %s of %s into namespace %s", d.Name, res.drillOf.Name, s.Spec.Verify.Namespace)
	}
	if res.Delete != "" {
		b := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: res.Delete, Namespace: s.Namespace}}
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, b)); err != nil {
			return err
		}
		r.Recorder.Eventf(s, nil, "Normal", "Retention", "Delete", "deleted %s (retention)", res.Delete)
	}
	if res.Create != "" {
		return r.create(ctx, s, res.CreateFor)
	}
	return nil
}

func (r *Reconciler) create(ctx context.Context, s *fedv1alpha1.VolumeBackupSchedule, tick time.Time) error {
	b := NewBackup(s, tick)
	if err := r.Client.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	r.Recorder.Eventf(s, nil, "Normal", "BackupCreated", "Create", "created %s for the %s tick", b.Name, tick.UTC().Format(time.RFC3339))
	return nil
}

// verdict is b's verification (its Verified condition and status.verification), if judged.
func verdict(b *fedv1alpha1.VolumeBackup) *Verdict {
	c := meta.FindStatusCondition(b.Status.Conditions, fedv1alpha1.VolumeBackupVerifiedCondition)
	v := b.Status.Verification
	if c == nil || v == nil {
		return nil
	}
	out := &Verdict{Passed: c.Status == metav1.ConditionTrue, At: v.TimeJudged.Time}
	if d, err := time.ParseDuration(v.TimeTaken); err == nil && out.Passed {
		out.Recovery = d
	}
	return out
}

// cleanFailure is why a deleted backup's clean fails, from its Cleaned condition; empty while
// it does not.
func cleanFailure(b *fedv1alpha1.VolumeBackup) string {
	c := meta.FindStatusCondition(b.Status.Conditions, fedv1alpha1.VolumeBackupCleanedCondition)
	if b.DeletionTimestamp == nil || c == nil || c.Status != metav1.ConditionFalse || c.Reason != fedv1alpha1.VolumeBackupCleanFailedReason {
		return ""
	}
	return c.Message
}

// report sets the schedule's metrics: its latest closed window (none while paused or before
// its second tick), whether a failing clean holds its retention, and its newest complete
// backup. A schedule without one has no last-success series yet; a size is reported once one
// is known.
func report(s *fedv1alpha1.VolumeBackupSchedule, res Result) {
	if res.Window.IsZero() {
		metrics.ScheduleWindowStart.DeleteLabelValues(s.Namespace, s.Name)
	} else {
		metrics.ScheduleWindowStart.WithLabelValues(s.Namespace, s.Name).Set(float64(res.Window.Unix()))
	}
	if c := meta.FindStatusCondition(res.Status.Conditions, fedv1alpha1.VolumeBackupScheduleRetentionCondition); c != nil &&
		c.Status == metav1.ConditionFalse && c.Reason == fedv1alpha1.VolumeBackupScheduleCleanFailedReason {
		metrics.ScheduleRetentionBlocked.WithLabelValues(s.Namespace, s.Name).Set(1)
	} else {
		metrics.ScheduleRetentionBlocked.DeleteLabelValues(s.Namespace, s.Name)
	}
	reportVerified(s, res.Verified)
	metrics.ScheduleDrillFailed.DeletePartialMatch(map[string]string{"namespace": s.Namespace, "schedule": s.Name})
	if c := meta.FindStatusCondition(res.Status.Conditions, fedv1alpha1.VolumeBackupScheduleDrillCondition); c != nil && c.Status == metav1.ConditionFalse {
		metrics.ScheduleDrillFailed.WithLabelValues(s.Namespace, s.Name, c.Reason).Set(1)
	}
	last := res.Last
	if !last.Found {
		return
	}
	metrics.ScheduleLastSuccess.WithLabelValues(s.Namespace, s.Name).Set(float64(last.At.Unix()))
	metrics.ScheduleLastDuration.WithLabelValues(s.Namespace, s.Name).Set(last.Duration.Seconds())
	if last.SizeFound {
		metrics.ScheduleLastSize.WithLabelValues(s.Namespace, s.Name).Set(float64(last.Size))
	}
}

// reportVerified sets the schedule's verification metrics: whether its newest verdict failed
// (once one exists), and its newest pass with the recovery time measured (once one passed).
func reportVerified(s *fedv1alpha1.VolumeBackupSchedule, v LastVerified) {
	if !v.Judged {
		metrics.ScheduleLastVerificationFailed.DeleteLabelValues(s.Namespace, s.Name)
	} else {
		failed := 0.0
		if v.Failed {
			failed = 1
		}
		metrics.ScheduleLastVerificationFailed.WithLabelValues(s.Namespace, s.Name).Set(failed)
	}
	if v.PassedAt.IsZero() {
		metrics.ScheduleLastVerified.DeleteLabelValues(s.Namespace, s.Name)
		metrics.ScheduleLastRecovery.DeleteLabelValues(s.Namespace, s.Name)
		return
	}
	metrics.ScheduleLastVerified.WithLabelValues(s.Namespace, s.Name).Set(float64(v.PassedAt.Unix()))
	metrics.ScheduleLastRecovery.WithLabelValues(s.Namespace, s.Name).Set(v.Recovery.Seconds())
}

// forget drops a deleted schedule's series.
func forget(namespace, name string) {
	metrics.ScheduleWindowStart.DeleteLabelValues(namespace, name)
	metrics.ScheduleLastSuccess.DeleteLabelValues(namespace, name)
	metrics.ScheduleLastDuration.DeleteLabelValues(namespace, name)
	metrics.ScheduleLastSize.DeleteLabelValues(namespace, name)
	metrics.ScheduleRetentionBlocked.DeleteLabelValues(namespace, name)
	metrics.ScheduleLastVerified.DeleteLabelValues(namespace, name)
	metrics.ScheduleLastRecovery.DeleteLabelValues(namespace, name)
	metrics.ScheduleLastVerificationFailed.DeleteLabelValues(namespace, name)
	metrics.ScheduleDrillFailed.DeletePartialMatch(map[string]string{"namespace": namespace, "schedule": name})
}
