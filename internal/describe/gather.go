package describe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agentlease"
	"github.com/fedbr/fedbr/internal/controller/volumebackupschedule"
)

// Plane is one data plane as the manager's kubeconfig names it: its clients, or why there are
// none (a context that does not load).
type Plane struct {
	Client client.Client
	Kube   kubernetes.Interface
	Err    error
}

// Source reads the control plane and the data planes.
type Source struct {
	Control client.Client
	Planes  map[string]Plane
	// Events bounds the events shown per object group (default 10, the newest).
	Events int
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// AgentNamespace is where each plane's agent holds its Lease (default
	// agentlease.DefaultNamespace): a member's view says when no agent runs for its plane.
	AgentNamespace string
}

func (s *Source) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// ErrNotFound is returned when the operation does not exist.
var ErrNotFound = errors.New("not found")

func (s *Source) get(ctx context.Context, kind, namespace, name string, obj client.Object) error {
	err := s.Control.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s %s/%s: %w", kind, namespace, name, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("read %s %s/%s: %w", kind, namespace, name, err)
	}
	return nil
}

// Backup is the view of a VolumeBackup and its members.
func (s *Source) Backup(ctx context.Context, namespace, name string) (*View, error) {
	var b fedv1alpha1.VolumeBackup
	if err := s.get(ctx, "VolumeBackup", namespace, name, &b); err != nil {
		return nil, err
	}
	st := b.Status
	v := &View{Kind: "VolumeBackup", Namespace: b.Namespace, Name: b.Name, Phase: string(st.Phase), Conditions: st.Conditions,
		Final: slices.Contains([]fedv1alpha1.VolumeBackupPhase{fedv1alpha1.VolumeBackupComplete, fedv1alpha1.VolumeBackupFailed, fedv1alpha1.VolumeBackupCleaned}, st.Phase),
		Fields: []Field{
			{"Initializer", st.Initializer},
			{"Commit ts", st.CommitTs},
			{"Size", st.BackupSizeReadable},
			{"Incremental size", st.IncrementalBackupSizeReadable},
			{"Started", timeString(st.TimeStarted)},
			{"Completed", timeString(st.TimeCompleted)},
			{"Time taken", st.TimeTaken},
			{"GC pause", seconds(st.GCPauseSeconds)},
		}}
	v.Fields = append(v.Fields, verificationFields(st.Verification)...)
	v.Events = s.controlEvents(ctx, &b)
	for _, c := range b.Spec.Clusters {
		var m dpv1alpha1.VolumeBackupMember
		mv := s.member(ctx, c.K8sClusterName, c.TCNamespace, fedv1alpha1.MemberName(b.Name), b.UID, &m)
		if mv.ok {
			ms := m.Status
			mv.Phase, mv.Conditions, mv.Steps = ms.Phase, ms.Conditions, ms.Steps
			mv.Fields = []Field{
				{"Backup path", ms.BackupPath},
				{"Commit ts", ms.CommitTs},
				{"Snapshots", ratio(int64(ms.SnapshotsCompleted), int64(ms.SnapshotsTotal), "completed")},
				{"Size", sizeString(ms.BackupSize)},
				{"Incremental size", sizeString(ms.IncrementalBackupSize)},
				{"Clean attempts", countString(ms.CleanAttempts)},
				{"GC paused", pausedFor(ms.Steps, s.now())},
			}
		}
		v.Members = append(v.Members, mv)
	}
	return v, nil
}

// Restore is the view of a VolumeRestore and its members.
func (s *Source) Restore(ctx context.Context, namespace, name string) (*View, error) {
	var r fedv1alpha1.VolumeRestore
	if err := s.get(ctx, "VolumeRestore", namespace, name, &r); err != nil {
		return nil, err
	}
	st := r.Status
	v := &View{Kind: "VolumeRestore", Namespace: r.Namespace, Name: r.Name, Phase: string(st.Phase), Conditions: st.Conditions,
		Final: st.Phase == fedv1alpha1.VolumeRestoreComplete || st.Phase == fedv1alpha1.VolumeRestoreFailed,
		Fields: []Field{
			{"Commit ts", st.CommitTs},
			{"Started", timeString(st.TimeStarted)},
			{"Completed", timeString(st.TimeCompleted)},
			{"Time taken", st.TimeTaken},
		}}
	for _, step := range st.Steps {
		v.Fields = append(v.Fields, Field{"Step " + step.StepName, step.TimeTaken})
	}
	v.Events = s.controlEvents(ctx, &r)
	for _, c := range r.Spec.Clusters {
		var m dpv1alpha1.VolumeRestoreMember
		mv := s.member(ctx, c.K8sClusterName, c.TCNamespace, fedv1alpha1.MemberName(r.Name), r.UID, &m)
		if mv.ok {
			ms := m.Status
			mv.Phase, mv.Conditions, mv.Steps = ms.Phase, ms.Conditions, ms.Steps
			mv.Fields = []Field{
				{"Commit ts", ms.CommitTs},
				{"Volumes", ratio(int64(ms.VolumesReady), int64(ms.VolumesTotal), "ready")},
			}
		}
		v.Members = append(v.Members, mv)
	}
	return v, nil
}

// Schedule is the view of a VolumeBackupSchedule and its backups.
func (s *Source) Schedule(ctx context.Context, namespace, name string) (*View, error) {
	var sc fedv1alpha1.VolumeBackupSchedule
	if err := s.get(ctx, "VolumeBackupSchedule", namespace, name, &sc); err != nil {
		return nil, err
	}
	sp, st := sc.Spec, sc.Status
	v := &View{Kind: "VolumeBackupSchedule", Namespace: sc.Namespace, Name: sc.Name, Conditions: st.Conditions,
		Fields: []Field{
			{"Schedule", sp.Schedule},
			{"Paused", strconv.FormatBool(sp.Pause)},
			{"Max backups", int32String(sp.MaxBackups)},
			{"Max reserved time", stringOr(sp.MaxReservedTime)},
			{"Last backup", st.LastBackup},
			{"Last backup time", timeString(st.LastBackupTime)},
			{"Resumed", timeString(st.ResumeTime)},
		}}
	if vf := sp.Verify; vf != nil {
		every := int32(1)
		if vf.Every != nil {
			every = *vf.Every
		}
		v.Fields = append(v.Fields, Field{"Drills", fmt.Sprintf("every %d backup(s), into namespace %s", every, vf.Namespace)})
		if d := st.LastDrill; d != nil {
			last := d.Backup + " (not drilled)"
			if d.Restore != "" {
				last = d.Backup + " by " + d.Restore + ", started " + timeString(d.TimeStarted)
			}
			v.Fields = append(v.Fields, Field{"Last drill", last})
		}
	}
	v.Phase = "Active"
	if sp.Pause {
		v.Phase = "Paused"
	}
	var list fedv1alpha1.VolumeBackupList
	if err := s.Control.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{volumebackupschedule.ScheduleLabel: name}); err != nil {
		return nil, fmt.Errorf("list the schedule's VolumeBackups: %w", err)
	}
	for _, b := range list.Items {
		v.Backups = append(v.Backups, ScheduledBackup{Name: b.Name, Phase: string(b.Status.Phase), Created: b.CreationTimestamp.Time,
			CommitTs: b.Status.CommitTs, Size: b.Status.BackupSizeReadable, TimeTaken: b.Status.TimeTaken})
	}
	sort.SliceStable(v.Backups, func(i, j int) bool { return v.Backups[i].Created.After(v.Backups[j].Created) })
	v.Events = s.controlEvents(ctx, &sc)
	return v, nil
}

// member reads one member (into obj), its Jobs, pods and events in its plane.
func (s *Source) member(ctx context.Context, plane, namespace, name string, owner types.UID, obj client.Object) Member {
	mv := Member{Plane: plane, Namespace: namespace, Name: name}
	p, ok := s.Planes[plane]
	switch {
	case !ok:
		mv.Problem = "data plane " + plane + " is not in the data planes' kubeconfig"
		return mv
	case p.Err != nil:
		mv.Problem = "data plane unreachable: " + p.Err.Error()
		return mv
	}
	// Best effort too: whether an agent runs for the plane, which a member stuck in a phase
	// (or never taken up) is waiting for.
	var noAgent string
	if p.Kube != nil {
		if _, err := agentlease.Check(ctx, p.Kube.CoordinationV1(), cmp.Or(s.AgentNamespace, agentlease.DefaultNamespace), plane, s.now()); err != nil &&
			!errors.Is(err, agentlease.ErrNotReadable) {
			noAgent = err.Error()
		}
	}
	err := p.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		mv.Problem = "no member yet (the manager creates it when the operation starts, or it was deleted)"
		if noAgent != "" {
			mv.Problem += "; " + noAgent
		}
		return mv
	case err != nil:
		mv.Problem = "cannot read the member: " + err.Error()
		return mv
	}
	if got := obj.GetLabels()[dpv1alpha1.LabelOwnerUID]; got != string(owner) {
		mv.Problem = fmt.Sprintf("member %s/%s belongs to another operation (owner uid %q, not %q)", namespace, name, got, owner)
		return mv
	}
	mv.ok = true
	if noAgent != "" {
		mv.Notes = append(mv.Notes, noAgent)
	}
	// The rest is best effort: an identity that may read members but not Jobs, pods or events
	// (the manager's) still shows the member.
	sel := client.MatchingLabels(job.Selector(name))
	var jobs batchv1.JobList
	if err := p.Client.List(ctx, &jobs, client.InNamespace(namespace), sel); err != nil {
		mv.Notes = append(mv.Notes, "cannot list the step Jobs: "+err.Error())
	}
	var pods corev1.PodList
	if err := p.Client.List(ctx, &pods, client.InNamespace(namespace), sel); err != nil {
		mv.Notes = append(mv.Notes, "cannot list the step pods: "+err.Error())
	}
	objects := map[string]bool{obj.GetName(): true}
	sort.Slice(jobs.Items, func(i, j int) bool {
		return jobs.Items[i].CreationTimestamp.Before(&jobs.Items[j].CreationTimestamp)
	})
	for _, j := range jobs.Items {
		objects[j.Name] = true
		jv := Job{Name: j.Name, Step: j.Labels[job.LabelStep], Status: jobStatus(&j)}
		for _, pod := range pods.Items {
			if ownedBy(&pod, j.UID) {
				objects[pod.Name] = true
				jv.Pods = append(jv.Pods, podView(&pod))
			}
		}
		mv.Jobs = append(mv.Jobs, jv)
	}
	mv.Events = s.events(ctx, p.Client, namespace, func(e *corev1.Event) bool { return objects[e.InvolvedObject.Name] })
	return mv
}

func (s *Source) controlEvents(ctx context.Context, obj client.Object) []Event {
	return s.events(ctx, s.Control, obj.GetNamespace(), func(e *corev1.Event) bool { return e.InvolvedObject.UID == obj.GetUID() })
}

// events are the newest events in namespace that keep accepts, oldest first.
func (s *Source) events(ctx context.Context, c client.Client, namespace string, keep func(*corev1.Event) bool) []Event {
	var list corev1.EventList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return []Event{{Type: "Warning", Reason: "EventsUnreadable", Message: err.Error(), Time: s.now()}}
	}
	var out []Event
	for i := range list.Items {
		e := &list.Items[i]
		if !keep(e) {
			continue
		}
		out = append(out, Event{Time: eventTime(e), Type: e.Type, Reason: e.Reason, Count: e.Count,
			Object: e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name, Message: e.Message})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	n := s.Events
	if n <= 0 {
		n = 10
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

func eventTime(e *corev1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return e.CreationTimestamp.Time
}

func jobStatus(j *batchv1.Job) string {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return "Succeeded"
		case batchv1.JobFailed:
			return "Failed: " + c.Reason + " " + oneLine(c.Message)
		}
	}
	s := fmt.Sprintf("Active (%d running", j.Status.Active)
	if j.Status.Failed > 0 {
		s += fmt.Sprintf(", %d failed", j.Status.Failed)
	}
	return s + ")"
}

func ownedBy(o metav1.Object, uid types.UID) bool {
	return slices.ContainsFunc(o.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == uid })
}

func podView(p *corev1.Pod) Pod {
	v := Pod{Name: p.Name, Phase: string(p.Status.Phase), Node: p.Spec.NodeName}
	for _, cs := range p.Status.ContainerStatuses {
		v.Restarts += cs.RestartCount
		t := cs.State.Terminated
		if t == nil {
			t = cs.LastTerminationState.Terminated
		}
		if t != nil {
			v.Exit = fmt.Sprintf("exit %d", t.ExitCode)
			if t.Reason != "" {
				v.Exit += " (" + t.Reason + ")"
			}
		}
	}
	return v
}

// pausedFor says how long the member's pause has held GC so far, while it holds.
func pausedFor(steps []dpv1alpha1.StepReport, now time.Time) string {
	for _, s := range steps {
		if s.Name == dpv1alpha1.StepPause && s.GCPausedAt != nil && s.LiftedAt == nil && s.Phase != job.PhaseFailed {
			return round(now.Sub(s.GCPausedAt.Time)).String() + " so far (since " + s.GCPausedAt.UTC().Format(time.RFC3339) + ")"
		}
	}
	return ""
}

func timeString(t *metav1.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func seconds(s string) string {
	if s == "" {
		return ""
	}
	return s + "s"
}

func ratio(done, total int64, what string) string {
	if total == 0 {
		return ""
	}
	return fmt.Sprintf("%d/%d %s", done, total, what)
}

func sizeString(n int64) string {
	if n == 0 {
		return ""
	}
	return byteSize(n)
}

func countString(n int32) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(int(n))
}

func int32String(n *int32) string {
	if n == nil {
		return ""
	}
	return strconv.Itoa(int(*n))
}

func stringOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// verificationFields are the summary lines of a backup's verification: the restore that judged
// it and when, and the recovery time it measured, split by step.
func verificationFields(v *fedv1alpha1.VolumeBackupVerification) []Field {
	if v == nil {
		return nil
	}
	var split []string
	for _, s := range v.Steps {
		if s.TimeTaken != "" {
			split = append(split, s.StepName+" "+s.TimeTaken)
		}
	}
	rto := v.TimeTaken
	if rto != "" && len(split) > 0 {
		rto += " (" + strings.Join(split, ", ") + ")"
	}
	return []Field{{"Verified by", v.Restore + " at " + timeString(&v.TimeJudged)}, {"Recovery time", rto}}
}
