package crash

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/lab/controlplane"
	"github.com/fedbr/fedbr/internal/lab/demo"
	"github.com/fedbr/fedbr/internal/lab/env"
)

// Target is what a kill point kills.
type Target string

const (
	// KillManager SIGKILLs `fedbr manager` and starts it again (with Options.Install: every
	// replica of its Deployment, which the lab's kubelet restarts).
	KillManager Target = "manager"
	// KillAgent SIGKILLs the agent of the point's data plane and starts it again (with
	// Options.Install: every replica of its Deployment, which the lab's kubelet restarts).
	KillAgent Target = "agent"
	// KillStep SIGKILLs the running pod of the point's step in its data plane (its container's
	// process group, exit 137); the Job and the agent decide what follows.
	KillStep Target = "step"
	// StopAPIServer freezes the point's data plane's kube-apiserver (SIGSTOP) for
	// APIServerOutage, then lets it go on (SIGCONT): every client of that plane hangs, as
	// behind a partition.
	StopAPIServer Target = "apiserver"
)

// APIServerOutage is how long StopAPIServer keeps a data plane's API server stopped.
const APIServerOutage = 60 * time.Second

// KillPoint is one crash of the crash suite: where in a backup or restore, and what is killed.
type KillPoint struct {
	Name string
	// Restore puts the point in a restore (of a backup taken first); otherwise in a backup.
	Restore bool
	// Scratch makes the point's restore a scratch restore (a drill): its agents make the
	// TidbClusters, and once it is deleted nothing it made may be left (demo.ScratchRemoved).
	Scratch bool
	// Teardown strikes while the point's restore, once it completed, is deleted: as soon as
	// the member of the point's plane is being deleted (its agent removing what it made). At is
	// then when the restore may be deleted.
	Teardown bool
	Target   Target
	// Plane indexes the lab's data planes: the agent, step or API server hit (0 holds the
	// pause). For KillStep, -1 is whichever plane runs the step (restore-data's).
	Plane int
	// Step is the step whose running pod KillStep kills (job.StepPause, job.StepSnapshot, …).
	Step string
	// At says the point is reached, from the object as the control plane shows it.
	At func(b *fedv1alpha1.VolumeBackup, r *fedv1alpha1.VolumeRestore) bool
	// MayFail allows the point to end Failed (with a reason); otherwise it must complete.
	MayFail bool
	// HoldSnapshots holds every CreateSnapshots call in the AWS double, in flight, from before
	// the backup starts until the strike: the pause window then stays open until the point is
	// struck inside it, however short fedbr keeps it.
	HoldSnapshots bool
}

// CrashResult is what one kill point came to.
type CrashResult struct {
	Point string
	// Outcome is Complete, or Failed with its reason.
	Outcome string
	// Phases are the phases observed, in order.
	Phases []string
	// Exact says the restore (of the backup, for a backup point that completed) was checked
	// exact by the bank checker.
	Exact bool
	// Lifted is how long after the end GC and PD scheduling were seen lifted in the source.
	Lifted time.Duration
	Err    error
}

// RunCrash runs the crash suite's points in one lab: the source cluster and its bank workload
// once, a backup per backup point and, for the restore points, one backup restored once per
// point. After each point: the backup or restore ended Complete (a completed backup is restored
// and checked exact) or, where allowed, Failed with a reason; no phase moved backwards; the
// source holds no GC safepoint or paused scheduler within the pause's TTL; and, once the
// point's objects are deleted, the AWS double holds no snapshot of it and no volume that no PV
// uses.
func RunCrash(ctx context.Context, o demo.Options, points []KillPoint) ([]CrashResult, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.WithDefaults()
	d, err := newRun(ctx, o)
	if err != nil {
		return nil, err
	}
	defer d.Stop()
	if err := d.StartSuite(ctx); err != nil {
		return nil, err
	}
	var base *fedv1alpha1.VolumeBackup
	var out []CrashResult
	for i, p := range points {
		if p.Restore && base == nil {
			d.Say("crash suite: a backup for the restore points")
			if base, err = d.Backup(ctx); err != nil {
				return out, fmt.Errorf("the restore points' backup: %w", err)
			}
			if err := d.WaitTransfersAfter(ctx, base); err != nil {
				return out, err
			}
		}
		d.Say("crash point %d/%d: %s", i+1, len(points), p.Name)
		res := d.crashPoint(ctx, i, p, base)
		if res.Err != nil {
			d.Say("crash point %s: %v", p.Name, res.Err)
		} else {
			d.Say("crash point %s: %s, phases %v, lifted %s after the end", p.Name, res.Outcome, res.Phases, res.Lifted.Round(time.Millisecond))
		}
		out = append(out, res)
		if ctx.Err() != nil {
			break
		}
	}
	return out, nil
}

// crashPoint runs one point.
func (d *run) crashPoint(ctx context.Context, i int, p KillPoint, base *fedv1alpha1.VolumeBackup) (res CrashResult) {
	res.Point = p.Name
	c := d.Kube()[d.Lab().Control]
	var b *fedv1alpha1.VolumeBackup
	restoreNS := fmt.Sprintf(demo.CrashNamespace, i)
	var release func() error
	if p.HoldSnapshots {
		var err error
		if release, err = d.HoldCalls(ctx, "CreateSnapshots"); err != nil {
			res.Err = err
			return res
		}
		defer func() { _ = release() }()
	}
	if p.Restore {
		b = base
	} else {
		b = d.NewBackup(fmt.Sprintf("crash-%d-%s", i, time.Now().UTC().Format("150405")))
		if err := c.Create(ctx, b); err != nil {
			res.Err = fmt.Errorf("create VolumeBackup: %w", err)
			return res
		}
	}
	// The restore runs the demo's own restore, waiting for Complete; a point allowed to fail
	// may end it Failed.
	restoreDone := make(chan error, 1)
	var r *fedv1alpha1.VolumeRestore
	if p.Restore {
		d.Options().RestoreNamespace = restoreNS
		d.Options().RestoreScratch = p.Scratch
		defer func() { d.Options().RestoreScratch = false }()
		go func() {
			var err error
			r, err = d.Restore(ctx, b)
			restoreDone <- err
		}()
	}
	watch := &phaseWatch{}
	err := d.watchPoint(ctx, p, b, watch)
	if release != nil {
		if rerr := release(); err == nil {
			err = rerr
		}
	}
	if err == nil {
		res.Outcome, err = d.pointOutcome(ctx, p, b, watch, restoreDone)
	}
	res.Phases = watch.phases
	if err == nil && watch.backwards != "" {
		err = fmt.Errorf("phase moved backwards: %s", watch.backwards)
	}
	if err == nil {
		res.Lifted, err = d.WaitLifted(ctx)
	}
	if err == nil && res.Outcome == "Complete" {
		err = c.Get(ctx, client.ObjectKeyFromObject(b), b) // its commit ts
	}
	if err == nil && res.Outcome == "Complete" {
		if !p.Restore {
			d.Options().RestoreNamespace = restoreNS
			r, err = d.Restore(ctx, b)
		}
		if err == nil {
			if err = d.WaitTransfersAfter(ctx, b); err == nil {
				err = d.Check(ctx, b, r)
			}
		}
		res.Exact = err == nil
	}
	if cerr := d.cleanPoint(ctx, p, b, base, restoreNS); err == nil {
		err = cerr
	}
	res.Err = err
	return res
}

// phaseWatch records the phases seen and the first backward move.
type phaseWatch struct {
	phases    []string
	backwards string
}

func (w *phaseWatch) see(phase string, order []string) {
	if phase == "" || len(w.phases) > 0 && w.phases[len(w.phases)-1] == phase {
		return
	}
	rank := func(p string) int {
		for i, o := range order {
			if o == p {
				return i
			}
		}
		return -1
	}
	if n := len(w.phases); n > 0 && w.backwards == "" && rank(phase) < rank(w.phases[n-1]) {
		w.backwards = w.phases[n-1] + " → " + phase
	}
	w.phases = append(w.phases, phase)
}

var (
	backupOrder = []string{"", string(fedv1alpha1.VolumeBackupPending), string(fedv1alpha1.VolumeBackupRunning),
		string(fedv1alpha1.VolumeBackupSnapshotsCreated), string(fedv1alpha1.VolumeBackupComplete), string(fedv1alpha1.VolumeBackupFailed)}
	restoreOrder = []string{"", string(fedv1alpha1.VolumeRestorePending), string(fedv1alpha1.VolumeRestoreRunning),
		string(fedv1alpha1.VolumeRestoreVolumeComplete), string(fedv1alpha1.VolumeRestoreTikvComplete),
		string(fedv1alpha1.VolumeRestoreDataComplete), string(fedv1alpha1.VolumeRestoreComplete), string(fedv1alpha1.VolumeRestoreFailed)}
)

// observe reads the point's object and records its phase.
func (d *run) observe(ctx context.Context, p KillPoint, b *fedv1alpha1.VolumeBackup, w *phaseWatch) (*fedv1alpha1.VolumeBackup, *fedv1alpha1.VolumeRestore, error) {
	c := d.Kube()[d.Lab().Control]
	if p.Restore {
		r := &fedv1alpha1.VolumeRestore{}
		err := c.Get(ctx, client.ObjectKey{Namespace: demo.ControlNamespace, Name: b.Name}, r)
		if err != nil {
			return nil, nil, err
		}
		w.see(string(r.Status.Phase), restoreOrder)
		return nil, r, nil
	}
	got := &fedv1alpha1.VolumeBackup{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(b), got); err != nil {
		return nil, nil, err
	}
	w.see(string(got.Status.Phase), backupOrder)
	return got, nil, nil
}

// watchPoint follows the point's object through a watch until the point is reached, then
// strikes. A watch hands over every version the API server stored, so a state that lasts one
// write (the backup's Arming, while the members' snapshot steps start) is seen however short
// it is; a poll could step over it.
func (d *run) watchPoint(ctx context.Context, p KillPoint, b *fedv1alpha1.VolumeBackup, w *phaseWatch) error {
	timeout := d.Options().Timeout
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	wc, ok := d.Kube()[d.Lab().Control].(client.WithWatch)
	if !ok {
		return errors.New("crash point " + p.Name + ": the control plane's client cannot watch")
	}
	var list client.ObjectList = &fedv1alpha1.VolumeBackupList{}
	key := client.ObjectKeyFromObject(b)
	if p.Restore {
		list, key = &fedv1alpha1.VolumeRestoreList{}, client.ObjectKey{Namespace: demo.ControlNamespace, Name: b.Name}
	}
	rv := "" // the last version seen: a watch opened again goes on from it
	for {
		wi, err := wc.Watch(ctx, list, client.InNamespace(key.Namespace), client.MatchingFields{"metadata.name": key.Name},
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		if err == nil {
			var reached bool
			reached, rv, err = followPoint(p, wi, w, rv)
			wi.Stop()
			if reached && p.Teardown {
				return nil // struck in cleanPoint, while the restore is deleted
			}
			if reached {
				return d.strike(ctx, p, b)
			}
			if err != nil {
				return fmt.Errorf("crash point %s: %w", p.Name, err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("crash point %s: not reached within %s (phases seen: %v): %w", p.Name, timeout, w.phases, ctx.Err())
		case <-time.After(100 * time.Millisecond): // a watch that could not open or dropped
		}
	}
}

// followPoint reads one watch's events until the point is reached (true), the object failed
// first (an error) or the watch ends; it returns the last version seen ("" after the API server
// answered that the version is too old to go on from).
func followPoint(p KillPoint, wi watch.Interface, w *phaseWatch, rv string) (bool, string, error) {
	for ev := range wi.ResultChan() {
		var gb *fedv1alpha1.VolumeBackup
		var gr *fedv1alpha1.VolumeRestore
		switch o := ev.Object.(type) {
		case *fedv1alpha1.VolumeBackup:
			gb, rv = o, o.ResourceVersion
			w.see(string(o.Status.Phase), backupOrder)
		case *fedv1alpha1.VolumeRestore:
			gr, rv = o, o.ResourceVersion
			w.see(string(o.Status.Phase), restoreOrder)
		default:
			return false, "", nil // an error event (the version expired): open a new watch from now
		}
		if ev.Type == watch.Deleted {
			return false, rv, errors.New("the object was deleted before the point was reached")
		}
		if gb != nil && gb.Status.Phase == fedv1alpha1.VolumeBackupFailed || gr != nil && gr.Status.Phase == fedv1alpha1.VolumeRestoreFailed {
			return false, rv, errors.New("failed before the point was reached")
		}
		if p.At(gb, gr) {
			return true, rv, nil
		}
	}
	return false, rv, nil
}

// strike kills (or stops) the point's target.
func (d *run) strike(ctx context.Context, p KillPoint, b *fedv1alpha1.VolumeBackup) error {
	var planes []string
	for i, dp := range d.Lab().DataPlanes {
		if p.Plane < 0 || i == p.Plane {
			planes = append(planes, dp.Cluster)
		}
	}
	if len(planes) == 0 {
		return fmt.Errorf("no data plane %d", p.Plane)
	}
	plane := planes[0]
	switch p.Target {
	case KillManager:
		if d.Options().Install {
			return d.RestartPods(ctx, d.Lab().Control, env.ManagerRelease)
		}
		return d.RestartController("manager")
	case KillAgent:
		if d.Options().Install {
			return d.RestartPods(ctx, plane, env.AgentRelease)
		}
		return d.RestartController("agent-" + plane)
	case KillStep:
		ns := d.Options().Namespace
		if p.Restore {
			ns = d.Options().RestoreNamespace
		}
		return d.KillStep(ctx, planes, ns, fedv1alpha1.MemberName(b.Name), p.Step)
	case StopAPIServer:
		pid, err := apiServerPID(d.Lab().Dir, plane)
		if err != nil {
			return err
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return fmt.Errorf("stop the API server of %s: %w", plane, err)
		}
		d.Say("  API server of %s stopped for %s", plane, APIServerOutage)
		go func() {
			t := time.NewTimer(APIServerOutage)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}()
		return nil
	}
	return fmt.Errorf("unknown target %q", p.Target)
}

// apiServerPID is the pid of a lab cluster's kube-apiserver.
func apiServerPID(dir, cluster string) (int, error) {
	st, err := controlplane.Load(dir)
	if err != nil {
		return 0, err
	}
	for _, c := range st.Clusters {
		if c.Name != cluster {
			continue
		}
		for _, p := range c.Processes {
			if p.Component == controlplane.APIServer && p.Running() {
				return p.PID, nil
			}
		}
	}
	return 0, fmt.Errorf("no running kube-apiserver for %s in %s", cluster, dir)
}

// pointOutcome waits for the point's backup or restore to end and says how.
func (d *run) pointOutcome(ctx context.Context, p KillPoint, b *fedv1alpha1.VolumeBackup, w *phaseWatch, restoreDone <-chan error) (string, error) {
	var outcome string
	err := d.Poll(ctx, "the end of "+p.Name, func() (bool, string, error) {
		gb, gr, err := d.observe(ctx, p, b, w)
		if err != nil {
			return false, "", err
		}
		var phase string
		var conds []metav1.Condition
		if gb != nil {
			phase, conds = string(gb.Status.Phase), gb.Status.Conditions
		} else {
			phase, conds = string(gr.Status.Phase), gr.Status.Conditions
		}
		switch phase {
		case "Complete":
			outcome = "Complete"
			return true, "", nil
		case "Failed":
			c := meta.FindStatusCondition(conds, "Failed")
			if c == nil || c.Reason == "" {
				return false, "", errors.New("failed without a reason")
			}
			outcome = "Failed: " + c.Reason
			return true, "", nil
		}
		return false, phase, nil
	})
	if err != nil {
		return outcome, err
	}
	if p.Restore {
		rerr := <-restoreDone
		if outcome == "Complete" && rerr != nil {
			return outcome, rerr
		}
	}
	if outcome != "Complete" && !p.MayFail {
		return outcome, fmt.Errorf("ended %s; this point must complete", outcome)
	}
	return outcome, nil
}

// cleanPoint deletes the point's restore (and its namespace in every plane; a scratch restore
// must have removed what it made), and, for a backup point, its backup; then checks that the AWS double holds no snapshot but the restore points'
// backup's and no volume that no PV uses but those that existed before the suite (the nodes'
// root volumes).
func (d *run) cleanPoint(ctx context.Context, p KillPoint, b, base *fedv1alpha1.VolumeBackup, ns string) error {
	c := d.Kube()[d.Lab().Control]
	// The demo's restore of b is named after it.
	restore := &fedv1alpha1.VolumeRestore{ObjectMeta: metav1.ObjectMeta{Namespace: demo.ControlNamespace, Name: b.Name}}
	if p.Teardown {
		if err := d.strikeInTeardown(ctx, p, b, restore); err != nil {
			return err
		}
	}
	if err := d.DeleteAndWait(ctx, c, restore); err != nil {
		return err
	}
	if p.Scratch {
		// A restore failed before its TidbClusters were made released none.
		if _, err := d.ScratchRemoved(ctx, ns); err != nil {
			return err
		}
	}
	if err := d.DeleteRestored(ctx, ns); err != nil {
		return err
	}
	if !p.Restore {
		if err := d.DeleteAndWait(ctx, c, b); err != nil {
			return err
		}
	}
	// The restore points' backup stays for the points after this one, whatever their kind.
	keep := map[string]bool{}
	if base != nil {
		for _, dp := range d.Lab().DataPlanes {
			var m dpv1alpha1.VolumeBackupMember
			if err := d.Kube()[dp.Cluster].Get(ctx, client.ObjectKey{Namespace: d.Options().Namespace, Name: fedv1alpha1.MemberName(base.Name)}, &m); err != nil {
				return fmt.Errorf("the restore points' backup member in %s: %w", dp.Cluster, err)
			}
			keep[string(m.UID)] = true
		}
	}
	return d.LeftBehind(ctx, keep)
}

// strikeInTeardown deletes the point's restore and strikes as soon as the member of the point's
// plane is being deleted: its agent is then removing what the restore made.
func (d *run) strikeInTeardown(ctx context.Context, p KillPoint, b *fedv1alpha1.VolumeBackup, restore *fedv1alpha1.VolumeRestore) error {
	if err := d.Kube()[d.Lab().Control].Delete(ctx, restore); err != nil {
		return fmt.Errorf("delete the restore to strike in its teardown: %w", err)
	}
	plane := d.Lab().DataPlanes[max(p.Plane, 0)].Cluster
	key := client.ObjectKey{Namespace: d.Options().RestoreNamespace, Name: fedv1alpha1.MemberName(restore.Name)}
	err := d.PollFor(ctx, d.Options().Timeout, "the restore member in "+plane+" being deleted", func() (bool, string, error) {
		var m dpv1alpha1.VolumeRestoreMember
		if err := d.Kube()[plane].Get(ctx, key, &m); err != nil {
			return false, "", err
		}
		return m.DeletionTimestamp != nil, m.Status.Phase, nil
	})
	if err != nil {
		return err
	}
	return d.strike(ctx, p, b)
}

// CrashLog is where a crash suite writes its table (for docs/testing.md).
func CrashLog(results []CrashResult) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "| point | outcome | phases | restore exact | lifted after the end | error |\n|---|---|---|---|---|---|\n")
	for _, r := range results {
		errText := ""
		if r.Err != nil {
			errText = r.Err.Error()
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %v | %s | %s |\n", r.Point, r.Outcome, strings.Join(r.Phases, " → "), r.Exact,
			r.Lifted.Round(100*time.Millisecond), errText)
	}
	return sb.String()
}

// run is this suite's view of the demo's harness (demo.Harness): the suite's own steps are its
// methods.
type run struct{ *demo.Harness }

func newRun(ctx context.Context, o demo.Options) (*run, error) {
	h, err := demo.NewHarness(ctx, o)
	if err != nil {
		return nil, err
	}
	return &run{h}, nil
}
