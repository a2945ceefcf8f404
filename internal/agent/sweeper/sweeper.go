// Package sweeper is the agent's orphan sweeper: it deletes the snapshots and volumes that
// fedbr's steps created in this data plane's AWS account-region but never recorded, once the
// member they were made for is gone — a CreateSnapshots or CreateVolume whose answer was lost
// when its step was stopped, so that the resource appeared after the cleanup that swept the
// member's tag, or a cleanup that failed. No path can leak for good.
//
// What it may delete is marked by the steps themselves: a snapshot carries
// meta.TagBackupPending from its CreateSnapshots until its backup completes, a volume carries
// meta.TagRestorePending from its CreateVolume until restore-volumes records it; the value
// names the Kubernetes cluster and namespace of the member. A completed backup (kept by
// cleanPolicy Retain after its member is gone) and a restored volume (the TidbCluster's) are
// no longer marked, and neither is anything upstream BR made, so the sweeper never sees
// them.
//
// Every Interval the leader lists the marked snapshots (DescribeSnapshots, owner self, tag-key
// filter) and volumes (DescribeVolumes, tag-key filter), then the members and
// PersistentVolumes straight from the API server (no cache that may be stale or unsynced),
// asks the pure Decide what to delete and deletes it, one resource at a time: an Event on the
// agent's Pod and fedbr_agent_orphans_deleted_total per deletion. A listing that fails makes
// the sweep give up and delete nothing.
package sweeper

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/apply"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/metrics"
	brsnapshot "github.com/fedbr/fedbr/internal/br/snapshot"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/meta"
	"github.com/fedbr/fedbr/internal/podenv"
)

// Defaults of the agent's flags.
const (
	DefaultInterval = 10 * time.Minute
	DefaultGrace    = time.Hour
	// DefaultPageSize is how many objects one list call of a sweep asks for.
	DefaultPageSize = 100
)

// Cloud is what the sweeper needs from the provider.
type Cloud interface {
	ListSnapshots(ctx context.Context, tags map[string]string) ([]cloud.Snapshot, error)
	ListVolumes(ctx context.Context, tags map[string]string) ([]cloud.Volume, error)
	DeleteSnapshots(ctx context.Context, ids []string) error
	DeleteVolumes(ctx context.Context, ids []string) error
}

// Sweeper is the orphan sweeper, a manager.Runnable that runs only on the elected leader.
//
// +kubebuilder:rbac:groups=dataplane.fedbr.io,resources=volumebackupmembers;volumerestoremembers,verbs=list
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=list
// +kubebuilder:rbac:groups="",resources=pods,verbs=get
// +kubebuilder:rbac:groups="",resources=namespaces,resourceNames=kube-system,verbs=get
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch
type Sweeper struct {
	Cloud Cloud
	// Reader reads the members, PersistentVolumes and the agent's Pod from the API server
	// (the manager's APIReader, not its cache).
	Reader   client.Reader
	Recorder apply.Recorder
	Metrics  *metrics.Metrics
	Scope    Scope
	// Interval between sweeps (the first runs at once); Grace the age a resource must reach.
	Interval time.Duration
	Grace    time.Duration
	// Pod is the agent's own Pod, the object its Events are about; none when Name is empty.
	Pod types.NamespacedName
	// Now is the clock; nil is the wall clock.
	Now func() time.Time
	// Log is the sweeper's logger.
	Log logr.Logger
	// PageSize bounds the members and PersistentVolumes one list call returns (DefaultPageSize
	// when 0): a plane that kept months of backups has thousands of members, each with its
	// snapshot result, and one answer holding all of them would be the agent's peak memory.
	PageSize int64

	pod *corev1.Pod
}

var (
	_ manager.Runnable               = (*Sweeper)(nil)
	_ manager.LeaderElectionRunnable = (*Sweeper)(nil)
)

// NeedLeaderElection says the sweeper runs only on the leader: two replicas must not delete
// on two views of the members.
func (s *Sweeper) NeedLeaderElection() bool { return true }

// Start sweeps at once and then every Interval until ctx ends. A failed sweep is logged and
// counted; the next one runs on time.
func (s *Sweeper) Start(ctx context.Context) error {
	ctx = log.IntoContext(ctx, s.Log)
	s.Log.Info("Starting the orphan sweeper", "interval", s.Interval.String(), "grace", s.Grace.String(), "cluster", s.Scope.Cluster, "namespaces", s.Scope.Namespaces)
	if s.Pod.Name == "" {
		s.Log.Info("No $POD_NAMESPACE and $POD_NAME: orphan deletions are logged and counted, not recorded as Events")
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.Log.Error(err, "Orphan sweep failed; the next one runs on time", "next", s.Interval.String())
		}
		t.Reset(s.Interval)
	}
}

// Sweep runs one sweep: observe, decide, delete. It returns the plan it carried out and the
// errors of what failed (a failed listing deletes nothing).
func (s *Sweeper) Sweep(ctx context.Context) (Plan, error) {
	lg := log.FromContext(ctx)
	o, err := s.observe(ctx)
	if err != nil {
		s.countError(ctx)
		return Plan{}, err
	}
	p := Decide(o)
	for _, k := range p.Keep {
		lg.V(1).Info("Keeping a snapshot or volume marked pending", "kind", k.Kind, "id", k.ID, "reason", k.Reason)
	}
	var errs []error
	for _, orphan := range p.Delete {
		if err := s.delete(ctx, orphan); err != nil {
			errs = append(errs, err)
		}
	}
	return p, errors.Join(errs...)
}

// countError counts a failure, unless the agent is stopping (ctx ended).
func (s *Sweeper) countError(ctx context.Context) {
	if ctx.Err() == nil {
		s.Metrics.OrphanSweepErrors.Inc()
	}
}

// observe lists the marked resources first, then the members and PVs (see Observed).
func (s *Sweeper) observe(ctx context.Context) (Observed, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	o := Observed{Scope: s.Scope, Grace: s.Grace}
	var err error
	if o.Snapshots, err = s.Cloud.ListSnapshots(ctx, map[string]string{meta.TagBackupPending: ""}); err != nil {
		return o, fmt.Errorf("list snapshots tagged %s: %w", meta.TagBackupPending, err)
	}
	if o.Volumes, err = s.Cloud.ListVolumes(ctx, map[string]string{meta.TagRestorePending: ""}); err != nil {
		return o, fmt.Errorf("list volumes tagged %s: %w", meta.TagRestorePending, err)
	}
	o.Now = now()
	if len(o.Snapshots) == 0 && len(o.Volumes) == 0 {
		return o, nil
	}
	// One list per namespace of the scope (one list of all when it has none): an agent whose
	// rights are Roles in its namespaces may not list across them.
	nss := s.Scope.Namespaces
	if len(nss) == 0 {
		nss = []string{metav1.NamespaceAll}
	}
	o.BackupMembers, o.Referenced, o.RestoreMembers = map[string]bool{}, map[string]string{}, map[string]bool{}
	for _, ns := range nss {
		if err := pages(ctx, s, func() *dpv1alpha1.VolumeBackupMemberList { return &dpv1alpha1.VolumeBackupMemberList{} }, func(l *dpv1alpha1.VolumeBackupMemberList) {
			for i := range l.Items {
				m := &l.Items[i]
				o.BackupMembers[string(m.UID)] = true
				ids, err := recordedSnapshots(m)
				if err != nil {
					o.ReferencesUnknown = "VolumeBackupMember " + m.Namespace + "/" + m.Name
					log.FromContext(ctx).Info("Cannot read the snapshots a member records; deleting no snapshot", "member", o.ReferencesUnknown, "error", err.Error())
				}
				for _, id := range ids {
					o.Referenced[id] = m.Namespace + "/" + m.Name
				}
			}
		}, client.InNamespace(ns)); err != nil {
			return o, fmt.Errorf("list VolumeBackupMembers: %w", err)
		}
		if err := pages(ctx, s, func() *dpv1alpha1.VolumeRestoreMemberList { return &dpv1alpha1.VolumeRestoreMemberList{} }, func(l *dpv1alpha1.VolumeRestoreMemberList) {
			for i := range l.Items {
				o.RestoreMembers[string(l.Items[i].UID)] = true
			}
		}, client.InNamespace(ns)); err != nil {
			return o, fmt.Errorf("list VolumeRestoreMembers: %w", err)
		}
	}
	if len(o.Volumes) == 0 {
		return o, nil
	}
	o.Bound = map[string]string{}
	if err := pages(ctx, s, func() *corev1.PersistentVolumeList { return &corev1.PersistentVolumeList{} }, func(l *corev1.PersistentVolumeList) {
		for i := range l.Items {
			if id := meta.PVVolumeID(&l.Items[i]); id != "" {
				o.Bound[id] = l.Items[i].Name
			}
		}
	}); err != nil {
		return o, fmt.Errorf("list PersistentVolumes: %w", err)
	}
	return o, nil
}

// pages lists one page at a time, at most PageSize objects each, into a new list per page,
// calling each once per page: the pages of one listing are one consistent view (the API server
// serves every continuation at the first page's resourceVersion, or refuses it when that has
// expired, and the sweep then deletes nothing).
func pages[L client.ObjectList](ctx context.Context, s *Sweeper, newList func() L, each func(L), opts ...client.ListOption) error {
	size := s.PageSize
	if size <= 0 {
		size = DefaultPageSize
	}
	cont := ""
	for {
		list := newList()
		if err := s.Reader.List(ctx, list, append(opts, client.Limit(size), client.Continue(cont))...); err != nil {
			return err
		}
		each(list)
		if cont = list.GetContinue(); cont == "" {
			return nil
		}
	}
}

// recordedSnapshots are the snapshot ids in a backup member's snapshot result.
func recordedSnapshots(m *dpv1alpha1.VolumeBackupMember) ([]string, error) {
	var res brsnapshot.Result
	if ok, err := job.ReportOf(m.Status.Steps).Result(job.StepSnapshot, &res); !ok || err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(res.Snapshots))
	for _, sn := range res.Snapshots {
		ids = append(ids, sn.SnapshotID)
	}
	return ids, nil
}

// delete deletes one orphan (one already gone counts as deleted), counts it and records an
// Event on the agent's Pod.
func (s *Sweeper) delete(ctx context.Context, o Orphan) error {
	lg := log.FromContext(ctx).WithValues("kind", o.Kind, "id", o.ID, "owner", o.Owner, "namespace", o.Namespace, "age", o.Age.Round(time.Second).String())
	lg.Info("Deleting an orphan: " + o.Why())
	var err error
	if o.Kind == metrics.OrphanSnapshot {
		err = s.Cloud.DeleteSnapshots(ctx, []string{o.ID})
	} else {
		err = s.Cloud.DeleteVolumes(ctx, []string{o.ID})
	}
	pod := s.eventPod(ctx)
	if err != nil {
		s.countError(ctx)
		if pod != nil && ctx.Err() == nil {
			s.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, "OrphanDeleteFailed", "Delete", "deleting orphan %s %s failed (retried next sweep): %v", o.Kind, o.ID, err)
		}
		return fmt.Errorf("delete orphan %s %s: %w", o.Kind, o.ID, err)
	}
	s.Metrics.OrphansDeleted.WithLabelValues(o.Kind).Inc()
	if pod != nil {
		s.Recorder.Eventf(pod, nil, corev1.EventTypeNormal, "OrphanDeleted", "Delete", "deleted orphan %s %s: %s", o.Kind, o.ID, o.Why())
	}
	lg.Info("Deleted an orphan")
	return nil
}

// eventPod is the agent's Pod, read once; nil (and a log line each time) when it is not known
// or cannot be read: the deletion is still logged and counted.
func (s *Sweeper) eventPod(ctx context.Context) *corev1.Pod {
	if s.pod != nil || s.Pod.Name == "" {
		return s.pod
	}
	pod := &corev1.Pod{}
	if err := s.Reader.Get(ctx, s.Pod, pod); err != nil {
		log.FromContext(ctx).Info("Cannot read the agent's Pod to record the orphan Event on; the deletion is only logged and counted", "pod", s.Pod.String(), "error", err.Error())
		return nil
	}
	s.pod = pod
	return pod
}

// PodNameEnv names the variable the agent's pod spec sets (downward API, metadata.name).
const PodNameEnv = "POD_NAME"

// PodFromEnv is the agent's Pod as the downward API gives it ($POD_NAMESPACE, $POD_NAME);
// empty when either is unset.
func PodFromEnv() types.NamespacedName {
	ns, name := os.Getenv(podenv.NamespaceEnv), os.Getenv(PodNameEnv)
	if ns == "" || name == "" {
		return types.NamespacedName{}
	}
	return types.NamespacedName{Namespace: ns, Name: name}
}

// ClusterID is this Kubernetes cluster's identity in the pending tags: the uid of its
// kube-system namespace, which every cluster has from its creation and keeps for its life, and
// which differs between clusters sharing an AWS account.
func ClusterID(ctx context.Context, r client.Reader) (string, error) {
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, types.NamespacedName{Name: metav1.NamespaceSystem}, ns); err != nil {
		return "", fmt.Errorf("read namespace %s, whose uid identifies this cluster in the %s and %s tags: %w",
			metav1.NamespaceSystem, meta.TagBackupPending, meta.TagRestorePending, err)
	}
	if ns.UID == "" {
		return "", fmt.Errorf("namespace %s has no uid", metav1.NamespaceSystem)
	}
	return string(ns.UID), nil
}
