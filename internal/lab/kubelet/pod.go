package kubelet

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// Container state reasons, as the kubelet reports them.
const (
	ReasonContainerCreating          = "ContainerCreating"
	ReasonPodInitializing            = "PodInitializing"
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	ReasonErrImagePull               = "ErrImagePull"
	ReasonCrashLoopBackOff           = "CrashLoopBackOff"
	ReasonCompleted                  = "Completed"
	ReasonError                      = "Error"
	ReasonStartError                 = "StartError"
	ReasonDeadlineExceeded           = "DeadlineExceeded"
)

// kind tells init containers from regular ones.
type kind int

const (
	regular kind = iota
	initContainer
)

// minGrace is the kubelet's minimum grace period: SIGTERM always gets this long.
const minGrace = 2 * time.Second

// podRun runs one pod: its volumes, its init containers in order, then its containers,
// each as a local process in its own process group.
type podRun struct {
	p   *provider
	key string
	dir string // <node dir>/pods/<ns>_<name>_<uid>

	// spec is immutable after creation except for labels, annotations and the deadline,
	// which are read under mu.
	spec *corev1.Pod

	mu      sync.Mutex
	status  corev1.PodStatus
	volumes map[string]string
	// blockVolumes are the pod's raw block claims (volumeMode Block), by volume name; their
	// entry in volumes is the device.
	blockVolumes map[string]bool
	// ebsVolumes are the EBS volumes the pod uses, attached to the node's instance.
	ebsVolumes []string
	// devices are the EBS volumes of the pod's claims by the pod's volume name: what the mount table of
	// each container lists as mounted from a device (mounttable.go).
	devices map[string]Volume
	// irsa is what EKS's pod identity webhook adds to the pod (irsa.go); nil for none.
	irsa     *webIdentityPod
	stopping bool
	deleting bool
	killAt   time.Time
	// wake is closed and replaced whenever killAt moves or stopping starts.
	wake     chan struct{}
	deadline *time.Timer
	done     chan struct{} // closed when no process of the pod runs any more

	// seen is when this node took the pod, prepared when its volumes were ready: a
	// container's start is logged against both, the pod-start part of a step's arming.
	seen, prepared time.Time
}

func newPodRun(p *provider, pod *corev1.Pod) *podRun {
	id := pod.Namespace + "_" + pod.Name + "_" + string(pod.UID)
	r := &podRun{
		p:    p,
		key:  pod.Namespace + "/" + pod.Name,
		dir:  filepath.Join(p.o.Dir, "pods", id),
		spec: pod.DeepCopy(),
		seen: time.Now(),
		wake: make(chan struct{}),
		done: make(chan struct{}),
	}
	r.status = *pod.Status.DeepCopy()
	r.status.Phase = corev1.PodPending
	r.status.HostIP = p.o.Address
	r.status.HostIPs = []corev1.HostIP{{IP: p.o.Address}}
	r.status.PodIP = p.o.Address
	r.status.PodIPs = []corev1.PodIP{{IP: p.o.Address}}
	now := metav1.Now()
	r.status.StartTime = &now
	waiting := func(cs []corev1.Container, reason string) []corev1.ContainerStatus {
		out := make([]corev1.ContainerStatus, len(cs))
		for i, c := range cs {
			out[i] = corev1.ContainerStatus{Name: c.Name, Image: c.Image, Started: new(bool),
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
		}
		return out
	}
	r.status.InitContainerStatuses = waiting(pod.Spec.InitContainers, ReasonPodInitializing)
	mainReason := ReasonContainerCreating
	if len(pod.Spec.InitContainers) > 0 {
		mainReason = ReasonPodInitializing
	}
	r.status.ContainerStatuses = waiting(pod.Spec.Containers, mainReason)
	r.refreshLocked()
	return r
}

// snapshot returns the pod with its current status.
func (r *podRun) snapshot() *corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	pod := r.spec.DeepCopy()
	pod.Status = *r.status.DeepCopy()
	return pod
}

// update applies the mutable parts of a changed pod spec.
func (r *podRun) update(pod *corev1.Pod) {
	r.mu.Lock()
	r.spec.Labels = pod.Labels
	r.spec.Annotations = pod.Annotations
	r.spec.Spec.ActiveDeadlineSeconds = pod.Spec.ActiveDeadlineSeconds
	r.mu.Unlock()
	r.armDeadline()
}

// set mutates the status under the lock and tells the pod controller.
func (r *podRun) set(f func(st *corev1.PodStatus)) {
	r.mu.Lock()
	f(&r.status)
	r.refreshLocked()
	r.mu.Unlock()
	r.p.changed(r.key)
}

func (r *podRun) refreshLocked() {
	if terminalPhase(r.status.Phase) {
		return
	}
	in := podState{policy: r.spec.Spec.RestartPolicy, status: r.status, stopping: r.stopping, sandbox: r.volumes != nil}
	r.status.Phase = phaseOf(in)
	in.status.Phase = r.status.Phase
	r.status.Conditions = conditionsOf(in, metav1.Now())
}

func (r *podRun) container(st *corev1.PodStatus, name string, k kind) *corev1.ContainerStatus {
	list := st.ContainerStatuses
	if k == initContainer {
		list = st.InitContainerStatuses
	}
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	panic("unknown container " + name)
}

// run is the pod's life; it returns when no process of the pod runs any more.
func (r *podRun) run(ctx context.Context) {
	defer close(r.done)
	log := klog.FromContext(ctx).WithValues("pod", klog.KObj(r.spec))
	r.armDeadline()

	exes := map[string]string{}
	for _, c := range append(append([]corev1.Container{}, r.spec.Spec.InitContainers...), r.spec.Spec.Containers...) {
		exe, err := r.p.o.Images.Entrypoint(c.Image)
		if err != nil {
			log.Info("Failing pod: image not mapped", "image", c.Image)
			r.failImage(err)
			return
		}
		exes[c.Name] = exe
	}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		r.failImage(fmt.Errorf("pod directory: %w", err))
		return
	}
	if !r.retry(ctx, func() error {
		if err := r.resolveWebIdentity(ctx); err != nil {
			return err
		}
		return r.prepareVolumes(ctx)
	}, func(err error) {
		log.Info("Preparing volumes failed, retrying", "err", err)
		r.set(func(st *corev1.PodStatus) { st.Message = err.Error() })
	}) {
		return
	}
	r.set(func(st *corev1.PodStatus) { st.Message = "" })
	r.prepared = time.Now()

	for _, c := range r.spec.Spec.InitContainers {
		if !r.runContainer(ctx, c, exes[c.Name], initContainer) {
			return
		}
	}
	var wg sync.WaitGroup
	for _, c := range r.spec.Spec.Containers {
		wg.Go(func() { r.runContainer(ctx, c, exes[c.Name], regular) })
	}
	wg.Wait()
}

// failImage ends the pod: no retry can make an unmapped image appear.
func (r *podRun) failImage(err error) {
	r.set(func(st *corev1.PodStatus) {
		for _, list := range [][]corev1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
			for i := range list {
				list[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: 128, Reason: ReasonErrImagePull, Message: err.Error(), FinishedAt: metav1.Now()}}
			}
		}
		st.Reason = ReasonErrImagePull
		st.Message = err.Error()
	})
}

// retry runs f until it succeeds (true) or the pod stops (false), backing off between tries.
func (r *podRun) retry(ctx context.Context, f func() error, failed func(error)) bool {
	backoff := 200 * time.Millisecond
	for {
		if r.stopped() {
			return false
		}
		err := f()
		if err == nil {
			return true
		}
		failed(err)
		if !r.sleep(ctx, backoff) {
			return false
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// sleep waits d unless the pod stops first; it reports whether the pod still runs.
func (r *podRun) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		r.mu.Lock()
		stopping, wake := r.stopping, r.wake
		r.mu.Unlock()
		if stopping {
			return false
		}
		select {
		case <-t.C:
			return true
		case <-wake:
		case <-ctx.Done():
			return false
		}
	}
}

func (r *podRun) stopped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopping
}

// runContainer runs a container until it needs no more restarts or the pod stops, and
// reports whether its last run succeeded.
func (r *podRun) runContainer(ctx context.Context, c corev1.Container, exe string, k kind) bool {
	log := klog.FromContext(ctx).WithValues("pod", klog.KObj(r.spec), "container", c.Name)
	restarts := 0
	backoff := r.p.o.RestartBackoff
	for {
		if r.stopped() {
			return false
		}
		logPath := LogPath(r.p.o.Dir, r.spec, c.Name, restarts)
		cmd, image, err := r.command(ctx, c, exe, logPath)
		if err != nil {
			log.Info("Container config error, retrying", "err", err)
			r.set(func(st *corev1.PodStatus) {
				r.container(st, c.Name, k).State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ReasonCreateContainerConfigError, Message: err.Error()}}
			})
			if !r.sleep(ctx, time.Second) {
				return false
			}
			continue
		}
		term := r.exec(log, cmd, image, logPath, c.Name, k, restarts)
		succeeded := term.ExitCode == 0
		restart := !r.stopped() && r.restartable(k, succeeded)
		r.set(func(st *corev1.PodStatus) {
			cs := r.container(st, c.Name, k)
			cs.State = corev1.ContainerState{Terminated: term}
			cs.Ready = false
			if restart {
				cs.LastTerminationState = corev1.ContainerState{Terminated: term}
				cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ReasonCrashLoopBackOff,
					Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", backoff, c.Name, r.spec.Name)}}
			}
		})
		if !restart {
			return succeeded
		}
		// A container that ran long enough is healthy again: reset the backoff, as the kubelet does.
		if term.FinishedAt.Sub(term.StartedAt.Time) > 10*time.Minute {
			backoff = r.p.o.RestartBackoff
		}
		if !r.sleep(ctx, backoff) {
			return false
		}
		backoff = min(2*backoff, r.p.o.MaxRestartBackoff)
		restarts++
		r.set(func(st *corev1.PodStatus) { r.container(st, c.Name, k).RestartCount = int32(restarts) })
	}
}

func (r *podRun) restartable(k kind, succeeded bool) bool {
	switch r.spec.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return !succeeded
	}
	// Always: containers restart after any exit; init containers only after failures.
	return k == regular || !succeeded
}

// command builds the process of one run of a container (and names its image): its root folder with the
// mounts, its environment, argv and working directory, and its log file.
func (r *podRun) command(ctx context.Context, c corev1.Container, exe, logPath string) (*exec.Cmd, string, error) {
	r.mu.Lock()
	volumes := r.volumes
	r.mu.Unlock()
	root := filepath.Join(r.dir, "containers", c.Name, "root")
	base := []corev1.EnvVar{
		{Name: "PATH", Value: os.Getenv("PATH")},
		{Name: "HOME", Value: root},
		{Name: "HOSTNAME", Value: r.spec.Name},
		{Name: RootEnv, Value: root},
	}
	base = append(base, r.p.o.Env...)
	if h, p := r.p.apiHostPort(); h != "" {
		base = append(base, corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: h}, corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: p})
	}
	c.VolumeMounts, base = r.withWebIdentity(c, base, root)
	env, err := r.envSource().environment(ctx, &c, base)
	if err != nil {
		return nil, "", err
	}
	id, err := containerIdentity(r.spec, &c)
	if err != nil {
		return nil, "", err
	}
	r.mu.Lock()
	devices, blocks := r.devices, r.blockVolumes
	r.mu.Unlock()
	if err := linkMounts(root, c.VolumeMounts, volumes, env); err != nil {
		return nil, "", err
	}
	if err := linkDevices(root, c, volumes, blocks); err != nil {
		return nil, "", err
	}
	if err := writeMountTable(root, c, devices); err != nil {
		return nil, "", err
	}
	args, err := argv(exe, expandAll(c.Command, env), expandAll(c.Args, env))
	if err != nil {
		return nil, "", err
	}
	wd := root
	if c.WorkingDir != "" {
		wd = filepath.Join(root, filepath.Clean("/"+c.WorkingDir))
		if err := os.MkdirAll(wd, 0o755); err != nil {
			return nil, "", err
		}
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, "", err
	}
	// As its securityContext's user, groups and supplementary groups (containerIdentity).
	cred, err := id.forNode()
	if err != nil {
		return nil, "", err
	}
	image := args[0]
	if p, err := exec.LookPath(image); err == nil {
		image = p
	}
	if r.p.o.DNSDir != "" {
		// With its own /etc/hosts: the wrapper starts as the node's root and becomes id itself.
		if args, err = r.ownHosts(filepath.Join(r.dir, "containers", c.Name, "hosts"), id, args); err != nil {
			return nil, "", err
		}
		cred = nil
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = env
	cmd.Dir = wd
	// Own process group, so signals reach everything the container started; the kernel
	// kills the process if the node dies without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	return cmd, image, nil
}

func (r *podRun) envSource() envSource {
	return envSource{client: r.p.o.Client, pod: r.spec, nodeName: r.p.o.Name, hostIP: r.p.o.Address, alloc: r.p.o.Capacity}
}

// exec starts one run of a container and waits for it to end, terminating it when the pod
// stops: SIGTERM to its process group, then SIGKILL once the grace period is over.
func (r *podRun) exec(log klog.Logger, cmd *exec.Cmd, image, logPath, name string, k kind, restarts int) *corev1.ContainerStateTerminated {
	term := &corev1.ContainerStateTerminated{ExitCode: 128, Reason: ReasonStartError, StartedAt: metav1.Now()}
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		term.Message, term.FinishedAt = err.Error(), metav1.Now()
		return term
	}
	defer func() { _ = out.Close() }()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		log.Info("Starting container failed", "err", err)
		term.Message, term.FinishedAt = err.Error(), metav1.Now()
		return term
	}
	pid := cmd.Process.Pid
	term.ContainerID = containerID(pid)
	log.Info("Started container", "pid", pid, "sinceSeen", time.Since(r.seen).Round(time.Millisecond),
		"volumes", r.prepared.Sub(r.seen).Round(time.Millisecond), "restarts", restarts)
	log.V(1).Info("Container command", "argv", cmd.Args)
	probe, liveness := r.httpProbes(name)
	r.set(func(st *corev1.PodStatus) {
		cs := r.container(st, name, k)
		cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: term.StartedAt}}
		cs.ContainerID = term.ContainerID
		cs.ImageID = "lab://" + image
		cs.Started = new(true)
		cs.Ready = k == regular && probe == nil
		cs.RestartCount = int32(restarts)
	})
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	if k == regular && probe != nil {
		go r.probeReadiness(log, name, probe, exited)
	}
	if k == regular && liveness != nil {
		go r.probeLiveness(log, name, liveness, exited, pid)
	}
	r.await(exited, pid)
	// Like a container's pid namespace, the group ends with its main process.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	term.FinishedAt = metav1.Now()
	term.Reason = ReasonError
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		term.ExitCode = 128 + int32(ws.Signal())
		return term
	}
	term.ExitCode = int32(cmd.ProcessState.ExitCode())
	if term.ExitCode == 0 {
		term.Reason = ReasonCompleted
	}
	return term
}

// await waits for the process to exit; once the pod stops it sends SIGTERM to the group
// and SIGKILL when the (possibly shortened) grace period is over.
func (r *podRun) await(exited <-chan struct{}, pid int) {
	termSent := false
	for {
		r.mu.Lock()
		stopping, killAt, wake := r.stopping, r.killAt, r.wake
		r.mu.Unlock()
		var kill <-chan time.Time
		var timer *time.Timer
		if stopping {
			if !termSent {
				_ = syscall.Kill(-pid, syscall.SIGTERM)
				termSent = true
			}
			timer = time.NewTimer(time.Until(killAt))
			kill = timer.C
		}
		select {
		case <-exited:
		case <-wake:
		case <-kill:
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			<-exited
		}
		if timer != nil {
			timer.Stop()
		}
		select {
		case <-exited:
			return
		default:
		}
	}
}

// stop begins terminating the pod's processes with the given grace period; a later call
// can shorten it but never extend it.
func (r *podRun) stop(grace time.Duration, reason, message string) {
	grace = max(grace, minGrace)
	r.mu.Lock()
	at := time.Now().Add(grace)
	if r.stopping && !at.Before(r.killAt) {
		r.mu.Unlock()
		return
	}
	if !r.stopping && reason != "" {
		r.status.Reason, r.status.Message = reason, message
	}
	r.stopping = true
	r.killAt = at
	close(r.wake)
	r.wake = make(chan struct{})
	r.mu.Unlock()
}

func (r *podRun) gracePeriod(pod *corev1.Pod) time.Duration {
	s := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		s = *pod.Spec.TerminationGracePeriodSeconds
	}
	if pod.DeletionGracePeriodSeconds != nil {
		s = *pod.DeletionGracePeriodSeconds
	}
	return time.Duration(s) * time.Second
}

// armDeadline (re)starts the activeDeadlineSeconds timer, counted from the pod's start.
func (r *podRun) armDeadline() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.deadline != nil {
		r.deadline.Stop()
		r.deadline = nil
	}
	ads := r.spec.Spec.ActiveDeadlineSeconds
	if ads == nil || r.stopping {
		return
	}
	left := time.Until(r.status.StartTime.Add(time.Duration(*ads) * time.Second))
	r.deadline = time.AfterFunc(left, func() {
		if r.terminal() {
			return
		}
		r.stop(r.gracePeriod(r.spec), ReasonDeadlineExceeded, "Pod was active on the node longer than the specified deadline")
		r.p.changed(r.key)
	})
}

func (r *podRun) terminal() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status.Phase == corev1.PodSucceeded || r.status.Phase == corev1.PodFailed
}

// finish runs after the pod's last process ended: it publishes the final status and, for a
// deleted pod, removes the pod object (grace 0, like the kubelet once containers are gone)
// and the pod's folder; logs stay.
func (r *podRun) finish(ctx context.Context) {
	r.mu.Lock()
	if r.deadline != nil {
		r.deadline.Stop()
	}
	deleting := r.deleting
	r.stopping = true // nothing runs or restarts any more: the phase is final
	r.refreshLocked()
	r.mu.Unlock()
	r.p.changed(r.key)
	if !deleting {
		return
	}
	log := klog.FromContext(ctx).WithValues("pod", klog.KObj(r.spec))
	opts := metav1.DeleteOptions{GracePeriodSeconds: new(int64(0)), Preconditions: metav1.NewUIDPreconditions(string(r.spec.UID))}
	if err := r.p.o.Client.CoreV1().Pods(r.spec.Namespace).Delete(ctx, r.spec.Name, opts); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		log.Info("Deleting pod object failed; the pod controller retries after the grace period", "err", err)
	}
	if err := os.RemoveAll(r.dir); err != nil {
		log.Info("Removing pod folder failed", "err", err)
	}
}

func containerID(pid int) string { return "lab://" + strconv.Itoa(pid) }
