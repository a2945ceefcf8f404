package volumebackup

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/controller/federation"
	"github.com/fedbr/fedbr/internal/metrics"
	"github.com/fedbr/fedbr/internal/plane"
)

// Finalizer keeps a VolumeBackup until every member (and so every snapshot, per cleanPolicy) is
// gone from every data plane.
const Finalizer = "federation.pingcap.com/volumebackup-members"

// Describe names the action for Events.
func (a Action) Describe() (string, string) { return string(a.Kind), a.Cluster }

// Reconciler is the VolumeBackup controller: federation.Driver with this package's observe,
// Plan and apply.
type Reconciler = federation.Driver[*fedv1alpha1.VolumeBackup, Action]

// NewReconciler builds the controller over the control-plane client and the data planes.
func NewReconciler(c client.Client, planes *plane.Set, rec events.EventRecorder) *Reconciler {
	r := &Reconciler{
		Name: "volumebackup", Finalizer: Finalizer, Client: c, Planes: planes, Recorder: rec,
		New:     func() *fedv1alpha1.VolumeBackup { return &fedv1alpha1.VolumeBackup{} },
		NewList: func() client.ObjectList { return &fedv1alpha1.VolumeBackupList{} },
		Phase:   func(b *fedv1alpha1.VolumeBackup) string { return string(b.Status.Phase) },
		Failed: func(b *fedv1alpha1.VolumeBackup) bool {
			return b.Status.Phase == fedv1alpha1.VolumeBackupFailed || b.Status.Phase == fedv1alpha1.VolumeBackupCleanFailed
		},
		Message:            message,
		OnPhase:            observeTerminal,
		ObservedGeneration: func(b *fedv1alpha1.VolumeBackup) *int64 { return &b.Status.ObservedGeneration },
	}
	r.Decide = func(ctx context.Context, b *fedv1alpha1.VolumeBackup, now time.Time) (federation.Decision[*fedv1alpha1.VolumeBackup, Action], error) {
		o, err := observe(ctx, c, planes, b)
		if err != nil {
			return federation.Decision[*fedv1alpha1.VolumeBackup, Action]{}, err
		}
		res := Plan(o, now)
		switch {
		case res.RemoveFinalizer:
			metrics.BackupSize.DeleteLabelValues(b.Namespace, b.Name)
			metrics.BackupIncrementalSize.DeleteLabelValues(b.Namespace, b.Name)
		case res.Status.Phase == fedv1alpha1.VolumeBackupComplete:
			// The sizes arrive after completion (the members size their snapshots then).
			metrics.BackupSize.WithLabelValues(b.Namespace, b.Name).Set(float64(res.Status.BackupSize))
			metrics.BackupIncrementalSize.WithLabelValues(b.Namespace, b.Name).Set(float64(res.Status.IncrementalBackupSize))
		}
		observePause(b, res)
		observeClean(b, res)
		return federation.Decision[*fedv1alpha1.VolumeBackup, Action]{Actions: res.Actions, RemoveFinalizer: res.RemoveFinalizer,
			RequeueAfter: res.RequeueAfter, RecordFirst: RecordFirst(b.Status, res), SetStatus: func(b *fedv1alpha1.VolumeBackup) { b.Status = res.Status }}, nil
	}
	r.Related = func(ctx context.Context, o client.Object) []reconcile.Request { return waiters(ctx, c, o) }
	r.Also = []federation.Also{{Kind: &fedv1alpha1.VolumeRestore{}, Map: func(ctx context.Context, o client.Object) []reconcile.Request {
		return verified(ctx, c, o)
	}}}
	r.Apply = func(ctx context.Context, b *fedv1alpha1.VolumeBackup, a Action, now time.Time) error {
		return apply(ctx, planes, rec, b, a, now)
	}
	return r
}

// observePause keeps fedbr_volumebackup_gc_paused_since_timestamp_seconds while the backup's
// pause holds (GCPaused=True, from when it became so) and drops it otherwise.
func observePause(b *fedv1alpha1.VolumeBackup, res Result) {
	heldSince(metrics.GCPausedSince, b, res, func(c *metav1.Condition) bool {
		return c.Status == metav1.ConditionTrue
	}, fedv1alpha1.VolumeBackupGCPausedCondition)
}

// observeClean keeps fedbr_volumebackup_clean_failed_since_timestamp_seconds while the
// backup's clean fails (Cleaned=False, CleanFailed, from when it began) and drops it otherwise.
func observeClean(b *fedv1alpha1.VolumeBackup, res Result) {
	heldSince(metrics.BackupCleanFailedSince, b, res, func(c *metav1.Condition) bool {
		return c.Status == metav1.ConditionFalse && c.Reason == fedv1alpha1.VolumeBackupCleanFailedReason
	}, fedv1alpha1.VolumeBackupCleanedCondition)
}

// heldSince sets the backup's series of g to the last transition of its condition typ while
// holds says so of it, and deletes the series otherwise or when the backup goes.
func heldSince(g *prometheus.GaugeVec, b *fedv1alpha1.VolumeBackup, res Result, holds func(*metav1.Condition) bool, typ string) {
	c := apimeta.FindStatusCondition(res.Status.Conditions, typ)
	if c == nil || !holds(c) || res.RemoveFinalizer {
		g.DeleteLabelValues(b.Namespace, b.Name)
		return
	}
	g.WithLabelValues(b.Namespace, b.Name).Set(float64(c.LastTransitionTime.Unix()))
}

// WatchPlane watches the VolumeBackupMembers of a data plane (call once its cache synced).
func WatchPlane(r *Reconciler, p *plane.Plane) error {
	return federation.Watch(r, p, &dpv1alpha1.VolumeBackupMember{})
}

// observe reads every member from its plane's cache, and, for the pause gate, the other
// backups of the same TiDB cluster from the control plane's. A plane whose read fails counts
// as unreachable for this pass.
func observe(ctx context.Context, c client.Reader, planes *plane.Set, b *fedv1alpha1.VolumeBackup) (Observed, error) {
	o := Observed{Backup: b, Members: map[string]Member{}, Known: planes.Known(), Reachable: planes.Reachable(), Namespaces: planes.Namespaces(),
		ForceRemove: b.Annotations[fedv1alpha1.AnnotationForceRemove] == "true"}
	if NeedsOthers(b) {
		others, err := sharing(ctx, c, b)
		if err != nil {
			return o, fmt.Errorf("list the VolumeBackups of the same TidbClusters for the pause gate: %w", err)
		}
		o.Others = others
	}
	if b.Status.Phase == fedv1alpha1.VolumeBackupComplete {
		var restores fedv1alpha1.VolumeRestoreList
		if err := c.List(ctx, &restores, client.InNamespace(b.Namespace)); err != nil {
			return o, fmt.Errorf("list the VolumeRestores of namespace %s for the backup's verification: %w", b.Namespace, err)
		}
		for i := range restores.Items {
			o.Restores = append(o.Restores, &restores.Items[i])
		}
	}
	for _, c := range b.Spec.Clusters {
		p, ok := planes.Get(c.K8sClusterName)
		if !ok || !o.Reachable[c.K8sClusterName] {
			continue
		}
		var m dpv1alpha1.VolumeBackupMember
		err := p.Cluster.GetClient().Get(ctx, types.NamespacedName{Namespace: c.TCNamespace, Name: fedv1alpha1.MemberName(b.Name)}, &m)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			o.Reachable[c.K8sClusterName] = false
			continue
		}
		if err := federation.CheckOwner(&m, b, c.K8sClusterName); err != nil {
			return o, err
		}
		o.Members[c.K8sClusterName] = Member{Exists: true, Phase: m.Spec.Phase, BackupTS: m.Spec.BackupTS,
			StartPause: m.Spec.StartPause, ResumeGC: m.Spec.ResumeGC, BackupFailed: m.Spec.BackupFailed, PhaseSince: federation.PhaseSince(&m), Status: m.Status}
	}
	return o, nil
}

// waiters are the backups whose pause gate depends on a: those of the same TiDB cluster that
// have not asked for their pause yet.
func waiters(ctx context.Context, c client.Reader, a client.Object) []reconcile.Request {
	ab, ok := a.(*fedv1alpha1.VolumeBackup)
	if !ok {
		return nil
	}
	others, err := sharing(ctx, c, ab)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the VolumeBackups of the same TidbClusters to wake those waiting for a pause")
		return nil
	}
	var out []reconcile.Request
	for _, b := range others {
		if NeedsOthers(b) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(b)})
		}
	}
	return out
}

// verified are the Complete backups that restore a verifies (Verifies), for their Verified.
func verified(ctx context.Context, c client.Reader, a client.Object) []reconcile.Request {
	r, ok := a.(*fedv1alpha1.VolumeRestore)
	if !ok || !r.Spec.Template.Verify {
		return nil
	}
	var backups fedv1alpha1.VolumeBackupList
	if err := c.List(ctx, &backups, client.InNamespace(r.Namespace)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the VolumeBackups a VolumeRestore may verify")
		return nil
	}
	var out []reconcile.Request
	for i := range backups.Items {
		if b := &backups.Items[i]; b.Status.Phase == fedv1alpha1.VolumeBackupComplete && Verifies(b, r) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(b)})
		}
	}
	return out
}

// phaseOrder ranks member phases in the only order they move.
var phaseOrder = map[dpv1alpha1.BackupMemberPhase]int{dpv1alpha1.BackupMemberInitialize: 1, dpv1alpha1.BackupMemberExecute: 2, dpv1alpha1.BackupMemberTeardown: 3}

func apply(ctx context.Context, planes *plane.Set, rec events.EventRecorder, b *fedv1alpha1.VolumeBackup, a Action, now time.Time) error {
	p, ok := planes.Get(a.Cluster)
	if !ok {
		return fmt.Errorf("no data plane %q", a.Cluster)
	}
	c := p.Cluster.GetClient()
	cl := clusterOf(b, a.Cluster)
	name := fedv1alpha1.MemberName(b.Name)
	ref := &dpv1alpha1.VolumeBackupMember{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cl.TCNamespace}}
	switch a.Kind {
	case CreateMember:
		created, err := federation.Create(ctx, c, newMember(b, a, now))
		if err != nil || !created {
			return err // one that already exists was created by an earlier plan: no second Event
		}
		rec.Eventf(b, nil, "Normal", "MemberCreated", "Create", "member %s/%s in %s, phase %s", cl.TCNamespace, name, a.Cluster, a.Phase)
		return nil
	case SetPhase:
		spec := map[string]any{"phase": a.Phase}
		if a.BackupTS != "" {
			spec["backupTS"] = a.BackupTS
		}
		return federation.MovePhase(ctx, c, p.Cluster.GetAPIReader(), ref, string(a.From), spec, now, func() bool {
			return phaseOrder[ref.Spec.Phase] > phaseOrder[a.Phase] || ref.Spec.Phase == a.Phase && (a.BackupTS == "" || ref.Spec.BackupTS == a.BackupTS)
		})
	case StartPause:
		return federation.SetSpec(ctx, c, ref, map[string]any{"startPause": true})
	case ResumeGC:
		return federation.SetSpec(ctx, c, ref, map[string]any{"resumeGC": true})
	case MarkFailed:
		return federation.SetSpec(ctx, c, ref, map[string]any{"backupFailed": true})
	case DeleteMember:
		return federation.Delete(ctx, c, ref)
	}
	return fmt.Errorf("unknown action %q", a.Kind)
}

// newMember is the member a CreateMember action creates in its plane: the backup's template
// with that plane's storage, its labels and annotations (federation.NewMeta).
func newMember(b *fedv1alpha1.VolumeBackup, a Action, now time.Time) *dpv1alpha1.VolumeBackupMember {
	cl := clusterOf(b, a.Cluster)
	m := &dpv1alpha1.VolumeBackupMember{
		ObjectMeta: federation.NewMeta(b, fedv1alpha1.MemberName(b.Name), cl.TCNamespace, now),
		Spec: dpv1alpha1.VolumeBackupMemberSpec{VolumeBackup: b.Name, K8sClusterName: a.Cluster, TCName: cl.TCName,
			TCNamespace: cl.TCNamespace, Phase: a.Phase, BackupTS: a.BackupTS, Template: *b.Spec.Template.DeepCopy()},
	}
	m.Spec.Template.StorageProvider = b.Spec.Template.MemberStorage(a.Cluster)
	return m
}

// message is what the status says now: the failure, else the Ready condition's message.
func message(b *fedv1alpha1.VolumeBackup) string {
	return federation.Message(b.Status.Conditions, fedv1alpha1.VolumeBackupFailedCondition, fedv1alpha1.VolumeBackupReadyCondition, string(b.Status.Phase))
}

// observeTerminal counts a backup that just completed or failed.
func observeTerminal(b *fedv1alpha1.VolumeBackup, before string) {
	st := b.Status
	terminal := func(p fedv1alpha1.VolumeBackupPhase) bool {
		return p == fedv1alpha1.VolumeBackupComplete || p == fedv1alpha1.VolumeBackupFailed
	}
	if terminal(fedv1alpha1.VolumeBackupPhase(before)) || !terminal(st.Phase) {
		return
	}
	outcome := metrics.OutcomeComplete
	if st.Phase == fedv1alpha1.VolumeBackupFailed {
		outcome = metrics.OutcomeFailed
	}
	metrics.BackupsFinished.WithLabelValues(outcome).Inc()
	if st.TimeStarted != nil && st.TimeCompleted != nil {
		metrics.BackupDuration.WithLabelValues(outcome).Observe(st.TimeCompleted.Sub(st.TimeStarted.Time).Seconds())
	}
	if outcome == metrics.OutcomeComplete {
		if s, err := strconv.ParseFloat(st.GCPauseSeconds, 64); err == nil {
			metrics.GCPause.Observe(s)
		}
	}
}

func clusterOf(b *fedv1alpha1.VolumeBackup, name string) fedv1alpha1.VolumeBackupMemberCluster {
	for _, c := range b.Spec.Clusters {
		if c.K8sClusterName == name {
			return c
		}
	}
	return fedv1alpha1.VolumeBackupMemberCluster{K8sClusterName: name}
}
