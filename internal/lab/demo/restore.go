package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/restoremember"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/env"
	"github.com/fedbr/fedbr/internal/lab/operator"
)

// Restore creates fresh TidbClusters in recovery mode and runs a VolumeRestore into them.
func (d *Harness) Restore(ctx context.Context, b *fedv1alpha1.VolumeBackup) (*fedv1alpha1.VolumeRestore, error) {
	tcs, err := env.RecoveryTidbClusters(d.lab, d.o.RestoreTCName, d.o.RestoreNamespace, d.o.TiKVPerPlane, d.o.RaftVolumes)
	if err != nil {
		return nil, err
	}
	for cluster, tc := range tcs {
		if down := d.o.RestoreDownTiKV[cluster]; down != "" {
			tc.Annotations[operator.AnnotationDownTiKV] = down
		}
		if n := d.sourceTiKV[cluster]; n > 0 {
			tc.Spec.TiKV.Replicas = int32(n)
		}
	}
	if d.o.RestoreScratch {
		if err := d.prepareScratch(ctx, d.o.RestoreNamespace, tcs); err != nil {
			return nil, err
		}
		d.Say("namespace %s prepared for a scratch restore: its agents make the TidbClusters from the ones the backup saved", d.o.RestoreNamespace)
	} else {
		if err := d.CreateTCs(ctx, d.o.RestoreNamespace, tcs); err != nil {
			return nil, err
		}
		d.Say("fresh TidbClusters %s/%s created in recovery mode", d.o.RestoreNamespace, d.o.RestoreTCName)
	}
	r := &fedv1alpha1.VolumeRestore{ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: ControlNamespace,
		Labels: d.o.RestoreMeta.Labels, Annotations: d.o.RestoreMeta.Annotations}}
	r.Spec.Template.Warmup, r.Spec.Template.WarmupStrategy = d.o.RestoreWarmup, d.o.RestoreWarmupStrategy
	r.Spec.Template.TolerateSingleTiKVOutage = d.o.RestoreTolerateOutage
	r.Spec.Template.Scratch = d.o.RestoreScratch
	// Every restore checks what it restored, but one restoring beside a TiKV kept down on
	// purpose, whose store the check would find not Up.
	r.Spec.Template.Verify = len(d.o.RestoreDownTiKV) == 0 && !d.o.RestoreTolerateOutage
	if d.o.RestoreUserCheck && r.Spec.Template.Verify {
		check, err := d.userCheck(ctx, r.Name)
		if err != nil {
			return nil, err
		}
		r.Spec.Template.Check = check
	}
	for _, dp := range d.lab.DataPlanes {
		r.Spec.Clusters = append(r.Spec.Clusters, fedv1alpha1.VolumeRestoreMemberCluster{K8sClusterName: dp.Cluster, TCName: d.o.RestoreTCName,
			TCNamespace: d.o.RestoreNamespace, Backup: b.Spec.Template.MemberStorage(dp.Cluster)})
	}
	c := d.kube[d.lab.Control]
	if err := c.Create(ctx, r); err != nil {
		return nil, fmt.Errorf("create VolumeRestore: %w", err)
	}
	created := time.Now()
	d.Say("VolumeRestore %s/%s created", ControlNamespace, r.Name)
	w := newTiKVWatch(d.lab.DataPlanes)
	err = d.Poll(ctx, "VolumeRestore "+r.Name, func() (bool, string, error) {
		if err := w.sample(ctx, d, tcs); err != nil {
			return false, "", err
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
			return false, "", err
		}
		switch r.Status.Phase {
		case fedv1alpha1.VolumeRestoreComplete:
			d.report.RestoreWall = time.Since(created)
			return true, "", nil
		case fedv1alpha1.VolumeRestoreFailed:
			return false, "", fmt.Errorf("restore %w: %s", ErrFailed, ConditionMessage(r.Status.Conditions, fedv1alpha1.VolumeRestoreFailedCondition))
		}
		return false, fmt.Sprintf("restore %s: %s", r.Status.Phase, ConditionMessage(r.Status.Conditions, fedv1alpha1.VolumeRestoreReadyCondition)), nil
	})
	if err != nil {
		return r, err
	}
	if err := d.verified(ctx, b, r); err != nil {
		return r, err
	}
	// The agents saw every TiKV restarted before the restore could complete, possibly between
	// the last sample and the Complete: one more sample sees what they saw (at most a poll
	// late, which counts as the operator's time, not fedbr's).
	if err := w.sample(ctx, d, tcs); err != nil {
		return r, err
	}
	d.report.Restore = r.DeepCopy()
	d.report.add("restore", r.Status.TimeStarted, r.Status.TimeCompleted)
	for _, s := range r.Status.Steps {
		d.report.add("  "+s.StepName, s.TimeStarted, s.TimeCompleted)
	}
	for _, dp := range d.lab.DataPlanes {
		var m dpv1alpha1.VolumeRestoreMember
		if err := d.kube[dp.Cluster].Get(ctx, client.ObjectKey{Namespace: d.o.RestoreNamespace, Name: fedv1alpha1.MemberName(r.Name)}, &m); err != nil {
			return r, fmt.Errorf("restore member in %s: %w", dp.Cluster, err)
		}
		d.report.restoreMembers = append(d.report.restoreMembers, memberRef{cluster: dp.Cluster, uid: string(m.UID)})
	}
	if err := d.restoreWork(ctx, r, w); err != nil {
		return r, err
	}
	d.Say("restore complete at commit ts %s", r.Status.CommitTs)
	return r, nil
}

// tiKVWatch times the TidbCluster operator's part of a restore from the demo's 100 ms
// samples of the restored TidbClusters and their TiKV pods: TiKV starting on the volumes the
// agents handed over, and restarting out of recovery mode. Neither is fedbr's orchestration.
type tiKVWatch struct {
	planes []string
	// handover is when the first plane's volumes were handed to TiKV (the volumes-ready
	// annotation), up when the last plane had all its stores up in recovery mode.
	handover, up time.Time
	// finish is when the first plane left recovery mode, restarted when the last plane had
	// all its TiKV pods replaced and ready.
	finish, restarted time.Time
	upIn, restartedIn map[string]bool
	// handoverAt is handover per plane.
	handoverAt map[string]time.Time
	// recoveryPods are the TiKV pods last seen in recovery mode, per plane.
	recoveryPods map[string]map[types.UID]bool
}

func newTiKVWatch(planes []env.DataPlane) *tiKVWatch {
	w := &tiKVWatch{upIn: map[string]bool{}, restartedIn: map[string]bool{}, recoveryPods: map[string]map[types.UID]bool{},
		handoverAt: map[string]time.Time{}}
	for _, dp := range planes {
		w.planes = append(w.planes, dp.Cluster)
	}
	return w
}

// sample reads every plane's restored TidbCluster and TiKV pods once.
func (w *tiKVWatch) sample(ctx context.Context, d *Harness, tcs map[string]*pcv1alpha1.TidbCluster) error {
	now := time.Now()
	for _, plane := range w.planes {
		want := tcs[plane]
		// The pods first, then the TidbCluster: recovery mode only ever goes from on to off, and
		// the agent replaces the TiKV pods only after it went off, so pods listed before a read
		// that still shows it on are all recovery-mode pods. The other order could list the
		// restarted pods after a stale "on" and count them as recovery-mode pods.
		var pods corev1.PodList
		if err := d.kube[plane].List(ctx, &pods, client.InNamespace(want.Namespace), client.MatchingLabels(tidbcluster.TiKVSelector(want.Name))); err != nil {
			return err
		}
		var tc pcv1alpha1.TidbCluster
		if err := d.kube[plane].Get(ctx, client.ObjectKeyFromObject(want), &tc); apierrors.IsNotFound(err) {
			continue // a scratch restore's, not made yet
		} else if err != nil {
			return err
		}
		if tc.Annotations[pcv1alpha1.TiKVVolumesReadyAnnotation] == "" {
			continue
		}
		replicas := tidbcluster.TiKVReplicas(&tc)
		if w.handover.IsZero() {
			w.handover = now
		}
		if w.handoverAt[plane].IsZero() {
			w.handoverAt[plane] = now
		}
		if tc.Spec.RecoveryMode {
			seen := map[types.UID]bool{}
			for _, p := range pods.Items {
				seen[p.UID] = true
			}
			w.recoveryPods[plane] = seen
			if !w.upIn[plane] && tidbcluster.StoresUp(&tc) >= replicas {
				w.upIn[plane] = true
				if len(w.upIn) == len(w.planes) {
					w.up = now
				}
			}
			continue
		}
		if w.finish.IsZero() {
			w.finish = now
		}
		fresh := 0
		for _, p := range pods.Items {
			if !w.recoveryPods[plane][p.UID] && p.DeletionTimestamp == nil && podReady(&p) {
				fresh++
			}
		}
		if !w.restartedIn[plane] && fresh >= replicas && tidbcluster.StoresUp(&tc) >= replicas {
			w.restartedIn[plane] = true
			if len(w.restartedIn) == len(w.planes) {
				w.restarted = now
			}
		}
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// restoreWork collects the restore's work from the steps' own clocks (restore-volumes on
// every plane, restore-data on one) and the operator's TiKV starts the watch timed; the rest
// of the wall time is fedbr's orchestration.
func (d *Harness) restoreWork(ctx context.Context, r *fedv1alpha1.VolumeRestore, w *tiKVWatch) error {
	var volumes, data stepTimes
	for _, plane := range w.planes {
		var m dpv1alpha1.VolumeRestoreMember
		key := client.ObjectKey{Namespace: d.o.RestoreNamespace, Name: fedv1alpha1.MemberName(r.Name)}
		if err := d.kube[plane].Get(ctx, key, &m); err != nil {
			return fmt.Errorf("restore member in %s: %w", plane, err)
		}
		v, ok := timesOf(m.Status.Steps, job.StepRestoreVolumes)
		if !ok {
			return fmt.Errorf("the restore-volumes step in %s did not report", plane)
		}
		if volumes.StartedAt.IsZero() || v.StartedAt.Before(volumes.StartedAt) {
			volumes.StartedAt = v.StartedAt
		}
		if v.CompletedAt.After(volumes.CompletedAt) {
			volumes.CompletedAt = v.CompletedAt
		}
		if t, ok := timesOf(m.Status.Steps, job.StepRestoreData); ok {
			data = t
		}
	}
	d.report.RestoreWork = []Step{
		{Name: "restore-volumes steps (PD, cloud calls and waits)", Start: volumes.StartedAt, End: volumes.CompletedAt},
		{Name: "TiKV starts on the restored volumes (operator)", Start: w.handover, End: w.up},
		{Name: "restore-data step (PD, TiKV)", Start: data.StartedAt, End: data.CompletedAt},
		{Name: "TiKV restarts out of recovery mode (operator)", Start: w.finish, End: w.restarted},
	}
	if d.o.RestoreWarmup == fedv1alpha1.RestoreWarmupNone {
		return nil
	}
	warm, err := d.warmupWork(ctx, w)
	if err != nil {
		return err
	}
	d.report.RestoreWork = append(d.report.RestoreWork, warm)
	d.report.TiKVHandedOver = w.handoverAt
	if c := apimeta.FindStatusCondition(r.Status.Conditions, fedv1alpha1.VolumeRestoreWarmUpCompleteCondition); c != nil && c.Status == metav1.ConditionTrue {
		d.report.Warmup = c.Reason
	}
	return nil
}

// warmupWork counts the warm-up Jobs and times their containers (reading the volumes is work;
// starting their pods is orchestration). The times have the kubelet's one-second resolution.
// Each warm-up pod is also paired with the TiKV pod of its member's ordinal as it is now.
func (d *Harness) warmupWork(ctx context.Context, w *tiKVWatch) (Step, error) {
	s := Step{Name: "warm-up Jobs reading the volumes (kubelet clock)"}
	d.report.WarmupIn = map[string]Step{}
	for _, plane := range w.planes {
		in := Step{Name: plane}
		var pods, tikv corev1.PodList
		if err := d.kube[plane].List(ctx, &pods, client.InNamespace(d.o.RestoreNamespace), client.MatchingLabels{job.LabelStep: job.StepWarmup}); err != nil {
			return s, fmt.Errorf("warm-up pods in %s: %w", plane, err)
		}
		if err := d.kube[plane].List(ctx, &tikv, client.InNamespace(d.o.RestoreNamespace), client.MatchingLabels(tidbcluster.TiKVSelector(d.o.RestoreTCName))); err != nil {
			return s, fmt.Errorf("TiKV pods in %s: %w", plane, err)
		}
		var m dpv1alpha1.VolumeRestoreMember
		key := client.ObjectKey{Namespace: d.o.RestoreNamespace, Name: fedv1alpha1.MemberName(d.report.Restore.Name)}
		if err := d.kube[plane].Get(ctx, key, &m); err != nil {
			return s, fmt.Errorf("restore member in %s: %w", plane, err)
		}
		tikvOf := map[string]*corev1.Pod{} // by the name of its warm-up Job
		for i, p := range tikv.Items {
			ord, ok := tidbcluster.TiKVOrdinal(p.Name, d.o.RestoreTCName)
			if !ok {
				return s, fmt.Errorf("TiKV pod %s in %s: not %s-tikv-<ordinal>", p.Name, plane, d.o.RestoreTCName)
			}
			tikvOf[restoremember.WarmupJobName(m.Name, ord)] = &tikv.Items[i]
		}
		for _, st := range m.Status.Steps {
			if !strings.HasPrefix(st.Name, job.StepWarmup+"-") || st.Result == nil {
				continue
			}
			var sum struct {
				Bytes int64             `json:"bytes"`
				WAL   []json.RawMessage `json:"wal"`
			}
			if err := json.Unmarshal(st.Result.Raw, &sum); err != nil {
				return s, fmt.Errorf("%s in %s: %w", st.Name, plane, err)
			}
			d.report.WarmupResults++
			d.report.WarmupBytes += sum.Bytes
			d.report.WarmupWALChecks += len(sum.WAL)
		}
		for _, p := range pods.Items {
			d.report.WarmupJobsTotal++
			if p.Status.Phase == corev1.PodSucceeded {
				d.report.WarmupJobs++
			}
			wp := WarmupPod{Plane: plane, Pod: p.Name, RecoveryPods: len(w.recoveryPods[plane])}
			for _, cs := range p.Status.ContainerStatuses {
				if t := cs.State.Terminated; t != nil {
					in = in.span(t.StartedAt.Time, t.FinishedAt.Time)
					wp.Started = t.StartedAt.Time
				}
			}
			if t := tikvOf[p.Labels["batch.kubernetes.io/job-name"]]; t != nil {
				wp.TiKVPod, wp.TiKVFresh = t.Name, !w.recoveryPods[plane][t.UID]
				for _, c := range t.Status.Conditions {
					if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
						wp.TiKVReady = c.LastTransitionTime.Time
					}
				}
			}
			d.report.WarmupPods = append(d.report.WarmupPods, wp)
		}
		d.report.WarmupIn[plane] = in
		s = s.span(in.Start, in.End)
	}
	return s, nil
}

// span is s widened to cover start..end (zero times ignored).
func (s Step) span(start, end time.Time) Step {
	if !start.IsZero() && (s.Start.IsZero() || start.Before(s.Start)) {
		s.Start = start
	}
	if end.After(s.End) {
		s.End = end
	}
	return s
}

// userCheck is the restore's user check in the lab: the bank checker run by the lab's image of
// fedbr, against the restored PD at the restored ts (the environment the agent gives a check),
// reading the bank's log, which it writes to a file for it (a lab pod sees the host's files).
func (d *Harness) userCheck(ctx context.Context, restore string) (*fedv1alpha1.RestoreCheck, error) {
	if d.o.TLS {
		return nil, fmt.Errorf("the lab's user check dials PD in plain text: not with TLS")
	}
	// The agents' own image, which their policy always allows: the charts' when installed.
	image := "fedbr"
	if d.o.Install {
		var agent appsv1.Deployment
		key := client.ObjectKey{Namespace: env.InstallNamespace, Name: env.AgentRelease}
		if err := d.kube[d.lab.DataPlanes[0].Cluster].Get(ctx, key, &agent); err != nil {
			return nil, fmt.Errorf("read the agent's Deployment for its image: %w", err)
		}
		image = agent.Spec.Template.Spec.Containers[0].Image
	}
	path := filepath.Join(d.lab.Dir, "demo", "bank-log-"+restore+".jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := bank.AppendLog(path, d.bankLog.Txns()); err != nil {
		return nil, fmt.Errorf("write the bank's log for the user check: %w", err)
	}
	return &fedv1alpha1.RestoreCheck{Image: image, Args: []string{"lab", "bank", "check",
		"--pd", "$(FEDBR_PD)", "--ts", "$(FEDBR_RESTORED_TS)", "--log", path,
		"--accounts", strconv.Itoa(d.bankCfg.Accounts), "--initial", strconv.FormatInt(d.bankCfg.Initial, 10)}}, nil
}

// verified checks what a restore with verify says of the cluster it restored (its Checked,
// naming the user's check when it had one), then waits for the manager to record that verdict
// on the backup (its Verified from this restore, not an earlier one's).
func (d *Harness) verified(ctx context.Context, b *fedv1alpha1.VolumeBackup, r *fedv1alpha1.VolumeRestore) error {
	if !r.Spec.Template.Verify {
		return nil
	}
	c := d.kube[d.lab.Control]
	checked := apimeta.FindStatusCondition(r.Status.Conditions, fedv1alpha1.VolumeRestoreCheckedCondition)
	if checked == nil || checked.Status != metav1.ConditionTrue {
		return fmt.Errorf("restore %w: its checks of the restored cluster did not pass: %+v", ErrFailed, checked)
	}
	if r.Spec.Template.Check != nil && !strings.Contains(checked.Message, "the user's check") {
		return fmt.Errorf("restore %w: Checked says nothing of the user's check: %s", ErrFailed, checked.Message)
	}
	d.Say("restored cluster checked: %s", checked.Message)
	// The manager records the verdict on the backup the restore restored.
	vb := b.DeepCopy()
	err := d.Poll(ctx, "VolumeBackup "+b.Name+" Verified", func() (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), vb); err != nil {
			return false, "", err
		}
		v := apimeta.FindStatusCondition(vb.Status.Conditions, fedv1alpha1.VolumeBackupVerifiedCondition)
		switch at := vb.Status.Verification; {
		case v == nil || at == nil || at.TimeJudged.Before(r.Status.TimeCompleted):
			// No verdict yet, or an earlier restore's.
			return false, "backup not verified by this restore yet", nil
		case v.Status != metav1.ConditionTrue || at.Restore != r.Name:
			return false, "", fmt.Errorf("backup %s: Verified %s %s: %s (verification %+v), want True from restore %s", b.Name, v.Status, v.Reason, v.Message, vb.Status.Verification, r.Name)
		}
		return true, "", nil
	})
	if err != nil {
		return err
	}
	d.Say("backup %s verified: recovery time %s", b.Name, vb.Status.Verification.TimeTaken)
	return nil
}

// PrepareScratch readies namespace ns of every plane for scratch restores of the source's
// TidbClusters under their own name (a schedule's drills): as prepareScratch, on each plane's
// restore address block.
func (d *Harness) PrepareScratch(ctx context.Context, ns string) error {
	tcs, err := env.RecoveryTidbClusters(d.lab, d.o.TCName, ns, d.o.TiKVPerPlane, d.o.RaftVolumes)
	if err != nil {
		return err
	}
	return d.prepareScratch(ctx, ns, tcs)
}

// prepareScratch readies namespace ns of every plane for a scratch restore into tcs (the
// TidbClusters it will make, as RecoveryTidbClusters lays them out): the namespace, its address
// block (the lab operator's namespace default, which a TidbCluster made from a saved manifest
// cannot carry) and, with TLS, the Secrets a tidb-operator user creates. No TidbCluster.
func (d *Harness) prepareScratch(ctx context.Context, ns string, tcs map[string]*pcv1alpha1.TidbCluster) error {
	for cluster, tc := range tcs {
		c := d.kube[cluster]
		if err := env.EnsureNamespace(ctx, c, ns, d.TenantLevel(ns)); err != nil {
			return fmt.Errorf("%s: %w", cluster, err)
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			operator.AnnotationIPPrefix: tc.Annotations[operator.AnnotationIPPrefix]}}})
		if err != nil {
			return err
		}
		if err := c.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("%s: annotate namespace %s: %w", cluster, ns, err)
		}
		if err := d.withTLS(ctx, cluster, tc); err != nil {
			return err
		}
	}
	return nil
}

// RemoveScratch is what a suite does once the scratch restore into ns is deleted: checks that
// nothing of it is left and that at least minReleased PVs of tidb-operator's claims were released
// to reclaim Delete (ScratchRemoved), then deletes ns in every plane (DeleteRestored). It returns
// how many were released.
func (d *Harness) RemoveScratch(ctx context.Context, ns string, minReleased int) (int, error) {
	released, err := d.ScratchRemoved(ctx, ns)
	if err != nil {
		return 0, err
	}
	if released < minReleased {
		return 0, fmt.Errorf("%d PVs of tidb-operator's claims in %s were released to reclaim Delete, want at least %d: the scratch TidbClusters' PD claims must be",
			released, ns, minReleased)
	}
	return released, d.DeleteRestored(ctx, ns)
}

// ScratchRemoved checks, once the scratch restore into ns is deleted, that every plane's ns
// holds no TidbCluster and no claim, and no PV is left for it but the released ones of the
// claims tidb-operator made, which reclaim Delete; it then plays the EBS CSI driver the lab lacks
// for those (deletes each PV and its volume). It returns how many it deleted so.
func (d *Harness) ScratchRemoved(ctx context.Context, ns string) (int, error) {
	var volumes []string
	for _, dp := range d.lab.DataPlanes {
		c := d.kube[dp.Cluster]
		var tcs pcv1alpha1.TidbClusterList
		if err := c.List(ctx, &tcs, client.InNamespace(ns)); err != nil {
			return 0, err
		}
		if len(tcs.Items) > 0 {
			return 0, fmt.Errorf("%s: TidbCluster %s/%s left after its scratch restore was deleted", dp.Cluster, ns, tcs.Items[0].Name)
		}
		var pvcs corev1.PersistentVolumeClaimList
		if err := c.List(ctx, &pvcs, client.InNamespace(ns)); err != nil {
			return 0, err
		}
		if len(pvcs.Items) > 0 {
			return 0, fmt.Errorf("%s: claim %s/%s left after its scratch restore was deleted", dp.Cluster, ns, pvcs.Items[0].Name)
		}
		var pvs corev1.PersistentVolumeList
		if err := c.List(ctx, &pvs); err != nil {
			return 0, err
		}
		for i := range pvs.Items {
			pv := &pvs.Items[i]
			if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Namespace != ns {
				continue
			}
			if pv.Labels[restoremember.LabelRestore] != "" || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.Spec.CSI == nil {
				return 0, fmt.Errorf("%s: PV %s (claim %s/%s, reclaim %s) left after its scratch restore was deleted",
					dp.Cluster, pv.Name, ns, pv.Spec.ClaimRef.Name, pv.Spec.PersistentVolumeReclaimPolicy)
			}
			if err := client.IgnoreNotFound(c.Delete(ctx, pv)); err != nil {
				return 0, err
			}
			volumes = append(volumes, pv.Spec.CSI.VolumeHandle)
		}
	}
	if len(volumes) > 0 {
		if err := d.aws.DeleteVolumes(ctx, volumes); err != nil {
			return 0, fmt.Errorf("delete the released volumes (as the CSI driver would): %w", err)
		}
	}
	return len(volumes), nil
}
