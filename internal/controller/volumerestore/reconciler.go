package volumerestore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/controller/federation"
	"github.com/fedbr/fedbr/internal/metrics"
	"github.com/fedbr/fedbr/internal/plane"
)

// Finalizer keeps a VolumeRestore until every member is gone from every data plane; the agent
// deletes a failed member's volumes before letting its member go.
const Finalizer = "federation.pingcap.com/volumerestore-members"

// Describe names the action for Events.
func (a Action) Describe() (string, string) { return string(a.Kind), a.Cluster }

// Reconciler is the VolumeRestore controller: federation.Driver with this package's observe,
// Plan and apply.
type Reconciler = federation.Driver[*fedv1alpha1.VolumeRestore, Action]

type decision = federation.Decision[*fedv1alpha1.VolumeRestore, Action]

// NewReconciler builds the controller over the control-plane client and the data planes.
func NewReconciler(c client.Client, planes *plane.Set, rec events.EventRecorder) *Reconciler {
	r := &Reconciler{
		Name: "volumerestore", Finalizer: Finalizer, Client: c, Planes: planes, Recorder: rec,
		New:     func() *fedv1alpha1.VolumeRestore { return &fedv1alpha1.VolumeRestore{} },
		NewList: func() client.ObjectList { return &fedv1alpha1.VolumeRestoreList{} },
		Phase:   func(r *fedv1alpha1.VolumeRestore) string { return string(r.Status.Phase) },
		Failed:  func(r *fedv1alpha1.VolumeRestore) bool { return r.Status.Phase == fedv1alpha1.VolumeRestoreFailed },
		Message: func(r *fedv1alpha1.VolumeRestore) string {
			return federation.Message(r.Status.Conditions, fedv1alpha1.VolumeRestoreFailedCondition, fedv1alpha1.VolumeRestoreReadyCondition, string(r.Status.Phase))
		},
		OnPhase:            observeTerminal,
		OnWrite:            observeSteps,
		ObservedGeneration: func(r *fedv1alpha1.VolumeRestore) *int64 { return &r.Status.ObservedGeneration },
	}
	r.Decide = func(ctx context.Context, vr *fedv1alpha1.VolumeRestore, now time.Time) (decision, error) {
		o, err := observe(ctx, planes, vr)
		if err != nil {
			return decision{}, err
		}
		res := Plan(o, now)
		return decision{Actions: res.Actions, RemoveFinalizer: res.RemoveFinalizer, RequeueAfter: res.RequeueAfter,
			SetStatus: func(vr *fedv1alpha1.VolumeRestore) { vr.Status = res.Status }}, nil
	}
	r.Apply = func(ctx context.Context, vr *fedv1alpha1.VolumeRestore, a Action, now time.Time) error {
		return apply(ctx, planes, rec, vr, a, now)
	}
	return r
}

// WatchPlane watches the VolumeRestoreMembers of a data plane (call once its cache synced).
func WatchPlane(r *Reconciler, p *plane.Plane) error {
	return federation.Watch(r, p, &dpv1alpha1.VolumeRestoreMember{})
}

// observe reads every member from its plane's cache. A plane whose read fails counts as
// unreachable for this pass.
func observe(ctx context.Context, planes *plane.Set, vr *fedv1alpha1.VolumeRestore) (Observed, error) {
	o := Observed{Restore: vr, Members: map[string]Member{}, Known: planes.Known(), Reachable: planes.Reachable(), Namespaces: planes.Namespaces(),
		ForceRemove: vr.Annotations[fedv1alpha1.AnnotationForceRemove] == "true"}
	for _, c := range vr.Spec.Clusters {
		p, ok := planes.Get(c.K8sClusterName)
		if !ok || !o.Reachable[c.K8sClusterName] {
			continue
		}
		var m dpv1alpha1.VolumeRestoreMember
		err := p.Cluster.GetClient().Get(ctx, types.NamespacedName{Namespace: c.TCNamespace, Name: fedv1alpha1.MemberName(vr.Name)}, &m)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			o.Reachable[c.K8sClusterName] = false
			continue
		}
		if err := federation.CheckOwner(&m, vr, c.K8sClusterName); err != nil {
			return o, err
		}
		o.Members[c.K8sClusterName] = Member{Exists: true, Phase: m.Spec.Phase, DataMember: m.Spec.DataMember, ResolvedTS: m.Spec.ResolvedTS, PhaseSince: federation.PhaseSince(&m), Status: m.Status}
	}
	return o, nil
}

func apply(ctx context.Context, planes *plane.Set, rec events.EventRecorder, vr *fedv1alpha1.VolumeRestore, a Action, now time.Time) error {
	p, ok := planes.Get(a.Cluster)
	if !ok {
		return fmt.Errorf("no data plane %q", a.Cluster)
	}
	c := p.Cluster.GetClient()
	cl := clusterOf(vr, a.Cluster)
	name := fedv1alpha1.MemberName(vr.Name)
	ref := &dpv1alpha1.VolumeRestoreMember{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cl.TCNamespace}}
	switch a.Kind {
	case CreateMember:
		created, err := federation.Create(ctx, c, newMember(vr, a, now))
		if err != nil || !created {
			return err // one that already exists was created by an earlier plan: no second Event
		}
		rec.Eventf(vr, nil, "Normal", "MemberCreated", "Create", "member %s/%s in %s, phase %s", cl.TCNamespace, name, a.Cluster, a.Phase)
		return nil
	case SetPhase:
		spec := map[string]any{"phase": a.Phase}
		if a.ResolvedTS != 0 {
			spec["resolvedTS"] = strconv.FormatUint(a.ResolvedTS, 10)
		}
		return federation.MovePhase(ctx, c, p.Cluster.GetAPIReader(), ref, string(a.From), spec, now, func() bool {
			return phaseOrder[ref.Spec.Phase] >= phaseOrder[a.Phase]
		})
	case MarkDataMember:
		return federation.SetSpec(ctx, c, ref, map[string]any{"dataMember": true, "resolvedTS": strconv.FormatUint(a.ResolvedTS, 10)})
	case DeleteMember:
		return federation.Delete(ctx, c, ref)
	}
	return fmt.Errorf("unknown action %q", a.Kind)
}

// phaseOrder ranks member phases in the only order they move.
var phaseOrder = map[dpv1alpha1.RestoreMemberPhase]int{dpv1alpha1.RestoreMemberRestoreVolume: 1, dpv1alpha1.RestoreMemberRestoreData: 2, dpv1alpha1.RestoreMemberRestoreFinish: 3}

// newMember is the member a CreateMember action creates in its plane: the restore's template,
// that plane's backup and zone, the restore's labels and annotations (federation.NewMeta).
func newMember(vr *fedv1alpha1.VolumeRestore, a Action, now time.Time) *dpv1alpha1.VolumeRestoreMember {
	cl := clusterOf(vr, a.Cluster)
	return &dpv1alpha1.VolumeRestoreMember{
		ObjectMeta: federation.NewMeta(vr, fedv1alpha1.MemberName(vr.Name), cl.TCNamespace, now),
		Spec: dpv1alpha1.VolumeRestoreMemberSpec{VolumeRestore: vr.Name, K8sClusterName: a.Cluster, TCName: cl.TCName,
			TCNamespace: cl.TCNamespace, AZName: cl.AZName, Backup: *cl.Backup.DeepCopy(), Phase: a.Phase, Template: *vr.Spec.Template.DeepCopy()},
	}
}

// observeTerminal counts a restore that just completed or failed.
func observeTerminal(vr *fedv1alpha1.VolumeRestore, before string) {
	st := vr.Status
	terminal := func(p fedv1alpha1.VolumeRestorePhase) bool {
		return p == fedv1alpha1.VolumeRestoreComplete || p == fedv1alpha1.VolumeRestoreFailed
	}
	if terminal(fedv1alpha1.VolumeRestorePhase(before)) || !terminal(st.Phase) {
		return
	}
	outcome := metrics.OutcomeComplete
	if st.Phase == fedv1alpha1.VolumeRestoreFailed {
		outcome = metrics.OutcomeFailed
	}
	metrics.RestoresFinished.WithLabelValues(outcome).Inc()
	if st.TimeStarted != nil && st.TimeCompleted != nil {
		metrics.RestoreDuration.WithLabelValues(outcome).Observe(st.TimeCompleted.Sub(st.TimeStarted.Time).Seconds())
	}
}

// observeSteps records the time of each step the write completed (its timeCompleted new in
// the status): once per step, as the status is written once with it.
func observeSteps(old, vr *fedv1alpha1.VolumeRestore) {
	done := map[string]bool{}
	for _, s := range old.Status.Steps {
		done[s.StepName] = s.TimeCompleted != nil
	}
	for _, s := range vr.Status.Steps {
		if s.TimeCompleted == nil || s.TimeStarted == nil || done[s.StepName] {
			continue
		}
		metrics.RestoreStepDuration.WithLabelValues(s.StepName).Observe(s.TimeCompleted.Sub(s.TimeStarted.Time).Seconds())
	}
}

func clusterOf(vr *fedv1alpha1.VolumeRestore, name string) fedv1alpha1.VolumeRestoreMemberCluster {
	for _, c := range vr.Spec.Clusters {
		if c.K8sClusterName == name {
			return c
		}
	}
	return fedv1alpha1.VolumeRestoreMemberCluster{K8sClusterName: name}
}
