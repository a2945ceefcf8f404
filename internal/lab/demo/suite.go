package demo

// The harness's steps the crash suite (test/crash) and the day-2 scenarios (test/daytwo) share:
// restarting controllers and pods, killing a step, deleting and waiting, and what a run may
// have left behind.

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/env"
	"github.com/fedbr/fedbr/internal/lab/kubelet"
)

// DeleteAndWait deletes o and waits until it is gone. While it waits it says what holds it: its
// finalizers and, for a VolumeBackup or VolumeRestore, what its status says.
func (d *Harness) DeleteAndWait(ctx context.Context, c client.Client, o client.Object) error {
	if err := client.IgnoreNotFound(c.Delete(ctx, o)); err != nil {
		return err
	}
	kind := fmt.Sprintf("%T %s", o, o.GetName())
	return d.PollFor(ctx, d.o.Timeout, "deletion of "+kind, func() (bool, string, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(o), o)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		state := fmt.Sprintf("deleting %s (finalizers %v)", kind, o.GetFinalizers())
		switch v := o.(type) {
		case *fedv1alpha1.VolumeBackup:
			state += fmt.Sprintf(": %s; Ready %s; Cleaned %s", v.Status.Phase, ConditionMessage(v.Status.Conditions, fedv1alpha1.VolumeBackupReadyCondition),
				ConditionMessage(v.Status.Conditions, fedv1alpha1.VolumeBackupCleanedCondition))
		case *fedv1alpha1.VolumeRestore:
			state += fmt.Sprintf(": %s, %s", v.Status.Phase, ConditionMessage(v.Status.Conditions, fedv1alpha1.VolumeRestoreReadyCondition))
		}
		return false, state, err
	})
}

// DeleteRestored deletes a restore's namespace in every plane, with the volumes it released.
func (d *Harness) DeleteRestored(ctx context.Context, ns string) error {
	// The restored volumes are the TidbClusters' now: deleting their namespace releases them,
	// and the EBS CSI driver would delete each volume with its PV (reclaim policy Delete); the
	// lab has no CSI driver, so the suite does it (after the namespaces are gone).
	var released []string
	releasedPVs := map[string][]client.Object{} // by plane
	for _, dp := range d.lab.DataPlanes {
		var pvs corev1.PersistentVolumeList
		if err := d.kube[dp.Cluster].List(ctx, &pvs); err != nil {
			return err
		}
		for i := range pvs.Items {
			pv := &pvs.Items[i]
			if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == ns && pv.Spec.CSI != nil {
				released = append(released, pv.Spec.CSI.VolumeHandle)
				releasedPVs[dp.Cluster] = append(releasedPVs[dp.Cluster], pv)
			}
		}
	}
	// The namespaces go at once: each takes its pods' grace period.
	for _, dp := range d.lab.DataPlanes {
		if err := client.IgnoreNotFound(d.kube[dp.Cluster].Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})); err != nil {
			return err
		}
	}
	for _, dp := range d.lab.DataPlanes {
		if err := d.DeleteAndWait(ctx, d.kube[dp.Cluster], &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	for plane, pvs := range releasedPVs {
		for _, pv := range pvs {
			if err := client.IgnoreNotFound(d.kube[plane].Delete(ctx, pv)); err != nil {
				return err
			}
		}
	}
	if len(released) > 0 {
		if err := d.aws.DeleteVolumes(ctx, released); err != nil {
			return fmt.Errorf("delete the released volumes (as the CSI driver would): %w", err)
		}
	}
	return nil
}

// WaitLifted waits until the source holds no GC safepoint, paused scheduler or zeroed limit;
// what a killed pause held lapses within its TTL (2 minutes), so that is the bound.
func (d *Harness) WaitLifted(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(2*time.Minute + 15*time.Second)
	for {
		err := d.CheckLifted(ctx)
		if err == nil {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return time.Since(start), fmt.Errorf("not lifted within the pause TTL: %w", err)
		}
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// LeftBehind fails when the AWS double holds a snapshot whose fedbr.io/backup tag is not in
// keep, or a volume that no PV uses and that did not exist before the suite (the nodes' root
// volumes, the source cluster's).
func (d *Harness) LeftBehind(ctx context.Context, keep map[string]bool) error {
	snaps, err := d.aws.ListSnapshots(ctx, nil)
	if err != nil {
		return err
	}
	var left []string
	for _, s := range snaps {
		if !keep[s.Tags["fedbr.io/backup"]] {
			left = append(left, s.ID)
		}
	}
	used := map[string]bool{}
	for _, dp := range d.lab.DataPlanes {
		var pvs corev1.PersistentVolumeList
		if err := d.kube[dp.Cluster].List(ctx, &pvs); err != nil {
			return err
		}
		for _, pv := range pvs.Items {
			if pv.Spec.CSI != nil {
				used[pv.Spec.CSI.VolumeHandle] = true
			}
		}
	}
	vols, err := d.aws.ListVolumes(ctx, nil)
	if err != nil {
		return err
	}
	for _, v := range vols {
		if !used[v.ID] && !d.crashBefore[v.ID] {
			left = append(left, v.ID)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("left behind: %v", left)
	}
	return nil
}

// KillStep SIGKILLs the container of the running pod of step for member in one of planes: its
// pid is in the container id the lab's kubelet reports (lab://PID). It waits for such a pod to
// run.
func (d *Harness) KillStep(ctx context.Context, planes []string, ns, member, step string) error {
	return d.Poll(ctx, fmt.Sprintf("a running %s pod in %v", step, planes), func() (bool, string, error) {
		var pods []corev1.Pod
		sel := job.Selector(member)
		sel[job.LabelStep] = step
		for _, plane := range planes {
			var list corev1.PodList
			if err := d.kube[plane].List(ctx, &list, client.InNamespace(ns), client.MatchingLabels(sel)); err != nil {
				return false, "", err
			}
			pods = append(pods, list.Items...)
		}
		for _, pod := range pods {
			pid, ok := containerPID(pod)
			if !ok {
				continue
			}
			if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
				return false, "", fmt.Errorf("SIGKILL pod %s (pid %d): %w", pod.Name, pid, err)
			}
			d.Say("  pod %s/%s (%s) SIGKILLed", ns, pod.Name, step)
			return true, "", nil
		}
		return false, "waiting for the " + step + " pod to run", nil
	})
}

// RestartController SIGKILLs a controller and starts it again.
func (d *Harness) RestartController(name string) error {
	ctl, ok := d.ctrls[name]
	if !ok {
		return fmt.Errorf("no controller %q", name)
	}
	d.procs[ctl.proc].kill()
	d.Say("  %s SIGKILLed; starting it again", name)
	p, err := start(d.o.Fedbr, filepath.Join(logDir(d.lab), name+".log"), ctl.args...)
	if err != nil {
		return err
	}
	d.procs[ctl.proc] = p
	return nil
}

// RestartPods SIGKILLs the container of every pod of the Deployment name in fedbr-system of
// cluster (installed through the charts: every replica, so the leader is among them, whichever
// it is) and waits until the lab's kubelet has started each again (its restart count grew).
// The restarted replicas then wait out the dead leader's Lease, as after a node's crash.
func (d *Harness) RestartPods(ctx context.Context, cluster, name string) error {
	c := d.kube[cluster]
	var dep appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: env.InstallNamespace, Name: name}, &dep); err != nil {
		return fmt.Errorf("%s: Deployment %s/%s: %w", cluster, env.InstallNamespace, name, err)
	}
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil {
		return err
	}
	pods := func() ([]corev1.Pod, error) {
		var list corev1.PodList
		err := c.List(ctx, &list, client.InNamespace(env.InstallNamespace), client.MatchingLabelsSelector{Selector: sel})
		return list.Items, err
	}
	running, err := pods()
	if err != nil {
		return err
	}
	restarts := map[types.UID]int32{}
	for _, pod := range running {
		pid, ok := containerPID(pod)
		if !ok {
			continue
		}
		if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
			return fmt.Errorf("SIGKILL pod %s (pid %d): %w", pod.Name, pid, err)
		}
		restarts[pod.UID] = pod.Status.ContainerStatuses[0].RestartCount
	}
	if len(restarts) == 0 {
		return fmt.Errorf("no running pod of Deployment %s/%s in %s", env.InstallNamespace, name, cluster)
	}
	d.Say("  %s: %d pod(s) of %s SIGKILLed; the kubelet starts them again", cluster, len(restarts), name)
	return d.Poll(ctx, fmt.Sprintf("%s: %s's pods started again", cluster, name), func() (bool, string, error) {
		now, err := pods()
		if err != nil {
			return false, "", err
		}
		waiting := 0
		for _, pod := range now {
			before, killed := restarts[pod.UID]
			if _, ok := containerPID(pod); killed && (!ok || pod.Status.ContainerStatuses[0].RestartCount <= before) {
				waiting++
			}
		}
		return waiting == 0, fmt.Sprintf("%d of %d not restarted yet", waiting, len(restarts)), nil
	})
}

// HoldCalls holds every call of the EC2 action that reaches the AWS double from now on, in
// flight, until release (awsdouble.Server.Hold); release always lets them go, also when ctx has
// ended, and says whether it could.
func (d *Harness) HoldCalls(ctx context.Context, action string) (release func() error, err error) {
	if err := d.AWSAdmin().Hold(ctx, action); err != nil {
		return nil, err
	}
	return func() error {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return d.AWSAdmin().Release(rctx, action)
	}, nil
}

// AWSAdmin is the AWS double's admin API.
func (d *Harness) AWSAdmin() kubelet.AWSAdmin { return kubelet.AWSAdmin{Endpoint: d.lab.AWS.Endpoint} }

// SetFaults replaces the AWS double's injected faults.
func (d *Harness) SetFaults(ctx context.Context, f awsdouble.Faults) error {
	return d.AWSAdmin().SetFaults(ctx, f)
}

// containerPID is the pid of a running pod's first container: the lab's kubelet reports it in
// the container id (lab://PID).
func containerPID(pod corev1.Pod) (int, bool) {
	if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil || len(pod.Status.ContainerStatuses) == 0 ||
		pod.Status.ContainerStatuses[0].State.Running == nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "lab://"))
	return pid, err == nil && pid > 0
}
